// The test relays' WebSocket frame splitter: it cuts one direction of a relayed connection
// into frames after the HTTP upgrade, forwards the bytes, and shows each complete binary
// message (masked client frames unmasked, fragments reassembled) to a hook that runs before
// the bytes that complete the message are forwarded and may leave that frame out. Used by
// gate.ts (the coordinator's side only), faults-relay.ts and restart-race.test.ts (both directions).
import { decode } from '@admm-share/protocol';

/**
 * What `onMessage` returns: `false` leaves the frame that completes the message out of the
 * forwarded stream (the whole message when it is one frame, as ws sends them; earlier
 * fragments have already been forwarded); `true` or nothing forwards it.
 */
export type MessageVerdict = boolean | void;

/** Splits a byte stream into WebSocket frames after the HTTP upgrade. */
export class FrameStream {
  private buf: Buffer = Buffer.alloc(0);
  private upgraded = false;
  /** The payloads so far of a binary message that arrives in fragments. */
  private fragments: Buffer[] = [];
  /** Inside a fragmented binary message (its continuation frames belong to it). */
  private inBinary = false;
  constructor(
    private readonly forward: (bytes: Buffer) => void,
    /** Sees each complete binary message's payload, before the bytes that end it are forwarded. */
    private readonly onMessage: (payload: Buffer) => MessageVerdict,
  ) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    for (;;) {
      if (!this.upgraded) {
        const end = this.buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        this.upgraded = true;
        this.take(end + 4, true);
        continue;
      }
      if (this.buf.length < 2) return;
      const b0 = this.buf[0];
      const b1 = this.buf[1];
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        off = 10;
      }
      const masked = (b1 & 0x80) !== 0;
      const start = off + (masked ? 4 : 0);
      if (this.buf.length < start + len) return;
      const fin = (b0 & 0x80) !== 0;
      const opcode = b0 & 0x0f;
      let keep = true;
      // Binary frames and their continuations are seen; text and control frames pass unseen.
      if (opcode === 0x2 || (opcode === 0x0 && this.inBinary)) {
        const payload = Buffer.from(this.buf.subarray(start, start + len));
        if (masked) for (let i = 0; i < payload.length; i++) payload[i] ^= this.buf[off + (i & 3)];
        this.fragments.push(payload);
        this.inBinary = !fin;
        if (fin) keep = this.onMessage(Buffer.concat(this.fragments.splice(0))) !== false;
      }
      this.take(start + len, keep);
    }
  }

  private take(n: number, keep: boolean): void {
    if (keep) this.forward(this.buf.subarray(0, n));
    this.buf = this.buf.subarray(n);
  }
}

/** A frame's message as a relay's hooks see it: its type and round, or undefined if it is not MessagePack. */
export function seenMessage(payload: Uint8Array): { type: string; round?: number } | undefined {
  let msg: unknown;
  try {
    msg = decode(payload);
  } catch {
    return undefined;
  }
  const m = (typeof msg === 'object' && msg !== null ? msg : {}) as { type?: unknown; round?: unknown };
  return { type: String(m.type), ...(typeof m.round === 'number' ? { round: m.round } : {}) };
}
