// The party's connection to the coordinator, and nothing about the job: it connects (TLS,
// maxPayload), watches the heartbeat, reconnects with backoff and jitter after a broken
// connection once the party has joined, reads close codes, and hands on every frame
// decoded and validated against the context the session gives it.
import type { Logger } from 'pino';
import WebSocket, { type RawData } from 'ws';
import { ConfigError, PeerError } from '@admm-share/core';
import {
  type CloseKind,
  type CoordinatorMessage,
  type ValidationContext,
  CloseCodes,
  ProtocolError,
  closeKindOf,
  CLOSE_HANDSHAKE_MS,
  ENVELOPE_BYTES,
  MIN_HEARTBEAT_MS,
  RETRIABLE_CLOSE_CODES,
  closeReason,
  decode,
  validateCoordinatorMessage,
} from '@admm-share/protocol';

/** Reconnect backoff: 100 ms doubling up to 5 s, each delay times a factor in [0.5, 1.5). */
const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5000;


/**
 * The largest frame the coordinator sends, from this party's row counts: setup (4 bytes per
 * row index, training and test) or resume (three vectors of 8 bytes per training row, which
 * also bounds a round's one vector and an SGD step's gradient and row indices), plus the
 * envelope. Never the ws default of 100 MiB.
 */
export function maxPayloadFor(rows: { train: number; test: number }): number {
  return Math.max(4 * (rows.train + rows.test), 3 * 8 * rows.train) + ENVELOPE_BYTES;
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
  tls?: { ca?: string; cert?: string; key?: string };
  /** Jitter of the reconnect delay, uniform in [0, 1) (not a secret: Math.random by default). */
  random?: () => number;
}

export interface LinkEvents {
  /** The validation context for the next frame, built from the session's state. */
  context(): ValidationContext;
  /** A connection opened; the coordinator speaks first. `reconnect`: not the first one. */
  open(reconnect: boolean): void;
  /** The connection broke; another is tried after a delay. */
  lost(why: string): void;
  /** A frame that decoded and validated. */
  message(msg: CoordinatorMessage): void;
  /** A frame that did not decode or validate (a ProtocolError). The link stays open: the receiver decides. */
  invalid(err: unknown): void;
  /** The link gave up (connection refused, closed on purpose, or could not rejoin in time). */
  failed(err: PeerError): void;
}

type LinkState = 'connecting' | 'open' | 'finished';

export class CoordinatorLink {
  private ws: WebSocket;
  private state: LinkState = 'connecting';
  /** Once the party has joined the job, a broken connection is retried instead of failing. */
  private retrying = false;
  /** The current connection's hello was answered: the connect timeout no longer applies. */
  private answered = false;
  private lostAt: number | undefined;
  private attempt = 0;
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
    this.ws = this.connect();
  }

  /** Send an encoded message on the current connection. */
  send(bytes: Uint8Array): void {
    this.ws.send(bytes);
  }

  /** The coordinator answered this connection (welcome): stop the connect timer. */
  markAnswered(): void {
    this.answered = true;
    clearTimeout(this.connectTimer);
  }

  /** The party joined the job: from now on a broken connection is retried, with a fresh backoff. */
  markJoined(): void {
    this.retrying = true;
    this.lostAt = undefined;
    this.attempt = 0;
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
    const ws = new WebSocket(this.url, {
      maxPayload: opts.maxPayload,
      perMessageDeflate: false,
      handshakeTimeout: opts.connectTimeoutMs,
      ...(opts.tls?.ca ? { ca: opts.tls.ca } : {}),
      ...(opts.tls?.cert ? { cert: opts.tls.cert, key: opts.tls.key } : {}),
      rejectUnauthorized: true,
    });
    const current = () => ws === this.ws && this.state !== 'finished';
    this.state = 'connecting';
    this.answered = false;
    clearTimeout(this.connectTimer);
    this.connectTimer = setTimeout(() => {
      if (!current() || this.answered) return;
      if (this.retrying) this.dropped(`no answer within ${opts.connectTimeoutMs} ms`);
      else this.fail(new PeerError(`no answer from ${opts.coordinator} within ${opts.connectTimeoutMs} ms`), true);
    }, opts.connectTimeoutMs);
    ws.on('error', (err) => {
      if (!current()) return;
      const e = err as NodeJS.ErrnoException;
      const tlsHint = /CERT|SELF_SIGNED|VERIFY|ERR_TLS|altnames/i.test(`${e.code} ${e.message}`)
        ? ` (TLS: the coordinator's certificate is not trusted${opts.tls?.ca ? ' by --tls-ca' : ''}: ${e.message})`
        : '';
      if (this.retrying && !tlsHint) this.dropped(e.code ?? e.message);
      else this.fail(new PeerError(`connection to ${opts.coordinator} failed: ${e.code ?? e.message}${tlsHint}`), true);
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
      // Only a connection that broke (not one the coordinator closed on purpose) is retried.
      if (this.retrying && RETRIABLE_CLOSE_CODES.has(code)) this.dropped(`code ${code}`);
      else this.fail(new PeerError(`coordinator closed the connection (code ${code}: ${text})`), false);
    });
    return ws;
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    let msg: CoordinatorMessage;
    try {
      if (!isBinary) throw new ProtocolError('malformed', 'text frame; messages are binary MessagePack');
      msg = validateCoordinatorMessage(decode(data as Buffer), this.events.context());
    } catch (err) {
      this.events.invalid(err);
      return;
    }
    this.events.message(msg);
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
   * The connection was lost during the job: reconnect with exponential backoff and jitter
   * until --reconnect-timeout; on rejoining, the coordinator sends the job's setup again and
   * the round to resume from.
   */
  private dropped(why: string): void {
    if (this.state === 'finished') return;
    const now = Date.now();
    this.lostAt ??= now;
    if (now - this.lostAt > this.opts.reconnectTimeoutMs) {
      this.fail(new PeerError(`lost the coordinator (${why}) and could not rejoin within ${this.opts.reconnectTimeoutMs} ms`), false);
      return;
    }
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** this.attempt) * (0.5 + this.random());
    this.attempt++;
    this.state = 'connecting';
    this.log.warn({ why, attempt: this.attempt, delayMs: Math.round(delay) }, 'connection lost; reconnecting');
    this.events.lost(why);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      if (this.state !== 'finished') this.ws = this.connect();
    }, delay);
  }
}
