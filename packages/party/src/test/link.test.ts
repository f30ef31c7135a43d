// Large messages sent frame by frame: each arrives as one message, equal to what was sent, in
// the order written, small and large mixed; the frames are FRAME_BYTES; a closed socket ends a send.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket, { WebSocketServer } from 'ws';
import { bytesSource } from '@admm-share/protocol';
import { FRAME_BYTES, MessageWriter, sendInFrames } from '../link.js';

async function pair(): Promise<{ ws: WebSocket; received: Buffer[]; close(): void }> {
  const server = new WebSocketServer({ port: 0, maxPayload: 64 << 20 });
  await once(server, 'listening');
  const received: Buffer[] = [];
  server.on('connection', (peer) => peer.on('message', (data: Buffer) => received.push(data)));
  const ws = new WebSocket(`ws://127.0.0.1:${(server.address() as { port: number }).port}`);
  await once(ws, 'open');
  return { ws, received, close: () => server.close() };
}

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 10));
}

const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) % 256);

test('sendInFrames: frames of FRAME_BYTES make one message; on a closed socket the send ends', async () => {
  const { ws, received, close } = await pair();
  const frames: number[] = [];
  const send = ws.send.bind(ws);
  ws.send = ((data: Uint8Array, opts: object, cb?: (err?: Error) => void) => {
    frames.push(data.length);
    return send(data, opts, cb);
  }) as typeof ws.send;
  const big = bytes(3 * FRAME_BYTES + 12345, 1);
  await sendInFrames(ws, big);
  assert.deepEqual(frames, [FRAME_BYTES, FRAME_BYTES, FRAME_BYTES, 12345]);
  await until(() => received.length === 1);
  assert.deepEqual(new Uint8Array(received[0]), big);
  ws.close();
  await once(ws, 'close');
  await sendInFrames(ws, big);
  assert.equal(frames.length, 4, 'nothing sent on a closed socket');
  close();
});

test('sendInFrames: a message made a piece at a time is read a frame at a time and arrives whole', async () => {
  const { ws, received, close } = await pair();
  const big = bytes(2 * FRAME_BYTES + 999, 3);
  const reads: Array<[number, number]> = [];
  const source = bytesSource(big);
  await sendInFrames(ws, { length: big.length, readAt: (at, into) => (reads.push([at, into.length]), source.readAt(at, into)) });
  assert.deepEqual(reads, [[0, FRAME_BYTES], [FRAME_BYTES, FRAME_BYTES], [2 * FRAME_BYTES, 999]]);
  await until(() => received.length === 1);
  assert.deepEqual(new Uint8Array(received[0]), big);
  ws.close();
  close();
});

test('MessageWriter: small and large messages written together arrive whole, in the order written', async () => {
  const { ws, received, close } = await pair();
  const writer = new MessageWriter();
  const messages = [bytes(10, 1), bytes(2 * FRAME_BYTES + 5, 2), bytes(20, 3), bytes(FRAME_BYTES + 1, 4), bytes(FRAME_BYTES, 5), bytes(30, 6), bytes(3 * FRAME_BYTES + 7, 7), bytes(40, 8), bytes(50, 9)];
  assert.ok(!writer.busy(ws));
  // Two of them made a piece at a time: one large, read into one buffer frame after frame, and one small.
  const sourced = new Set([6, 8]);
  messages.forEach((m, i) => writer.write(ws, sourced.has(i) ? bytesSource(m) : m));
  assert.ok(writer.busy(ws), 'large messages under way');
  await until(() => received.length === messages.length);
  assert.deepEqual(received.map((b) => new Uint8Array(b)), messages);
  await until(() => !writer.busy(ws));
  ws.close();
  close();
});

test('MessageWriter.writeEach: messages made one at a time into one buffer arrive whole, in order among the others written around them', async () => {
  const { ws, received, close } = await pair();
  const writer = new MessageWriter();
  const parts = [bytes(FRAME_BYTES - 3, 1), bytes(FRAME_BYTES + 9, 2), bytes(70, 3)];
  // One buffer for every part: each is made in it once the last has been written.
  const buffer = new Uint8Array(2 * FRAME_BYTES);
  let k = 0;
  writer.write(ws, bytes(2 * FRAME_BYTES, 9));
  writer.writeEach(ws, () => {
    if (k === parts.length) return undefined;
    buffer.set(parts[k]);
    return buffer.subarray(0, parts[k++].length);
  });
  writer.write(ws, bytes(11, 4));
  await until(() => received.length === 5);
  assert.deepEqual(received.map((b) => new Uint8Array(b)), [bytes(2 * FRAME_BYTES, 9), ...parts, bytes(11, 4)]);
  await until(() => !writer.busy(ws));
  ws.close();
  close();
});
