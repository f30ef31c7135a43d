// Writing a message on the party's WebSocket: in frames of FRAME_BYTES, each sent once the one
// before is written, so that a message made a piece at a time is never held whole; a zero
// masking key, so that no frame is copied to be masked.
import WebSocket from 'ws';
import type { ByteSource } from '@admm-share/protocol';

/**
 * Bytes of each frame a larger message is sent in, each frame waiting for the last to be
 * written: a message made a piece at a time (the 64 MB answer to the intersection) is then
 * never held whole. (Before the zero mask below, ws also masked a copy of each frame.)
 */
export const FRAME_BYTES = 1 << 20;

/**
 * The party's masking key: zero, under which masking leaves the bytes as they are, so ws
 * writes a frame from the party's own buffer and the coordinator's ws does not unmask it.
 * RFC 6455 asks a client for a fresh random key per frame. The key travels in the frame, so it
 * hides nothing from anyone on the path; it exists for browsers, where a hostile script
 * chooses the bytes and must not make them read as an HTTP request to a caching proxy on the
 * way. A party is no browser: its frames are its own encodings (shares, points, replies), and
 * over TLS (a wss:// coordinator, the deployed setting) no proxy reads them at all. What it
 * saves: a copy of every frame a party sends, and the coordinator's pass over every byte it
 * receives (docs/scaling.md).
 */
export function zeroMask(mask: Uint8Array): void {
  mask.fill(0);
}

/**
 * `message` as one message on `ws`, in frames of FRAME_BYTES (continuation frames after the
 * first; one frame for a small message), each sent once the one before is written; resolves
 * when the last is, or as soon as the connection is no longer open (the rest is dropped, as a
 * send on a closed socket is). A ByteSource is read a frame at a time into one buffer, so a
 * message made that way is never held whole. Nothing else may be sent on `ws` meanwhile but
 * control frames (ws's pongs).
 */
export function sendInFrames(ws: WebSocket, message: Uint8Array | ByteSource): Promise<void> {
  // A frame's send calls back once the frame is written, so one buffer serves a source.
  const buffer = message instanceof Uint8Array ? undefined : Buffer.allocUnsafeSlow(Math.min(FRAME_BYTES, message.length));
  const frameOf = (at: number, end: number): Uint8Array => {
    if (message instanceof Uint8Array) return message.subarray(at, end);
    const frame = buffer!.subarray(0, end - at);
    message.readAt(at, frame);
    return frame;
  };
  return new Promise((resolve) => {
    let at = 0;
    const next = (err?: Error) => {
      if (err || ws.readyState !== WebSocket.OPEN) return resolve();
      const end = Math.min(message.length, at + FRAME_BYTES);
      const last = end === message.length;
      const frame = frameOf(at, end);
      at = end;
      ws.send(frame, { binary: true, fin: last }, last ? () => resolve() : next);
    };
    next();
  });
}

/**
 * Messages written on a connection in order: a small one at once, a large one (or one made a
 * piece at a time) in frames (sendInFrames), and anything written while one is under way after it.
 */
export class MessageWriter {
  /** The last message waiting or under way on a connection, and when it is written. */
  private pending: { ws: WebSocket; done: Promise<void> } | undefined;

  /** Whether messages are still waiting or under way on `ws`. */
  busy(ws: WebSocket): boolean {
    return this.pending?.ws === ws;
  }

  write(ws: WebSocket, message: Uint8Array | ByteSource): void {
    const before = this.pending?.ws === ws ? this.pending.done : undefined;
    if (!before && message instanceof Uint8Array && message.length <= FRAME_BYTES) return ws.send(message);
    this.after(ws, before, () => sendInFrames(ws, message));
  }

  /**
   * Messages one after the other, each made (`next`) only once the one before is written, so
   * that each may be encoded into the buffer the last one was: a long vector's parts.
   */
  writeEach(ws: WebSocket, next: () => Uint8Array | undefined): void {
    const each = async (): Promise<void> => {
      for (let m = next(); m !== undefined && ws.readyState === WebSocket.OPEN; m = next()) await sendInFrames(ws, m);
    };
    this.after(ws, this.pending?.ws === ws ? this.pending.done : undefined, each);
  }

  private after(ws: WebSocket, before: Promise<void> | undefined, send: () => Promise<void>): void {
    const done = (before ?? Promise.resolve()).then(send);
    this.pending = { ws, done };
    void done.then(() => {
      if (this.pending?.done === done) this.pending = undefined;
    });
  }
}
