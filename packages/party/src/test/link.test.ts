// Large messages sent frame by frame: each arrives as one message, equal to what was sent, in
// the order written, small and large mixed; the frames are FRAME_BYTES; a closed socket ends a send.
// Long vectors in parts, both ways, through the party's link.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket, { WebSocketServer } from 'ws';
import pino from 'pino';
import { type Part, PART_VALUES, PARTS_ABOVE, type Round, type Share, type WholeCoordinatorMessage, bytesSource, decode, encode, inParts } from '@admm-share/protocol';
import { CoordinatorLink } from '../transport/link.js';
import { FRAME_BYTES, MessageWriter, sendInFrames } from '../transport/frames.js';

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

/**
 * A CoordinatorLink for vectors of N values, connected to a bare ws server, once both ends are
 * open: the server's socket for the link (`peer`), and every raw chunk it reads after the
 * upgrade in `raw`. Messages and invalid frames the link reports go to the handlers given.
 */
async function linkWithPeer(N: number, handlers: { message?: (m: WholeCoordinatorMessage) => void; invalid?: (e: unknown) => void; roundInto?: (n: number) => Float64Array | undefined } = {}) {
  const server = new WebSocketServer({ port: 0, maxPayload: 64 << 20 });
  await once(server, 'listening');
  const raw: Buffer[] = [];
  const peerWs = new Promise<WebSocket>((resolve) =>
    server.on('connection', (ws, req) => {
      req.socket.on('data', (chunk: Buffer) => raw.push(chunk));
      resolve(ws);
    }),
  );
  let opened!: () => void;
  const open = new Promise<void>((resolve) => (opened = resolve));
  const link = new CoordinatorLink(
    { coordinator: `ws://127.0.0.1:${(server.address() as { port: number }).port}`, maxPayload: 64 << 20, connectTimeoutMs: 5000, reconnectTimeoutMs: 5000, heartbeatTimeoutMs: 60_000 },
    pino({ level: 'silent' }),
    { context: () => ({ jobId: 'j', n: N }), open: () => opened(), lost: () => {}, message: handlers.message ?? (() => {}), invalid: handlers.invalid ?? (() => {}), failed: () => {}, roundInto: handlers.roundInto },
  );
  const peer = await peerWs;
  await open;
  return {
    link,
    peer,
    raw,
    close: () => {
      link.abort('done', 'test over');
      server.close();
    },
  };
}

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

test('CoordinatorLink: a round in parts reaches the session once its last part is in, in an array the link keeps; a share in parts goes back in order; a part out of order is invalid', async (t) => {
  const N = 2 * PART_VALUES + PART_VALUES / 2 + 3;
  assert.ok(N > PARTS_ABOVE);
  const messages: WholeCoordinatorMessage[] = [];
  const invalid: unknown[] = [];
  const { link, peer: ws, close } = await linkWithPeer(N, { message: (m) => messages.push(m), invalid: (e) => invalid.push(e) });
  t.after(close);
  const shares: (Part | Share)[] = [];
  ws.on('message', (data: Buffer) => shares.push(decode(data) as Part | Share));
  const c = (round: number) => Float64Array.from({ length: N }, (_, i) => Math.cos(i + round) * 1e3);
  for (const round of [1, 2]) for (const m of inParts<Round>({ type: 'round', jobId: 'j', round, rho: 0.5, c: c(round) })) ws.send(encode(m));
  await until(() => messages.length === 2);
  const [r1, r2] = messages as Round[];
  assert.deepEqual([r1.round, r2.round], [1, 2]);
  assert.equal(r1.c, r2.c, 'one array, reused round after round');
  assert.deepEqual(new Uint8Array(r2.c.buffer), new Uint8Array(c(2).buffer), 'bit for bit');
  // The party's share of round 2 goes back in parts, in order.
  const share = Float64Array.from({ length: N }, (_, i) => i * 0.5);
  link.send({ type: 'share', jobId: 'j', round: 2, share, penaltySq: 0, epsilonSpent: 0, solver: null });
  await until(() => shares.length === 4);
  assert.deepEqual(shares.map((m) => (m.type === 'part' ? m.at : m.type)), [0, PART_VALUES, 2 * PART_VALUES, 'share']);
  const back = new Float64Array(N);
  for (const m of shares) if (m.type === 'part') back.set(m.values, m.at);
  assert.deepEqual(back, share);
  // Parts out of order: the session hears of it as an invalid message (it then closes with 4003).
  const parts = [...inParts<Round>({ type: 'round', jobId: 'j', round: 3, rho: 0.5, c: c(3) })];
  ws.send(encode(parts[1]));
  await until(() => invalid.length === 1);
  assert.match((invalid[0] as Error).message, /part\.at: 65536, expected 0/);
  assert.equal(messages.length, 2);
});

test('CoordinatorLink: a round goes where the session asks (roundInto), whole or in parts; an array of another length is not used', async (t) => {
  for (const N of [1000, 2 * PART_VALUES + 7]) {
    const messages: Round[] = [];
    const place = new Float64Array(N);
    let asked = 0;
    let offer: Float64Array | undefined = place;
    const { peer: ws, close } = await linkWithPeer(N, {
      message: (m) => messages.push(m as Round),
      roundInto: (n) => {
        asked++;
        assert.equal(n, N);
        return offer;
      },
    });
    t.after(close);
    const c = (round: number) => Float64Array.from({ length: N }, (_, i) => Math.sin(i * round) * 10);
    const send = (round: number) => {
      for (const m of inParts<Round>({ type: 'round', jobId: 'j', round, rho: 0.5, c: c(round) })) ws.send(encode(m));
    };
    send(1);
    await until(() => messages.length === 1);
    assert.equal(messages[0].c, place, `N ${N}: decoded into the session's array`);
    assert.deepEqual(place, c(1));
    assert.ok(asked >= 1);
    // Undefined, or an array of another length: the link's own array.
    for (const [round, other] of [[2, undefined], [3, new Float64Array(N - 1)]] as const) {
      offer = other;
      send(round);
      await until(() => messages.length === round);
      assert.notEqual(messages[round - 1].c, place);
      assert.deepEqual(messages[round - 1].c, c(round));
      assert.deepEqual(place, c(1), 'the session\'s array left as it was');
    }
  }
});

/** The frames in `raw` (bytes a client sent after the handshake): each one's mask bit, key and payload length. */
function framesOf(raw: Buffer): Array<{ masked: boolean; key: number[]; length: number }> {
  const frames = [];
  for (let at = 0; at < raw.length; ) {
    const masked = (raw[at + 1] & 0x80) !== 0;
    let length = raw[at + 1] & 0x7f;
    let head = 2;
    if (length === 126) (length = raw.readUInt16BE(at + 2)), (head = 4);
    else if (length === 127) (length = Number(raw.readBigUInt64BE(at + 2))), (head = 10);
    const key = masked ? [...raw.subarray(at + head, at + head + 4)] : [];
    frames.push({ masked, key, length });
    at += head + key.length + length;
  }
  return frames;
}

test('CoordinatorLink: its frames carry a zero masking key, so they go out as encoded and arrive as sent, whole and in parts', async (t) => {
  const N = PARTS_ABOVE + 5;
  const { link, peer: ws, raw, close } = await linkWithPeer(N);
  t.after(close);
  const got: (Part | Share)[] = [];
  ws.on('message', (data: Buffer) => got.push(decode(data) as Part | Share));
  const small = Float64Array.from({ length: 1000 }, (_, i) => Math.sin(i));
  const large = Float64Array.from({ length: N }, (_, i) => Math.cos(i) * 7);
  link.send({ type: 'share', jobId: 'j', round: 1, share: small, penaltySq: 0, epsilonSpent: 0, solver: null });
  link.send({ type: 'share', jobId: 'j', round: 2, share: large, penaltySq: 0, epsilonSpent: 0, solver: null });
  await until(() => got.length === 5);
  const frames = framesOf(Buffer.concat(raw));
  assert.equal(frames.length, 5, 'the whole share, three parts and the share after them');
  for (const f of frames) {
    assert.equal(f.masked, true, 'a client frame says it is masked (RFC 6455)');
    assert.deepEqual(f.key, [0, 0, 0, 0]);
  }
  assert.deepEqual((got[0] as Share).share, small);
  const back = new Float64Array(N);
  for (const m of got) if (m.type === 'part') back.set(m.values, m.at);
  assert.deepEqual(back, large);
});
