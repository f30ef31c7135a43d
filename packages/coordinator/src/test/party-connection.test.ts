// A party's connection over a real socket (in this process: the peer is a bare ws client):
// a round with a long vector goes out in parts, in order; a share that comes back in parts is
// put together in the array the request names, bit for bit; parts out of order end the
// connection with 4003 and fail the job with the party's name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import pino from 'pino';
import WebSocket, { WebSocketServer } from 'ws';
import { CloseCodes, type Part, PART_VALUES, POINT_BYTES, type Psi, PSI_PART_POINTS, type Round, type Share, decode, encode, inParts, psiInParts } from '@admm-share/protocol';
import { PartyConnection } from '../connections/party-connection.js';

const JOB = 'job-1';
const N = 3 * PART_VALUES + 77;

async function connected(): Promise<{ conn: PartyConnection; client: WebSocket; failures: Error[]; close(): void }> {
  const server = new WebSocketServer({ port: 0, maxPayload: 64 << 20 });
  await once(server, 'listening');
  const failures: Error[] = [];
  const conn = new PartyConnection('party-1', 0, { log: pino({ level: 'silent' }), traffic: { in: 0, out: 0 }, roundTimeoutMs: 10_000, onFailure: (e) => failures.push(e), onClose: () => {} });
  server.on('connection', (ws) => conn.attach(ws));
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as { port: number }).port}`, { maxPayload: 64 << 20 });
  await once(client, 'open');
  while (!conn.connected) await new Promise((r) => setTimeout(r, 5));
  return { conn, client, failures, close: () => (client.close(), server.close()) };
}

const ramp = (n: number, scale: number) => Float64Array.from({ length: n }, (_, i) => Math.sin(i * scale) * 1e3 + i);

test('a long round goes in parts; the share that answers it in parts is put together in the array the request names', async () => {
  const { conn, client, close } = await connected();
  const c = ramp(N, 0.001);
  const answer = ramp(N, 0.002);
  const got: (Part | Round)[] = [];
  client.on('message', (data: Buffer) => {
    const m = decode(data) as Part | Round;
    got.push(m);
    if (m.type === 'round') for (const p of inParts<Share>({ type: 'share', jobId: JOB, round: m.round, share: answer, penaltySq: 0, epsilonSpent: 0, solver: null })) client.send(encode(p));
  });
  const into = new Float64Array(N);
  const round: Round = { type: 'round', jobId: JOB, round: 1, rho: 0.5, c };
  const reply = await conn.request(conn.encodeForSend(round), ['share'], { jobId: JOB, n: N, round: 1 }, () => into);
  assert.deepEqual(
    got.map((m) => (m.type === 'part' ? m.at : m.type)),
    [0, PART_VALUES, 2 * PART_VALUES, 3 * PART_VALUES, 'round'],
  );
  const sent = new Float64Array(N);
  for (const m of got) if (m.type === 'part') sent.set(m.values, m.at);
  assert.deepEqual(sent, c, 'the parts sent are the round vector');
  assert.equal((got[got.length - 1] as Round).c.length, 0);
  assert.equal(reply.share, into, 'the share is the array the request named');
  assert.deepEqual(new Uint8Array(into.buffer), new Uint8Array(answer.buffer), 'bit for bit');
  close();
});

test('a share whose parts come out of order ends the connection with 4003 and fails the job, naming the party', async () => {
  const { conn, client, failures, close } = await connected();
  client.on('message', (data: Buffer) => {
    const m = decode(data) as Part | Round;
    if (m.type !== 'round') return;
    const parts = [...inParts<Share>({ type: 'share', jobId: JOB, round: 1, share: new Float64Array(N), penaltySq: 0, epsilonSpent: 0, solver: null })];
    client.send(encode(parts[1]));
  });
  const closed = once(client, 'close');
  const reply = conn.request(conn.encodeForSend({ type: 'round', jobId: JOB, round: 1, rho: 0.5, c: new Float64Array(N) }), ['share'], { jobId: JOB, n: N, round: 1 });
  const [code] = (await closed) as [number];
  assert.equal(code, CloseCodes.invalid.code);
  assert.equal(failures.length, 1);
  assert.match(failures[0].message, /party party-1: part\.at: 65536, expected 0 \(parts come in order\)/);
  conn.failPending(new Error('test over'));
  await assert.rejects(reply, /test over/);
  close();
});

test("a set's label points go in psi messages of PSI_PART_POINTS, each once the one before is written: 12 MiB of them do not make the party a slow reader", async () => {
  const { conn, client, failures, close } = await connected();
  const total = 12 * PSI_PART_POINTS + 5;
  const points = Uint8Array.from({ length: total * POINT_BYTES }, (_, k) => (k * 7 + (k >> 13)) & 255);
  const got: Psi[] = [];
  // Every message, or the connection closed (a party taken for a slow reader is).
  const all = new Promise<void>((resolve) => {
    client.on('message', (data: Buffer) => {
      got.push(decode(data) as Psi);
      if (got.length === 13) resolve();
    });
    client.on('close', () => resolve());
  });
  conn.sendEach(psiInParts(JOB, 'train', points));
  await all;
  assert.deepEqual(failures, []);
  assert.deepEqual(got.map((m) => [m.type, m.set, m.total, m.at, m.points.length / POINT_BYTES]), Array.from({ length: 13 }, (_, k) => ['psi', 'train', total, k * PSI_PART_POINTS, k < 12 ? PSI_PART_POINTS : 5]));
  assert.deepEqual(Buffer.concat(got.map((m) => m.points)), Buffer.from(points), 'the points, in order');
  close();
});

test('psiInParts: one message for a set of at most PSI_PART_POINTS points (none: one empty), views of the points', () => {
  assert.deepEqual([...psiInParts(JOB, 'test', new Uint8Array(0))].map((m) => [m.total, m.at, m.points.length]), [[0, 0, 0]]);
  const points = new Uint8Array((PSI_PART_POINTS + 1) * POINT_BYTES);
  const one = [...psiInParts(JOB, 'train', points.subarray(0, PSI_PART_POINTS * POINT_BYTES))];
  assert.deepEqual(one.map((m) => [m.total, m.at, m.points.length / POINT_BYTES]), [[PSI_PART_POINTS, 0, PSI_PART_POINTS]]);
  const two = [...psiInParts(JOB, 'train', points)];
  assert.deepEqual(two.map((m) => [m.total, m.at, m.points.length / POINT_BYTES]), [[PSI_PART_POINTS + 1, 0, PSI_PART_POINTS], [PSI_PART_POINTS + 1, PSI_PART_POINTS, 1]]);
  assert.ok(two.every((m) => m.points.buffer === points.buffer), 'views, not copies');
});
