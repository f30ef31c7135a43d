// Faults during training over real processes: a party killed with SIGKILL and restarted,
// and a connection dropped under a live party. The job completes, and (no noise) with the
// same objective as an uninterrupted run.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { type Server, type Socket, createConnection, createServer } from 'node:net';
import { join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { BIN, type Proc, killAll, run, tempDir } from './procs.js';

after(killAll);

const ROUNDS = '60';

function setup(dir: string) {
  const s = syntheticDataset({ trainRows: 500, testRows: 100, seed: 'resume-test' });
  return writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
}

function coordinator(files: ReturnType<typeof setup>, out: string, extra: string[] = []) {
  return run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--test-labels', files.testLabels!, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--rounds', ROUNDS, '--tol-abs', '0', '--tol-rel', '0', '--job', 'resume-job', ...extra]);
}

function party(files: ReturnType<typeof setup>, m: number, url: string, out: string): Proc {
  const f = files.parties[m];
  return run(BIN.party, ['--coordinator', url, '--id', f.id, '--data', f.train, '--test', f.test!, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`), '--reconnect-timeout', '30000']);
}

async function baseline(dir: string, files: ReturnType<typeof setup>): Promise<number> {
  const out = join(dir, 'baseline');
  const coord = coordinator(files, out);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((_, m) => party(files, m, `ws://127.0.0.1:${port}`, out));
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  return JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).objective;
}

test('kill -9 a party mid-training and start it again: the job completes with the uninterrupted objective', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const expected = await baseline(dir, files);
  const out = join(dir, 'faulty');
  const coord = coordinator(files, out);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const url = `ws://127.0.0.1:${port}`;
  const parties = files.parties.map((_, m) => party(files, m, url, out));
  await coord.waitFor((r) => r.msg === 'round' && (r.round as number) >= 10, 'round 10');
  parties[1].child.kill('SIGKILL');
  await parties[1].exit;
  await coord.waitFor((r) => r.msg === 'party disconnected; waiting for it to rejoin', 'the coordinator noticing');
  const restarted = party(files, 1, url, out);
  for (const p of [coord, parties[0], restarted, parties[2]]) assert.equal((await p.exit).code, 0, p.stderr());
  await coord.waitFor((r) => r.msg === 'party rejoined');
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.rounds, Number(ROUNDS));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
  // The restarted party's model is the uninterrupted one's too.
  const id = files.parties[1].id;
  const model = (dir2: string) => JSON.parse(readFileSync(join(dir, dir2, `model-${id}.json`), 'utf8')).coefficients as number[];
  const [got, want] = [model('faulty'), model('baseline')];
  const scale = Math.max(...want.map(Math.abs));
  assert.ok(got.every((v, j) => Math.abs(v - want[j]) <= 1e-9 * scale), `model of ${id} differs from the uninterrupted run`);
});

/** A TCP relay whose connections the test can cut. */
function relay(target: number): Promise<{ port: number; cut(): void; server: Server }> {
  const pairs: Socket[][] = [];
  const server = createServer((client) => {
    const upstream = createConnection({ port: target, host: '127.0.0.1' });
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    client.pipe(upstream);
    upstream.pipe(client);
    pairs.push([client, upstream]);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as { port: number }).port,
        cut: () => pairs.splice(0).forEach(([a, b]) => (a.destroy(), b.destroy())),
        server,
      }),
    ),
  );
}

test('a dropped connection (party alive) reconnects by itself and the job completes with the same objective', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const expected = await baseline(dir, files);
  const out = join(dir, 'dropped');
  const coord = coordinator(files, out);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const proxy = await relay(port);
  t.after(() => proxy.server.close());
  const parties = files.parties.map((_, m) => party(files, m, m === 2 ? `ws://127.0.0.1:${proxy.port}` : `ws://127.0.0.1:${port}`, out));
  await coord.waitFor((r) => r.msg === 'round' && (r.round as number) >= 15, 'round 15');
  proxy.cut();
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.match(parties[2].stdout(), /connection lost; reconnecting/);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
});

test('heartbeats: a party frozen past a heartbeat is dropped, comes back when it thaws, and the job completes with the same objective', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const expected = await baseline(dir, files);
  const out = join(dir, 'frozen');
  const coord = coordinator(files, out, ['--heartbeat', '300']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((_, m) => party(files, m, `ws://127.0.0.1:${port}`, out));
  await coord.waitFor((r) => r.msg === 'round' && (r.round as number) >= 10, 'round 10');
  parties[0].child.kill('SIGSTOP');
  await coord.waitFor((r) => r.msg === 'no heartbeat; dropping the connection', 'a missed heartbeat');
  parties[0].child.kill('SIGCONT');
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  await coord.waitFor((r) => r.msg === 'party rejoined');
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
});

test('kill -9 the coordinator mid-training and restart it with --resume: the parties rejoin and the job ends with the uninterrupted objective', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const expected = await baseline(dir, files);
  const out = join(dir, 'crashed');
  const first = coordinator(files, out, ['--checkpoint-every', '5']);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  const url = `ws://127.0.0.1:${port}`;
  const parties = files.parties.map((_, m) => party(files, m, url, out));
  await first.waitFor((r) => r.msg === 'round' && (r.round as number) >= 23, 'round 23');
  first.child.kill('SIGKILL');
  await first.exit;
  // Same port: the parties are reconnecting to it with backoff.
  const second = coordinator(files, out, ['--checkpoint-every', '5', '--resume', '--port', String(port)]);
  const resumed = await second.waitFor((r) => r.msg === 'resuming from checkpoint; waiting for the parties to rejoin', 'resume');
  assert.ok((resumed.round as number) >= 20 && (resumed.round as number) <= 23, `resumed at round ${resumed.round}`);
  for (const p of [second, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.rounds, Number(ROUNDS));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
  const trace = readFileSync(join(out, 'trace.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(trace.map((r) => r.round), Array.from({ length: Number(ROUNDS) }, (_, i) => i + 1), 'one line per round, none twice');
});

test('--resume refuses a checkpoint made with other labels, with a clear error', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const out = join(dir, 'job');
  const coord = coordinator(files, out, ['--checkpoint-every', '2']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((_, m) => party(files, m, `ws://127.0.0.1:${port}`, out));
  // A completed job removes its checkpoint: stop this one mid-training so that one is left.
  await coord.waitFor((r) => r.msg === 'round' && (r.round as number) >= 3, 'round 3');
  for (const p of [coord, ...parties]) p.kill();
  await Promise.all([coord, ...parties].map((p) => p.exit));
  assert.ok(existsSync(join(out, 'checkpoint.bin')));
  const other = join(dir, 'other-labels.csv');
  writeFileSync(other, readFileSync(files.labels, 'utf8').replace(/,1\n/, ',-1\n'));
  const bad = run(BIN.coordinator, ['--port', '0', '--labels', other, '--test-labels', files.testLabels!, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--resume']);
  assert.equal((await bad.exit).code, 64);
  assert.match(bad.stderr(), /--resume: the label files differ from the ones the checkpointed job used/);
});

test('SIGTERM: the coordinator checkpoints, tells the parties it is going away (exit 130), and --resume finishes the job', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const expected = await baseline(dir, files);
  const out = join(dir, 'stopped');
  const first = coordinator(files, out, ['--checkpoint-every', '1000']);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((_, m) => party(files, m, `ws://127.0.0.1:${port}`, out));
  await first.waitFor((r) => r.msg === 'round' && (r.round as number) >= 12, 'round 12');
  first.child.kill('SIGTERM');
  assert.equal((await first.exit).code, 130);
  assert.match(first.stdout(), /stopped: checkpoint written, resume with --resume/);
  const second = coordinator(files, out, ['--resume', '--port', String(port)]);
  for (const p of [second, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
});
