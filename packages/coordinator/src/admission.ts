/**
 * Everything before a hello: the cap on connections waiting to say hello, the per-connection
 * challenge (a fresh nonce the hello must prove its secret over), the hello timeout and the
 * size cap on what an unauthenticated peer may send. A valid hello is handed to `onHello`,
 * which authenticates it and takes the socket over (or throws a ProtocolError).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { RawData, WebSocket } from 'ws';
import {
  type CloseKind,
  type Hello,
  CloseCodes,
  NONCE_BYTES,
  PROTOCOL_VERSION,
  ProtocolError,
  closeReason,
  decode,
  encode,
  validatePartyMessage,
} from '@admm-share/protocol';
import type { Traffic } from './party-connection.js';

/** A hello is a few short fields; anything larger before authentication is hostile. */
export const HELLO_MAX_BYTES = 1024;
/**
 * Connections allowed to wait for their hello at once; each holds a socket and a timer for
 * at most --hello-timeout, so this bounds what a flood of silent connections can hold.
 */
export const MAX_PENDING_CONNECTIONS = 64;

export interface AdmissionOptions {
  helloTimeoutMs: number;
  log: Logger;
  traffic: Traffic;
  /** Authenticate and take the socket over; throws a ProtocolError to refuse. */
  onHello(ws: WebSocket, hello: Hello, nonce: Uint8Array, log: Logger): void;
}

export class Admission {
  /** Connections that have not said hello yet. */
  private pending = 0;

  constructor(private readonly opts: AdmissionOptions) {}

  accept(ws: WebSocket, remote: string): void {
    const { log: parentLog, traffic, helloTimeoutMs } = this.opts;
    const log = parentLog.child({ remote });
    ws.on('error', (err) => log.warn({ err: err.message }, 'socket error'));
    if (this.pending >= MAX_PENDING_CONNECTIONS) {
      log.warn({ close: CloseCodes.busy.code, pending: this.pending }, 'closing connection');
      ws.close(CloseCodes.busy.code, closeReason('busy', `${this.pending} connections are already waiting to say hello`));
      return;
    }
    this.pending++;
    let settled = false;
    const settle = () => {
      if (!settled) this.pending--;
      settled = true;
      clearTimeout(helloTimer);
      ws.off('message', onMessage);
    };
    const refuse = (kind: CloseKind, detail: string) => {
      settle();
      log.warn({ close: CloseCodes[kind].code, detail }, 'closing connection');
      ws.close(CloseCodes[kind].code, closeReason(kind, detail));
    };
    const helloTimer = setTimeout(() => refuse('helloTimeout', `no hello within ${helloTimeoutMs} ms`), helloTimeoutMs);
    const nonce = randomBytes(NONCE_BYTES);
    const challenge = encode({ type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce });
    traffic.out += challenge.length;
    ws.send(challenge);
    const onMessage = (data: RawData, isBinary: boolean) => {
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
}
