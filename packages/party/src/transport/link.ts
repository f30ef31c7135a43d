// The party's connection to the coordinator, and nothing about the job: it connects (TLS,
// maxPayload), watches the heartbeat, retries with backoff and jitter (a coordinator not yet
// listening or busy while joining, a broken connection from the hello on), reads close codes, and
// hands on every frame decoded and validated against the context the session gives it.
import type { Logger } from 'pino';
import WebSocket, { type RawData } from 'ws';
import { ConfigError, PeerError } from '@admm-share/core';
import {
  type ByteSource,
  type CloseKind,
  type EncodeScratch,
  PartAssembler,
  type PartyMessage,
  type ValidationContext,
  type WholeCoordinatorMessage,
  CloseCodes,
  ProtocolError,
  closeKindOf,
  CLOSE_HANDSHAKE_MS,
  ENVELOPE_BYTES,
  POINT_BYTES,
  MIN_HEARTBEAT_MS,
  RETRIABLE_CLOSE_CODES,
  ReservedCloseCodes,
  closeReason,
  decode,
  encodeToSend,
  inParts,
  sentInParts,
  validateCoordinatorMessage,
} from '@admm-share/protocol';
import { MessageWriter, zeroMask } from './frames.js';
import type { ClientTls } from './tls.js';

/** Reconnect backoff: 100 ms doubling up to 5 s, each delay times a factor in [0.5, 1.5). */
const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5000;

/**
 * Connection errors that mean nothing is listening at the coordinator's address yet: the
 * coordinator has not started (ECONNREFUSED), or under docker compose its container is not in
 * the network's DNS yet (ENOTFOUND, EAI_AGAIN). Start order is not guaranteed there, so a
 * party retries these within --connect-timeout instead of failing at once. Not ECONNRESET:
 * before joining that is as likely a TLS peer refusing the party's certificate, which another
 * attempt will not change. Once admitted, a party retries every connection error but TLS ones.
 */
export const NOT_LISTENING_ERRORS: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * 4014, a coordinator flooded with connections that have not said hello yet (admission's cap),
 * is retried at any time; so are RETRIABLE_CLOSE_CODES (a broken connection, a coordinator
 * going away), from the hello to the job's end, the intersection included.
 */
const BUSY_CODE: number = CloseCodes.busy.code;

/**
 * Longest a reconnect attempt's opening handshake (TCP connect, TLS, HTTP upgrade) may take
 * (at most --connect-timeout). During an outage an attempt whose packets are lost would
 * otherwise hang for all of --connect-timeout (30 s) and the party would retry too rarely to
 * come back within --reconnect-timeout; a handshake that has not finished in 5 s on a live
 * network is not going to.
 */
export const RECONNECT_ATTEMPT_MS = 5_000;

/** Why a connection closed without a close frame (1005, 1006), for the logs and errors: it was lost, nobody closed it. */
const LOST_CODES: ReadonlySet<number> = new Set([ReservedCloseCodes.noStatus.code, ReservedCloseCodes.abnormal.code]);

/**
 * The largest frame the coordinator sends, from this party's row counts: setup (4 bytes per
 * row index, training and test), resume (three vectors of 8 bytes per training row, which
 * also bounds a round's one vector and an SGD step's gradient and row indices) or psi (a
 * point per label id, up to the party's cap), plus the envelope. Never the ws default of 100 MiB.
 */
export function maxPayloadFor(rows: { train: number; test: number; labelIds: number }): number {
  return Math.max(4 * (rows.train + rows.test), 3 * 8 * rows.train, POINT_BYTES * rows.labelIds) + ENVELOPE_BYTES;
}

/** The coordinator's URL, checked: ws:// or wss://, and TLS options only with wss://. */
export function coordinatorUrl(coordinator: string, tls: LinkOptions['tls']): URL {
  let url: URL;
  try {
    url = new URL(coordinator);
    if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw new Error('not ws:// or wss://');
  } catch (err) {
    throw new ConfigError(`--coordinator '${coordinator}' is not a ws:// URL (${(err as Error).message})`);
  }
  if (tls && url.protocol !== 'wss:') throw new ConfigError('--tls-ca, --tls-cert and --tls-key need a wss:// coordinator URL');
  return url;
}

export interface LinkOptions {
  /** ws:// or wss:// URL of the coordinator, as the operator gave it. */
  coordinator: string;
  maxPayload: number;
  /** Give up (or, once joined, reconnect) if the coordinator does not answer within this time (ms). */
  connectTimeoutMs: number;
  /** After losing the connection during the job, keep trying to rejoin for this long (ms). */
  reconnectTimeoutMs: number;
  /** No ping or message from the coordinator for this long means the connection is dead (ms). */
  heartbeatTimeoutMs: number;
  /** wss://: trust only this CA (pinning); cert and key for mutual TLS. */
  tls?: ClientTls;
  /** Jitter of the reconnect delay, uniform in [0, 1) (not a secret: Math.random by default). */
  random?: () => number;
  /** Close codes retried once admitted (default RETRIABLE_CLOSE_CODES; a scoring party's: SCORING_RETRIABLE_CLOSE_CODES). */
  retriableCodes?: ReadonlySet<number>;
}

export interface LinkEvents {
  /** The validation context for the next frame, built from the session's state. */
  context(): ValidationContext;
  /** A connection opened; the coordinator speaks first. `reconnect`: not the first one. */
  open(reconnect: boolean): void;
  /** The connection broke; another is tried after a delay. */
  lost(why: string): void;
  /** A frame that decoded and validated (a `round` sent in parts: once its last part is in). */
  message(msg: WholeCoordinatorMessage): void;
  /** A frame that did not decode or validate (a ProtocolError). The link stays open: the receiver decides. */
  invalid(err: unknown): void;
  /** The link gave up (connection refused, closed on purpose, or could not rejoin in time). */
  failed(err: PeerError): void;
  /** The coordinator closed with 'done' without a `done` message (a prediction job's end): true if that ends the session well. */
  closedDone?(): boolean;
  /** Where a round's vector of n values is to be decoded, if the session has a place for it (the x-update's, RidgeXUpdate.broadcastInto); else the link's own array. */
  roundInto?(n: number): Float64Array | undefined;
}

type LinkState = 'connecting' | 'open' | 'finished';

/** Why an attempt is retried: the coordinator said 4014, nothing listens (yet), or a connection broke. */
type RetryCause = 'busy' | 'not listening' | 'broken';

export class CoordinatorLink {
  private ws: WebSocket;
  private state: LinkState = 'connecting';
  /**
   * Once the coordinator has admitted the party (its welcome), the party is in the job: a
   * broken connection is retried within --reconnect-timeout, each attempt's handshake within
   * RECONNECT_ATTEMPT_MS, and the heartbeat is watched.
   */
  private retrying = false;
  /** The current connection's hello was answered: the connect timeout no longer applies. */
  private answered = false;
  /**
   * When the current series of attempts began: the first connection (before the first
   * welcome), or the loss of the connection (once admitted; unset while connected).
   */
  private lostAt: number | undefined;
  private attempt = 0;
  /** Why the last attempt failed, for the error if the next one does not come in time. */
  private lastWhy: { why: string; cause: RetryCause } | undefined;
  private connectTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly random: () => number;
  private readonly url: URL;

  constructor(
    private readonly opts: LinkOptions,
    private readonly log: Logger,
    private readonly events: LinkEvents,
  ) {
    this.random = opts.random ?? Math.random;
    this.url = coordinatorUrl(opts.coordinator, opts.tls);
    this.lostAt = Date.now();
    this.ws = this.connect();
  }

  /** The buffer `send` reuses. */
  private readonly scratch: EncodeScratch = {};
  /** The parts of a round's long vector, put together in `received` (reused round after round: the session does not keep a round's vector) or in the session's place for it (roundInto). */
  private readonly parts = new PartAssembler();
  private received: Float64Array | undefined;
  private readonly writer = new MessageWriter();

  /**
   * Send a message on the current connection, encoded into the link's reusable buffer when
   * nothing sent before is still queued on the socket or waiting to be sent (so the bytes last
   * encoded there have left for the system), else into a fresh one.
   */
  send(msg: PartyMessage): void {
    const ws = this.ws;
    if (msg.type === 'share' && sentInParts(msg.share.length)) {
      // In parts, each encoded into the reusable buffer once the one before has been written.
      const parts = inParts(msg);
      this.writer.writeEach(ws, () => {
        const p = parts.next();
        return p.done ? undefined : encodeToSend(p.value, this.scratch, ws.bufferedAmount);
      });
    } else this.writer.write(ws, encodeToSend(msg, this.scratch, this.writer.busy(ws) ? undefined : ws.bufferedAmount));
  }

  /** Send a message already encoded, or made a piece at a time (encodeIdsSource), on the current connection. */
  sendEncoded(message: Uint8Array | ByteSource): void {
    this.writer.write(this.ws, message);
  }

  /**
   * The coordinator admitted this connection (welcome): the connect timer stops, and from now
   * on a broken connection is retried, with a fresh backoff and --reconnect-timeout from its loss.
   */
  markAnswered(): void {
    this.answered = true;
    clearTimeout(this.connectTimer);
    this.retrying = true;
    this.lostAt = undefined;
    this.attempt = 0;
    this.lastWhy = undefined;
  }

  /**
   * The job is over: close with `kind` (normally 'done') and resolve once the close handshake
   * is over, so the coordinator sees a clean close (or after CLOSE_HANDSHAKE_MS without one).
   */
  finish(kind: CloseKind, detail: string): Promise<void> {
    const ws = this.ws;
    this.stop();
    return new Promise((resolve) => {
      const fallback = setTimeout(() => ws.terminate(), CLOSE_HANDSHAKE_MS);
      ws.once('close', () => {
        clearTimeout(fallback);
        resolve();
      });
      ws.close(CloseCodes[kind].code, detail);
    });
  }

  /**
   * Once joined: close this connection with `kind` (the coordinator then fails what it asked on
   * it) and rejoin as after a broken one. False if the party has not joined (or has finished).
   */
  refuseAndRejoin(kind: CloseKind, detail: string): boolean {
    if (this.state === 'finished' || !this.retrying) return false;
    this.retireCurrent();
    this.closeSocket(kind, detail);
    this.dropped(`closed by this party: ${CloseCodes[kind].reason}`, 'broken');
    return true;
  }

  /** Makes the current connection's listeners ignore it from now on (set by connect). */
  private retireCurrent: () => void = () => undefined;

  /** Give up on the connection now, telling the coordinator why when it is open. No events follow. */
  abort(kind: CloseKind, detail: string): void {
    if (this.state === 'finished') return;
    this.stop();
    this.closeSocket(kind, detail);
  }

  private stop(): void {
    this.state = 'finished';
    clearTimeout(this.connectTimer);
    clearTimeout(this.retryTimer);
  }

  private closeSocket(kind: CloseKind, detail: string): void {
    const ws = this.ws;
    if (ws.readyState === WebSocket.OPEN) ws.close(CloseCodes[kind].code, closeReason(kind, detail));
    else if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
  }

  private fail(err: PeerError, close: boolean): void {
    if (this.state === 'finished') return;
    this.stop();
    if (close) this.closeSocket('aborted', err.message);
    this.events.failed(err);
  }

  /** Open a connection; every listener ignores it once it is no longer the current one. */
  private connect(): WebSocket {
    const { opts, log } = this;
    this.parts.reset();
    // Before joining, all attempts share one --connect-timeout, counted from the first.
    const timeoutMs = this.retrying ? opts.connectTimeoutMs : Math.max(1, (this.lostAt ?? Date.now()) + opts.connectTimeoutMs - Date.now());
    const ws = new WebSocket(this.url, {
      maxPayload: opts.maxPayload,
      perMessageDeflate: false,
      generateMask: zeroMask,
      handshakeTimeout: this.retrying ? Math.min(timeoutMs, RECONNECT_ATTEMPT_MS) : timeoutMs,
      ...(opts.tls?.ca ? { ca: opts.tls.ca } : {}),
      ...(opts.tls?.cert ? { cert: opts.tls.cert, key: opts.tls.key } : {}),
      rejectUnauthorized: true,
    });
    /** Set once this socket's failure has been dealt with (retried), so its 'close' is not counted again. */
    let handled = false;
    const current = () => ws === this.ws && this.state !== 'finished' && !handled;
    this.retireCurrent = () => {
      handled = true;
      clearTimeout(this.connectTimer);
    };
    const retry = (why: string, cause: RetryCause) => {
      this.retireCurrent();
      this.dropped(why, cause);
    };
    this.state = 'connecting';
    this.answered = false;
    clearTimeout(this.connectTimer);
    this.connectTimer = setTimeout(() => {
      if (!current() || this.answered) return;
      if (this.retrying) retry(`no answer within ${opts.connectTimeoutMs} ms`, 'broken');
      else if (this.lastWhy) this.fail(this.gaveUp(`${this.lastWhy.why}, then no answer`, this.lastWhy.cause), true);
      else this.fail(new PeerError(`no answer from ${opts.coordinator} within ${opts.connectTimeoutMs} ms`), true);
    }, timeoutMs);
    ws.on('error', (err) => {
      if (!current()) return;
      const e = err as NodeJS.ErrnoException;
      const why = e.code ?? e.message;
      if (/CERT|SELF_SIGNED|VERIFY|ERR_TLS|altnames/i.test(`${e.code} ${e.message}`)) {
        // Never retried: another attempt meets the same certificate.
        this.fail(new PeerError(`connection to ${opts.coordinator} failed: ${why} (TLS: the coordinator's certificate is not trusted${opts.tls?.ca ? ' by --tls-ca' : ''}: ${e.message})`), true);
      } else if (e.code !== undefined && NOT_LISTENING_ERRORS.has(e.code)) retry(why, 'not listening');
      else if (this.retrying) retry(why, 'broken');
      else this.fail(new PeerError(`connection to ${opts.coordinator} failed: ${why}${e.syscall ? `: is the coordinator running at ${opts.coordinator}?` : ''}`), true);
    });
    ws.on('open', () => {
      if (!current()) return;
      log.info({ coordinator: opts.coordinator, reconnect: this.retrying }, 'connected');
      this.state = 'open';
      this.events.open(this.retrying);
    });
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (current()) this.onFrame(data, isBinary);
    });
    this.watchHeartbeat(ws, current);
    ws.on('close', (code, reason) => {
      if (!current()) return;
      clearTimeout(this.connectTimer);
      const kind = closeKindOf(code);
      const text = reason.toString() || (kind ? CloseCodes[kind].reason : 'no reason given');
      // A busy coordinator (4014) is retried, admitted or not, and so is a connection that broke
      // or a coordinator going away; not a close the coordinator made on purpose (but a
      // scoring party's request timeout, once admitted).
      const retriable = RETRIABLE_CLOSE_CODES.has(code) || (this.retrying && (opts.retriableCodes ?? RETRIABLE_CLOSE_CODES).has(code));
      if (code === BUSY_CODE) retry(`code ${code}: ${text}`, 'busy');
      else if (retriable) retry(LOST_CODES.has(code) ? `connection lost (code ${code})` : `code ${code}: ${text}`, 'broken');
      else if (code === CloseCodes.done.code && this.events.closedDone?.()) this.state = 'finished';
      else this.fail(new PeerError(`coordinator closed the connection (code ${code}: ${text})`), false);
    });
    return ws;
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    let msg: WholeCoordinatorMessage | undefined;
    try {
      if (!isBinary) throw new ProtocolError('malformed', 'text frame; messages are binary MessagePack');
      const ctx = this.events.context();
      const n = ctx.n ?? 0;
      const received = () => {
        const own = this.events.roundInto?.(n);
        if (own?.length === n) return own;
        return this.received?.length === n ? this.received : (this.received = new Float64Array(n));
      };
      // A round's vector goes into `received`, whole or in parts (undefined until its message is in).
      const got = validateCoordinatorMessage(decode(data as Buffer, this.parts.vectorInto('round', n, received)), ctx);
      msg = this.parts.take(got, 'round', n, received, 'before the setup');
    } catch (err) {
      this.parts.reset();
      this.events.invalid(err);
      return;
    }
    if (msg) this.events.message(msg);
  }

  /**
   * The coordinator pings every --heartbeat; silence for --heartbeat-timeout means a dead
   * connection (a half-open socket never reports a close): drop it and rejoin.
   */
  private watchHeartbeat(ws: WebSocket, current: () => boolean): void {
    const { heartbeatTimeoutMs } = this.opts;
    let lastSign = Date.now();
    const sign = () => (lastSign = Date.now());
    ws.on('ping', sign);
    ws.on('message', sign);
    const watchdog = setInterval(() => {
      if (!current() || ws.readyState !== WebSocket.OPEN) return clearInterval(watchdog);
      if (this.retrying && Date.now() - lastSign > heartbeatTimeoutMs) {
        this.log.warn({ heartbeatTimeoutMs }, 'no heartbeat from the coordinator; dropping the connection');
        clearInterval(watchdog);
        ws.terminate();
      }
    }, Math.max(MIN_HEARTBEAT_MS, heartbeatTimeoutMs / 4));
    watchdog.unref();
    ws.on('close', () => clearInterval(watchdog));
  }

  /**
   * An attempt failed in a way worth retrying: reconnect with exponential backoff and jitter,
   * before the first welcome until --connect-timeout after the first attempt, once admitted
   * until --reconnect-timeout after the connection was lost (an attempt is started up to that
   * deadline); on rejoining, the coordinator intersects the ids again (during the
   * intersection) or sends the job's setup again and the round to resume from.
   */
  private dropped(why: string, cause: RetryCause): void {
    if (this.state === 'finished') return;
    const now = Date.now();
    this.lostAt ??= now;
    const budgetMs = this.retrying ? this.opts.reconnectTimeoutMs : this.opts.connectTimeoutMs;
    const leftMs = this.lostAt + budgetMs - now;
    this.lastWhy = { why, cause };
    if (leftMs < 0) {
      this.fail(this.gaveUp(why, cause), false);
      return;
    }
    const delay = Math.min(leftMs, Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** this.attempt) * (0.5 + this.random()));
    this.attempt++;
    this.state = 'connecting';
    const fields = { why, attempt: this.attempt, delayMs: Math.round(delay), giveUpInMs: Math.round(leftMs) };
    if (this.retrying || cause === 'broken') this.log.warn(fields, 'connection lost; reconnecting');
    else if (cause === 'busy') this.log.warn(fields, 'coordinator busy (too many connections waiting to say hello); retrying');
    else this.log.warn({ ...fields, coordinator: this.opts.coordinator }, 'coordinator not reachable (not started yet?); retrying');
    this.events.lost(why);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      if (this.state !== 'finished') this.ws = this.connect();
    }, delay);
  }

  /** The error once retrying has run out of time: what the attempts met, and what to do. */
  private gaveUp(why: string, cause: RetryCause): PeerError {
    const { coordinator, connectTimeoutMs, reconnectTimeoutMs } = this.opts;
    if (this.retrying) return new PeerError(`connection to ${coordinator} lost; could not rejoin within --reconnect-timeout ${reconnectTimeoutMs} ms (last attempt: ${why})`);
    const tries = `${this.attempt + 1} attempts in ${connectTimeoutMs} ms`;
    if (cause === 'broken') return new PeerError(`connection to ${coordinator} lost before it admitted this party (${why}; ${tries}): raise --connect-timeout, or check the network`);
    if (cause === 'busy')
      return new PeerError(`the coordinator at ${coordinator} stayed busy (${why}; ${tries}): too many connections wait to say hello there; try again later or raise --connect-timeout`);
    return new PeerError(`connection to ${coordinator} failed: ${why} (${tries}): is the coordinator running at ${coordinator}? start it first, or raise --connect-timeout`);
  }
}
