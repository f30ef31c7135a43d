/**
 * One party's link to the coordinator, across reconnections: the socket it is on now (if
 * any), sending with backpressure, the heartbeat, and requests. A request is a message sent
 * together with the replies that may answer it and the validation context they are checked
 * against (job, N, round, step), with a deadline; it is resent when the party rejoins. A
 * frame that no request or handshake step is waiting for is refused at once, so nothing is
 * queued and nothing is validated against a context that a loop happens to have left behind.
 */
import type { Logger } from 'pino';
import type { RawData, WebSocket } from 'ws';
import { InternalError, PeerError } from '@admm-share/core';
import {
  type CloseKind,
  type CoordinatorMessage,
  type EncodeScratch,
  PartAssembler,
  type PartyMessage,
  type PrivacyInfo,
  type Round,
  type ValidationContext,
  CloseCodes,
  ProtocolError,
  assertNever,
  closeReason,
  decode,
  encode,
  encodeToSend,
  inParts,
  sentInParts,
  validatePartyMessage,
} from '@admm-share/protocol';
import { closeAndDrop } from './drop.js';
import type { Traffic } from '../bytes.js';

/** A party's refusal of one lookup (its caps on the ids it answers): that request fails, the party stays. */
export class LookupRefused extends PeerError {}

/** Unsent bytes a party may leave queued (it is not reading), in messages of at least SLOW_READER_UNIT bytes. */
const MAX_QUEUED_MESSAGES = 4;
/** 1 MiB: small messages still get a queue of a few MiB before the reader counts as stuck. */
const SLOW_READER_UNIT = 1 << 20;

export type PartyMessageType = PartyMessage['type'];
export type Reply<T extends PartyMessageType> = Extract<PartyMessage, { type: T }>;


export interface ConnectionDeps {
  log: Logger;
  traffic: Traffic;
  roundTimeoutMs: number;
  /** The party broke the protocol, stopped reading or did not answer: the job cannot go on. */
  onFailure(err: Error): void;
  /** The party's socket closed (after `detach`, this connection has no socket). */
  onClose(conn: PartyConnection, code: number, reason: string): void;
  /** A request was answered: after how long, and the bytes each way on this connection meanwhile (monitor.ts). */
  onReply?(conn: PartyConnection, msg: PartyMessage, ctx: ValidationContext, seconds: number, bytes: Traffic): void;
}

interface Waiting {
  types: readonly PartyMessageType[];
  ctx: ValidationContext;
  deliver(msg: PartyMessage): void;
}

interface Pending extends Waiting {
  out: Outgoing;
  /** Where a share's vector is decoded, whole or in parts (a fresh array when not given). */
  shareInto?: () => Float64Array;
  fail(err: Error): void;
}

/**
 * What a request sends: encoded bytes, or a round whose vector is long (more than PARTS_ABOVE
 * values), sent in parts (parts.ts), each encoded into the connection's reusable buffer once the
 * one before has left for the system. The vector must stay as it is until the reply (a rejoin
 * sends it again).
 */
export type Outgoing = Uint8Array | { parted: Round };

/** Whether `msg` is sent in parts: a round with a long vector. */
function parted(msg: CoordinatorMessage): msg is Round {
  return msg.type === 'round' && sentInParts(msg.c.length);
}

/** `msg` encoded once for every party that is sent it (a long round's parts are encoded by each connection as they are sent). */
export function encodeShared(msg: CoordinatorMessage): Outgoing {
  return parted(msg) ? { parted: msg } : encode(msg);
}

function isReply<T extends PartyMessageType>(msg: PartyMessage, types: readonly T[]): msg is Reply<T> {
  return (types as readonly string[]).includes(msg.type);
}

function toBytes(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

export class PartyConnection {
  /** connected: has a socket; away: lost it during a job it may rejoin; absent: not joined; closed: done. */
  status: 'absent' | 'connected' | 'away' | 'closed' = 'absent';
  features = 0;
  /** Whether the party adds noise (from its hello). */
  noise = false;
  fileRows = { train: 0, test: 0 };
  /** The privacy setting its last ready reported. */
  privacy: PrivacyInfo | undefined;
  /** Bytes in and out on this party's connections (after the hello). */
  readonly bytes: Traffic = { in: 0, out: 0 };
  /** Times it rejoined after losing its connection. */
  rejoins = 0;
  private ws: WebSocket | undefined;
  private alive = true;
  /** The close this side sent, if it closed the connection (the socket is then dropped, so the peer's reply is never read). */
  private closing: { code: number; reason: string } | undefined;
  /** A handshake step (ids, ready while joining or rejoining): takes precedence over `pending`. */
  private step: Waiting | undefined;
  private pending: Pending | undefined;
  /** The last message of the job (done), resent to a party that rejoins after it. */
  private final: Uint8Array | undefined;
  /** The buffer encodeForSend reuses. */
  private readonly scratch: EncodeScratch = {};
  /** A share's parts as they come (parts.ts). */
  private readonly parts = new PartAssembler();

  constructor(
    readonly id: string,
    /** Position in the job's party order (m). */
    readonly index: number,
    private readonly deps: ConnectionDeps,
  ) {}

  /** Connections taken over so far: work begun for an earlier one is not delivered to a later one. */
  generation = 0;

  /** Take over a socket whose hello was accepted. */
  attach(ws: WebSocket): void {
    this.generation++;
    this.ws = ws;
    this.status = 'connected';
    this.alive = true;
    this.closing = undefined;
    this.step = undefined;
    this.parts.reset();
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (ws === this.ws) this.onFrame(data, isBinary);
    });
    ws.on('pong', () => (this.alive = true));
    ws.on('close', (code: number, reason: Buffer) => {
      if (ws !== this.ws) return;
      this.ws = undefined;
      this.step = undefined;
      // After our own close the socket was dropped (1006 here): what ended it is the code we sent.
      const ours = this.closing;
      this.deps.onClose(this, ours?.code ?? code, ours?.reason ?? reason.toString());
    });
  }

  get connected(): boolean {
    return this.ws !== undefined;
  }

  /** Heartbeat tick: a party that did not answer the last ping is cut off (it may rejoin). */
  heartbeat(intervalMs: number): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== ws.OPEN) return;
    if (!this.alive) {
      this.deps.log.warn({ party: this.id, heartbeatMs: intervalMs }, 'no heartbeat; dropping the connection');
      ws.terminate();
      return;
    }
    this.alive = false;
    ws.ping();
  }

  send(msg: CoordinatorMessage): void {
    this.sendBytes(encode(msg));
  }

  /**
   * `msg` encoded for this party, for a request: into the connection's reusable buffer when
   * nothing sent before is still queued on the socket (so the bytes last encoded there have
   * left for the system), else into a fresh one. The bytes stay as they are until the next
   * encodeForSend, which comes only after this request's reply: a rejoin can resend them.
   */
  encodeForSend(msg: CoordinatorMessage): Outgoing {
    if (parted(msg)) return { parted: msg };
    return encodeToSend(msg, this.scratch, this.ws?.bufferedAmount);
  }

  /** Messages one after the other, each encoded once the one before is written (a set's `psi` messages, psiInParts). */
  sendEach(messages: Iterable<CoordinatorMessage>): void {
    const ws = this.reading(SLOW_READER_UNIT);
    if (ws) this.sendSequence(ws, messages[Symbol.iterator]());
  }

  sendBytes(out: Outgoing): void {
    const ws = this.reading(out instanceof Uint8Array ? out.length : 8 * out.parted.c.length);
    if (!ws) return;
    if (!(out instanceof Uint8Array)) return this.sendSequence(ws, inParts(out.parted));
    this.count(out.length);
    ws.send(out);
  }

  /**
   * The socket to send `length` more bytes on, or undefined: none while the party is away (it
   * gets what it needs when it rejoins), or it stopped reading. A party that stops reading would
   * make its queue grow without bound: it is closed instead.
   */
  private reading(length: number): WebSocket | undefined {
    const ws = this.ws;
    if (!ws) return undefined;
    if (ws.bufferedAmount > MAX_QUEUED_MESSAGES * Math.max(length, SLOW_READER_UNIT)) {
      const detail = `${ws.bufferedAmount} bytes unread`;
      this.close('slowReader', detail);
      this.deps.onFailure(new PeerError(`party ${this.id} stopped reading (${detail})`));
      return undefined;
    }
    return ws;
  }

  private count(bytes: number): void {
    this.deps.traffic.out += bytes;
    this.bytes.out += bytes;
  }

  /** `messages` on `ws`, each encoded once the one before is written (a long round's parts); stops if the socket is no longer this party's or open. */
  private sendSequence(ws: WebSocket, parts: Iterator<CoordinatorMessage>): void {
    const next = (err?: Error): void => {
      if (err || ws !== this.ws || ws.readyState !== ws.OPEN) return;
      const p = parts.next();
      if (p.done) return;
      const bytes = encodeToSend(p.value, this.scratch, ws.bufferedAmount);
      this.count(bytes.length);
      ws.send(bytes, next);
    };
    next();
  }

  /**
   * Send `bytes` (one encoding may serve every party) and wait for one of `types`, validated
   * against `ctx`. The party has --round-timeout to answer, across a rejoin.
   */
  request<T extends PartyMessageType>(out: Outgoing, types: readonly T[], ctx: ValidationContext, shareInto?: () => Float64Array): Promise<Reply<T>> {
    if (this.pending) return Promise.reject(new Error(`internal: a second request to party ${this.id} while one is pending`));
    const sent = performance.now();
    const before = { in: this.bytes.in, out: this.bytes.out };
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => {
        this.pending = undefined;
        const detail = `no '${types.join("' or '")}' within ${this.deps.roundTimeoutMs} ms`;
        this.close('timeout', detail);
        reject(new PeerError(`party ${this.id}: ${detail}`));
      }, this.deps.roundTimeoutMs);
      this.pending = {
        out,
        shareInto,
        types,
        ctx,
        deliver: (msg) => {
          clearTimeout(deadline);
          this.pending = undefined;
          this.deps.onReply?.(this, msg, ctx, (performance.now() - sent) / 1000, { in: this.bytes.in - before.in, out: this.bytes.out - before.out });
          if (isReply(msg, types)) resolve(msg);
        },
        fail: (err) => {
          clearTimeout(deadline);
          this.pending = undefined;
          reject(err);
        },
      };
      this.sendBytes(out);
    });
  }

  /** A handshake step: the next message must be one of `types`; `deliver` may set the next step. */
  expect<T extends PartyMessageType>(types: readonly T[], ctx: ValidationContext, deliver: (msg: Reply<T>) => void): void {
    this.step = {
      types,
      ctx,
      deliver: (msg) => {
        this.step = undefined;
        if (isReply(msg, types)) deliver(msg);
      },
    };
  }

  /** The job's last message: the party answers it by closing with code `done`. */
  sendFinal(bytes: Uint8Array): void {
    this.final = bytes;
    this.sendBytes(bytes);
  }

  /** `msg` answers the request waiting for this party, if that request asks for its type: delivered (true), else false. */
  answerPending(msg: PartyMessage): boolean {
    const pending = this.pending;
    if (!pending?.types.includes(msg.type)) return false;
    pending.deliver(msg);
    return true;
  }

  /** After a rejoin: send again what the party has not answered yet. */
  resendOutstanding(): void {
    if (this.pending) this.sendBytes(this.pending.out);
    else if (this.final) this.sendBytes(this.final);
  }

  /** Close with `kind`: the close frame is sent, nothing more is read, and the socket is dropped once the frame has left. */
  close(kind: CloseKind, detail?: string): void {
    const ws = this.ws;
    if (!ws || this.closing) return;
    this.closing = { code: CloseCodes[kind].code, reason: closeReason(kind, detail) };
    this.deps.log[kind === 'done' ? 'info' : 'warn']({ party: this.id, close: CloseCodes[kind].code, detail }, 'closing connection');
    closeAndDrop(ws, kind, detail);
  }

  /** The request waiting for this party (if any) fails with `err`. */
  failPending(err: Error): void {
    this.pending?.fail(err);
  }

  /** The job failed: nothing more is awaited from this party. */
  abort(err: Error, detail: string): void {
    this.pending?.fail(err);
    this.step = undefined;
    if (this.ws && this.ws.readyState === this.ws.OPEN) this.close('aborted', detail);
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    const bytes = toBytes(data);
    this.deps.traffic.in += bytes.length;
    this.bytes.in += bytes.length;
    // Once a connection is being closed nothing more it says is read, decoded or logged.
    if (this.closing) return;
    try {
      if (!isBinary) throw new ProtocolError('malformed', 'text frame; messages are binary MessagePack');
      const waiting = this.step ?? this.pending;
      if (!waiting) throw new ProtocolError('unexpected', 'a message when none was asked for');
      // A share's vector may come in parts; nothing else's does. Whole or in parts, it goes
      // into the request's array when it has one.
      const n = waiting.types.includes('share') ? (waiting.ctx.n ?? 0) : 0;
      const into = (waiting === this.pending && this.pending.shareInto) || (() => new Float64Array(n));
      const got = validatePartyMessage(decode(bytes, this.parts.vectorInto('share', n, into)), waiting.ctx);
      const msg = this.parts.take(got, 'share', n, into, `while waiting for '${waiting.types.join("' or '")}'`);
      if (!msg) return;
      switch (msg.type) {
        case 'hello':
          throw new ProtocolError('unexpected', 'a second hello');
        case 'ids':
        case 'ready':
        case 'share':
        case 'exhausted':
        case 'scores':
        case 'batchScores':
        case 'released':
        case 'fitted':
        case 'found':
        case 'partial':
          // Each is only ever a reply: taken if it is what the party was asked for.
          if (!waiting.types.includes(msg.type)) throw new ProtocolError('unexpected', `'${msg.type}' while waiting for '${waiting.types.join("' or '")}'`);
          // A party's refusal of one lookup (its caps on ids looked up): that request fails, the connection stays.
          if (msg.type === 'found' && msg.refused !== undefined && waiting === this.pending) {
            this.deps.log.warn({ party: this.id, refused: msg.refused }, 'party refused a lookup');
            this.pending.fail(new LookupRefused(`party ${this.id} refused the lookup: ${msg.refused}`));
            return;
          }
          waiting.deliver(msg);
          return;
        default:
          assertNever(msg);
      }
    } catch (err) {
      if (err instanceof ProtocolError) {
        this.close(err.kind, err.message);
        this.deps.onFailure(new PeerError(`party ${this.id}: ${err.message}`));
        return;
      }
      // A bug, not the party's doing: exit 70 with the stack under ADMM_DEBUG.
      const bug = new InternalError(`handling a message from ${this.id}`, err);
      this.deps.log.error({ party: this.id, err: bug.message }, 'internal error handling a message');
      this.close('internal', bug.message);
      this.deps.onFailure(bug);
    }
  }
}
