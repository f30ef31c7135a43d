/**
 * Everything before a hello: the cap on connections waiting to say hello and which one gives
 * way when it is reached, the per-connection challenge (a fresh nonce the hello must prove its
 * secret over), the hello timeout, and the bytes an unauthenticated peer may send, counted on
 * the raw socket. A valid hello is handed to `onHello`, which authenticates it and takes the
 * socket over (or throws a ProtocolError). A refused connection is closed and dropped at once
 * (drop.ts); its warning is rate-limited (warnings.ts).
 */
import { randomBytes } from 'node:crypto';
import { isIPv6 } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { RawData, WebSocket } from 'ws';
import {
  type CloseKind,
  type Hello,
  CloseCodes,
  NONCE_BYTES,
  PROTOCOL_VERSION,
  ProtocolError,
  decode,
  encode,
  validatePartyMessage,
} from '@admm-share/protocol';
import { closeAndDrop } from './drop.js';
import type { Traffic } from '../bytes.js';
import { type Server, type ServerOptions, listen } from './server.js';
import { WarningLimiter } from './warnings.js';

/** A hello is a few short fields (about 150 bytes, 350 with a prediction job's model); a larger frame before authentication is hostile. */
export const HELLO_MAX_BYTES = 1024;
/**
 * Raw bytes a connection may send before its hello is accepted: one hello frame with its
 * header, and room for a control frame or two. Counted on the socket as they arrive, because
 * ws buffers a frame up to the job's maxPayload (16 MB for 100k label rows) before it hands
 * the frame over: a size check on the message alone comes too late.
 */
export const PRE_HELLO_MAX_BYTES = 2 * HELLO_MAX_BYTES;
/**
 * What a connection can make the coordinator hold beyond PRE_HELLO_MAX_BYTES before the
 * counter cuts it off: the counter sees a read only after ws has taken it in (one read is at
 * most 64 KiB), and a paused socket holds up to its 16 KiB high-water mark plus one more read.
 */
export const SOCKET_READ_SLACK_BYTES = 2 * 64 * 1024 + 16 * 1024;
/**
 * Connections allowed to wait for their hello at once. When all are taken, a new connection
 * still gets in: the oldest connection of the address holding the most slots gives way (4014).
 * A flood from one address only displaces itself; a party says hello within a round trip of
 * connecting, so a silent connection is always older than it.
 */
export const MAX_PENDING_CONNECTIONS = 64;
/**
 * The one bound on what unauthenticated peers can make the coordinator hold: every pending
 * slot full, each with its byte allowance and the reads in flight (about 9.1 MiB). A
 * connection that is refused or gives way is dropped at once and holds nothing.
 */
export const UNAUTHENTICATED_MAX_BYTES = MAX_PENDING_CONNECTIONS * (PRE_HELLO_MAX_BYTES + SOCKET_READ_SLACK_BYTES);

export interface AdmissionOptions {
  helloTimeoutMs: number;
  log: Logger;
  traffic: Traffic;
  warnings: WarningLimiter;
  /** Authenticate and take the socket over; throws a ProtocolError to refuse. */
  onHello(ws: WebSocket, hello: Hello, nonce: Uint8Array, log: Logger): void;
  /** A connection was refused with this close code (the job's monitor counts them). */
  onRefused?(code: number, kind: CloseKind): void;
  /** --psi-cache: the caches' name, sent in every challenge. */
  psiCache?: string;
}

/** A connection that has not said hello yet. */
interface Pending {
  /** Its address group (addressGroup): the unit of fairness when a slot must be freed. */
  group: string;
  refuse(kind: CloseKind, detail: string): void;
}

/**
 * The group an address counts in when pending slots are shared out: an IPv4 address (also
 * when IPv4-mapped), or an IPv6 /64, since one host is commonly given a whole /64 (RFC 4291
 * section 2.5.1 makes 64-bit interface ids the norm).
 */
export function addressGroup(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1];
  if (!isIPv6(address)) return address;
  const [head, tail] = address.split('%')[0].split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return `${groups.slice(0, 4).map((g) => parseInt(g || '0', 16).toString(16)).join(':')}::/64`;
}

export class Admission {
  /** Connections that have not said hello yet, oldest first (a Set keeps insertion order). */
  private readonly pending = new Set<Pending>();

  constructor(private readonly opts: AdmissionOptions) {}

  accept(ws: WebSocket, socket: Duplex, remote: string): void {
    const { log: parentLog, traffic, helloTimeoutMs, warnings } = this.opts;
    const log = parentLog.child({ remote });
    ws.on('error', (err) => warnings.warn('socket error', log, { err: err.message }, 'socket error'));
    if (this.pending.size >= MAX_PENDING_CONNECTIONS) this.makeRoom();
    let settled = false;
    let bytesBeforeHello = 0;
    const settle = () => {
      if (settled) return;
      settled = true;
      this.pending.delete(entry);
      clearTimeout(helloTimer);
      ws.off('message', onMessage);
      socket.off('data', countBytes);
    };
    const refuse = (kind: CloseKind, detail: string) => {
      settle();
      const code = CloseCodes[kind].code;
      this.opts.onRefused?.(code, kind);
      warnings.warn(`closing connection ${code}`, log, { close: code, detail }, 'closing connection');
      closeAndDrop(ws, kind, detail);
    };
    const entry: Pending = { group: addressGroup(remote), refuse };
    this.pending.add(entry);
    const helloTimer = setTimeout(() => refuse('helloTimeout', `no hello within ${helloTimeoutMs} ms`), helloTimeoutMs);
    // ws has taken each chunk in (and may have buffered it towards a large frame) by the time
    // this listener sees it; the connection is cut off at the first chunk over the limit.
    const countBytes = (chunk: Buffer) => {
      if (settled) return;
      bytesBeforeHello += chunk.length;
      if (bytesBeforeHello > PRE_HELLO_MAX_BYTES) refuse('invalid', `${bytesBeforeHello} bytes before hello (limit ${PRE_HELLO_MAX_BYTES})`);
    };
    socket.on('data', countBytes);
    const nonce = randomBytes(NONCE_BYTES);
    const psiCache = this.opts.psiCache;
    const challenge = encode({ type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce, ...(psiCache === undefined ? {} : { psiCache }) });
    traffic.out += challenge.length;
    ws.send(challenge);
    const onMessage = (data: RawData, isBinary: boolean) => {
      // ws still hands over frames it had buffered when the socket was dropped.
      if (settled) return;
      const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
      traffic.in += bytes.length;
      try {
        if (!isBinary) throw new ProtocolError('malformed', 'text frame; messages are binary MessagePack');
        if (bytes.length > HELLO_MAX_BYTES) throw new ProtocolError('invalid', `${bytes.length}-byte frame before hello (limit ${HELLO_MAX_BYTES})`);
        const msg = validatePartyMessage(decode(bytes), {});
        if (msg.type !== 'hello') throw new ProtocolError('unexpected', `'${msg.type}' before hello`);
        settle();
        this.opts.onHello(ws, msg, nonce, log);
      } catch (err) {
        if (err instanceof ProtocolError) refuse(err.kind, err.message);
        else refuse('internal', err instanceof Error ? err.message : String(err));
      }
    };
    ws.on('message', onMessage);
    ws.on('close', settle);
  }

  /** Every slot is taken: the address group holding the most gives up its oldest connection. */
  private makeRoom(): void {
    const held = new Map<string, number>();
    let most = 0;
    for (const p of this.pending) {
      const n = (held.get(p.group) ?? 0) + 1;
      held.set(p.group, n);
      most = Math.max(most, n);
    }
    for (const p of this.pending)
      if (held.get(p.group) === most) {
        p.refuse('busy', `${MAX_PENDING_CONNECTIONS} connections are waiting to say hello; ${most} from this address, this one the longest`);
        return;
      }
  }
}

/**
 * The coordinator's port for parties: the server (listen) with every new connection going
 * through admission, and the warnings unauthenticated peers can cause rate-limited.
 */
export function listenForParties(
  opts: Omit<ServerOptions, 'warnings' | 'onConnection'> & Pick<AdmissionOptions, 'helloTimeoutMs' | 'traffic' | 'onHello' | 'onRefused' | 'psiCache'>,
): Promise<Server> {
  const warnings = new WarningLimiter(opts.log);
  const admission = new Admission({ helloTimeoutMs: opts.helloTimeoutMs, log: opts.log, traffic: opts.traffic, warnings, onHello: opts.onHello, onRefused: opts.onRefused, psiCache: opts.psiCache });
  return listen({ ...opts, warnings, onConnection: (ws, socket, remote) => admission.accept(ws, socket, remote) });
}
