// A running coordinator under load from clients that never authenticate, never read, or
// go silent: the job still completes with the right result, memory stays bounded, and a
// silent party ends the job after the round deadline instead of hanging it.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { syntheticDataset } from '@admm-share/core';
import { psiAnswer } from './psi-peer.js';
import { CloseCodes, PROTOCOL_VERSION, decode, encode, validateCoordinatorMessage } from '@admm-share/protocol';
import { writeVerticalSplit } from '../split.js';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

function setup(dir: string) {
  const s = syntheticDataset({ trainRows: 400, testRows: 100, seed: 'hostile-test' });
  return { s, files: writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test) };
}

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]);
}

async function runJob(dir: string, files: ReturnType<typeof setup>['files'], during?: (port: number, pid: number) => Promise<void>) {
  const out = join(dir, `out-${Math.random().toString(36).slice(2)}`);
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--rounds', '40', '--hello-timeout', '3000']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  if (during) await during(port, coord.child.pid!);
  const parties = files.parties.map((f) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`)]),
  );
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  return { coord, summary: JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) };
}

test('a flood of silent connections and a client that reads nothing: bounded memory, the job completes with the right result', async (t) => {
  const dir = tempDir(t);
  const { files } = setup(dir);
  const clean = await runJob(dir, files);
  const sockets: { destroy(): void }[] = [];
  t.after(() => sockets.forEach((s) => s.destroy()));
  let rssBefore = 0;
  let rssDuring = 0;
  const closes: number[] = [];
  const noisy = await runJob(dir, files, async (port, pid) => {
    rssBefore = rssKiB(pid);
    // Clients that send every kind of bad frame instead of a hello...
    const bad: (Buffer | string)[][] = [
      [encode({ type: 'share', jobId: 'x', round: 1, share: Float64Array.of(Number.NaN), penaltySq: 0, epsilonSpent: 0, solver: null })],
      [encode({ type: 'share', jobId: 'x', round: 999, share: Float64Array.of(Infinity, 1), penaltySq: -1, epsilonSpent: 0, solver: null })],
      [encode({ type: 'scores', jobId: 'x', round: 0, scores: new Float64Array(3) })],
      [encode({ type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: 'party-1', jobId: null, features: 3, trainRows: 1e12, testRows: 0, proof: null, noise: false, model: null })],
      [encode({ type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: 'party-1', jobId: null, features: 3, trainRows: 10, testRows: 0, proof: null, noise: false, model: null }).subarray(0, 20)],
      [Buffer.alloc(4096, 0x91)], // oversized before hello
      [Buffer.from([0x93, 1, 2, 3])], // valid MessagePack, wrong shape
      ['text frame'],
    ];
    const badCloses = await Promise.all(
      bad.map(
        (frames) =>
          new Promise<number>((resolve) => {
            const ws = new WebSocket(`ws://127.0.0.1:${port}`);
            ws.on('error', () => undefined);
            ws.on('open', () => frames.forEach((f) => ws.send(f)));
            ws.on('close', (code) => resolve(code));
          }),
      ),
    );
    for (const code of badCloses) assert.ok(([CloseCodes.invalid.code, CloseCodes.malformed.code, CloseCodes.unexpected.code, CloseCodes.tooBig.code] as number[]).includes(code), `close code ${code}`);
    // ...then 300 WebSocket clients that never say hello (only 64 may wait; the rest are turned away)...
    const waits = Array.from({ length: 300 }, () => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}`);
      sockets.push({ destroy: () => ws.terminate() });
      ws.on('error', () => undefined);
      return new Promise<void>((resolve) => ws.on('close', (code) => (closes.push(code), resolve())));
    });
    // ...and raw TCP clients that send a handshake and then never read a byte.
    for (let i = 0; i < 20; i++) {
      const sock = createConnection({ port, host: '127.0.0.1' });
      sock.on('error', () => undefined);
      sock.write(`GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${Buffer.alloc(16, i).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
      sock.pause();
      sockets.push(sock);
    }
    await Promise.all(waits);
    rssDuring = rssKiB(pid);
  });
  assert.ok(closes.filter((c) => c === CloseCodes.busy.code).length >= 200, `busy closes: ${closes.filter((c) => c === CloseCodes.busy.code).length}`);
  assert.ok(closes.filter((c) => c === CloseCodes.helloTimeout.code).length <= 64);
  assert.ok(rssDuring - rssBefore < 64 * 1024, `coordinator RSS grew by ${rssDuring - rssBefore} KiB`);
  assert.equal(noisy.summary.rounds, clean.summary.rounds);
  assert.equal(noisy.summary.objective, clean.summary.objective, 'the same job, the same result');
});

test('a party that goes silent ends the job after --round-timeout with a clear error', async (t) => {
  const dir = tempDir(t);
  const { s, files } = setup(dir);
  const out = join(dir, 'out');
  // The deadline applies to the real party too: long enough for it to answer on a loaded machine.
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', 'party-1,silent', '--out', out, '--rounds', '40', '--round-timeout', '4000']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const f = files.parties[0];
  const real = run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, 'm.json')]);
  const ws = new WebSocket(`ws://127.0.0.1:${port}`);
  ws.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  let jobId = '';
  let asked: number | undefined;
  ws.on('message', (data: Buffer) => {
    const msg = validateCoordinatorMessage(decode(data));
    if (msg.type === 'round') asked ??= Date.now();
    if (msg.type === 'challenge')
      ws.send(encode({ type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: 'silent', jobId: null, features: 1, trainRows: s.train.ids.length, testRows: 0, proof: null, noise: false, model: null }));
    else if (msg.type === 'welcome') jobId = msg.jobId;
    else if (msg.type === 'psi') ws.send(encode(psiAnswer(s.train.ids, msg)));
    else if (msg.type === 'setup')
      ws.send(encode({ type: 'ready', jobId, privacy: { mechanism: 'none', epsilon: null, delta: null, rounds: 40, sigma: 0, sensitivity: 0, accountant: null, seeded: false } }));
    // round 1: no answer
  });
  assert.equal((await coord.exit).code, 69);
  // The job ends at the deadline, not at the test's timeout: well within a minute of round 1
  // reaching the silent party, however loaded the machine.
  assert.ok(asked !== undefined, 'round 1 reached the silent party');
  assert.ok(Date.now() - asked < 60_000, `the job ended ${Date.now() - asked} ms after round 1`);
  assert.match(coord.stderr(), /party silent: no 'share' or 'exhausted' within 4000 ms/);
  assert.equal(await closed, CloseCodes.timeout.code);
  assert.equal((await real.exit).code, 69);
});
