// Faults during training over real processes: a party killed with SIGKILL and restarted,
// and a connection dropped under a live party. The job completes, and (no noise) with the
// same objective as an uninterrupted run.
//
// Each fault is placed at a point of the job, not at a moment: a relay (gate.ts) between one
// party and the coordinator runs the fault synchronously before the message that asks for
// round k is forwarded, so the job cannot have ended (or gone far past round k) when it
// lands, however slow the machine. Only outcomes that depend on timing are left open (a
// healthy party dropped for a late heartbeat on a loaded machine rejoins like any other).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readTrace } from '@admm-share/coordinator';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { type Gate, gate, roundMessage } from './gate.js';
import { BIN, type Proc, freeze, killAll, run, tempDir } from './procs.js';

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

/** A relay to the coordinator listening on `port`, closed when the test ends. */
async function relayTo(t: { after(fn: () => Promise<void>): void }, port: number): Promise<Gate> {
  const g = await gate(port);
  t.after(() => g.close());
  return g;
}


/**
 * The uninterrupted job, run once for the file: every test's setup writes the same seeded
 * data, so each compares with this one run.
 */
const shared = tempDir({ after });
let uninterrupted: Promise<{ out: string; objective: number }> | undefined;
function baseline(): Promise<{ out: string; objective: number }> {
  uninterrupted ??= (async () => {
    const files = setup(shared);
    const out = join(shared, 'baseline');
    const coord = coordinator(files, out);
    const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
    const parties = files.parties.map((_, m) => party(files, m, `ws://127.0.0.1:${port}`, out));
    for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
    return { out, objective: JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).objective };
  })();
  return uninterrupted;
}

test('kill -9 a party mid-training and start it again: the job completes with the uninterrupted objective', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const { objective: expected } = await baseline();
  const out = join(dir, 'faulty');
  const coord = coordinator(files, out);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const url = `ws://127.0.0.1:${port}`;
  // party-2 is killed before round 10 reaches it: it has answered rounds 1 to 9, not 10.
  const relay = await relayTo(t, port);
  let victim: Proc | undefined;
  relay.before(roundMessage(10), () => {
    victim!.child.kill('SIGKILL');
    return 'drop';
  });
  const parties = files.parties.map((_, m) => party(files, m, m === 1 ? `ws://127.0.0.1:${relay.port}` : url, out));
  victim = parties[1];
  assert.equal((await parties[1].exit).signal, 'SIGKILL');
  await coord.waitFor((r) => r.msg === 'party disconnected; waiting for it to rejoin' && r.party === files.parties[1].id, 'the coordinator noticing');
  const restarted = party(files, 1, url, out);
  for (const p of [coord, parties[0], restarted, parties[2]]) assert.equal((await p.exit).code, 0, p.stderr());
  await coord.waitFor((r) => r.msg === 'party rejoined');
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.rounds, Number(ROUNDS));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
  // The restarted party's model is the uninterrupted one's too.
  const id = files.parties[1].id;
  const model = (dir2: string) => JSON.parse(readFileSync(join(dir2, `model-${id}.json`), 'utf8')).coefficients as number[];
  const [got, want] = [model(out), model((await baseline()).out)];
  const scale = Math.max(...want.map(Math.abs));
  assert.ok(got.every((v, j) => Math.abs(v - want[j]) <= 1e-9 * scale), `model of ${id} differs from the uninterrupted run`);
});

test('a dropped connection (party alive) reconnects by itself and the job completes with the same objective', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const { objective: expected } = await baseline();
  const out = join(dir, 'dropped');
  const coord = coordinator(files, out);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  // party-3's connection is cut where round 15 would reach it.
  const relay = await relayTo(t, port);
  relay.before(roundMessage(15), (m) => {
    relay.cut(m.conn);
    return 'drop';
  });
  const parties = files.parties.map((_, m) => party(files, m, m === 2 ? `ws://127.0.0.1:${relay.port}` : `ws://127.0.0.1:${port}`, out));
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.match(parties[2].stdout(), /connection lost; reconnecting/);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
});

test('heartbeats: a party frozen past a heartbeat is dropped, comes back when it thaws, and the job completes with the same objective', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const { objective: expected } = await baseline();
  const out = join(dir, 'frozen');
  // Heartbeats every second: party-1, frozen before round 10 reaches it, misses one. (On a
  // loaded machine a healthy party may miss one too; it is dropped and rejoins the same way.)
  const coord = coordinator(files, out, ['--heartbeat', '1000']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const relay = await relayTo(t, port);
  let frozen: Proc | undefined;
  relay.before(roundMessage(10), () => freeze(frozen!));
  const parties = files.parties.map((_, m) => party(files, m, m === 0 ? `ws://127.0.0.1:${relay.port}` : `ws://127.0.0.1:${port}`, out));
  frozen = parties[0];
  const id = files.parties[0].id;
  await coord.waitFor((r) => r.msg === 'no heartbeat; dropping the connection' && r.party === id, 'a missed heartbeat');
  parties[0].child.kill('SIGCONT');
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  await coord.waitFor((r) => r.msg === 'party rejoined' && r.party === id);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
});

test('kill -9 the coordinator mid-training and restart it with --resume: the parties rejoin and the job ends with the uninterrupted objective', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const { objective: expected } = await baseline();
  const out = join(dir, 'crashed');
  const first = coordinator(files, out, ['--checkpoint-every', '5']);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  // Round 23 is held back from party-1: rounds 1 to 22 are complete, 23 cannot be. The
  // coordinator is killed there once its background writer has put a checkpoint on disk (on a
  // loaded machine the first write can land after round 22 was sent: killed at once, it left
  // none).
  const relay = await relayTo(t, port);
  let held!: () => void;
  const round23 = new Promise<void>((resolve) => (held = resolve));
  relay.before(roundMessage(23), () => {
    held();
    return 'drop';
  });
  const parties = files.parties.map((_, m) => party(files, m, m === 0 ? `ws://127.0.0.1:${relay.port}` : `ws://127.0.0.1:${port}`, out));
  await round23;
  const deadline = Date.now() + 30_000;
  while (!existsSync(join(out, 'checkpoint.bin')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  first.child.kill('SIGKILL');
  assert.equal((await first.exit).signal, 'SIGKILL');
  // Same port: the parties are reconnecting to it with backoff.
  const second = coordinator(files, out, ['--checkpoint-every', '5', '--resume', '--port', String(port)]);
  const resumed = await second.waitFor((r) => r.msg === 'resuming from checkpoint; waiting for the parties to rejoin', 'resume');
  // From a checkpoint of a complete round (every 5): round 20 unless the last write was still
  // under way when the process died, never a round that was not complete.
  const k = resumed.round as number;
  assert.ok(k >= 5 && k <= 22 && k % 5 === 0, `resumed at round ${k}`);
  for (const p of [second, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.rounds, Number(ROUNDS));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
  const trace = readTrace(join(out, 'trace.jsonl'));
  assert.deepEqual(trace.map((r) => r.round), Array.from({ length: Number(ROUNDS) }, (_, i) => i + 1), 'one line per round, none twice');
});

test('--resume refuses a checkpoint made with other labels, with a clear error', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const out = join(dir, 'job');
  // Checkpoints by time (the default's policy), here after any round that ends a millisecond after the last.
  const coord = coordinator(files, out, ['--checkpoint-seconds', '0.001']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  // A completed job removes its checkpoint: hold round 5 back from party-1 (the job cannot get
  // past it), wait until the background writer has put a checkpoint on disk, then kill the
  // coordinator so that the checkpoint is left.
  const relay = await relayTo(t, port);
  let held!: () => void;
  const round5 = new Promise<void>((resolve) => (held = resolve));
  relay.before(roundMessage(5), () => {
    held();
    return 'drop';
  });
  const parties = files.parties.map((_, m) => party(files, m, m === 0 ? `ws://127.0.0.1:${relay.port}` : `ws://127.0.0.1:${port}`, out));
  await round5;
  const deadline = Date.now() + 30_000;
  while (!existsSync(join(out, 'checkpoint.bin')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  coord.child.kill('SIGKILL');
  await coord.exit;
  for (const p of parties) p.kill();
  await Promise.all(parties.map((p) => p.exit));
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
  const { objective: expected } = await baseline();
  const out = join(dir, 'stopped');
  const first = coordinator(files, out, ['--checkpoint-every', '1000']);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  // SIGTERM as round 12 is sent; party-1 never gets that message, so the job cannot get past
  // round 12 before the coordinator handles the signal.
  const relay = await relayTo(t, port);
  relay.before(roundMessage(12), () => {
    first.child.kill('SIGTERM');
    return 'drop';
  });
  const parties = files.parties.map((_, m) => party(files, m, m === 0 ? `ws://127.0.0.1:${relay.port}` : `ws://127.0.0.1:${port}`, out));
  assert.equal((await first.exit).code, 130);
  assert.match(first.stdout(), /stopped: checkpoint written, resume with --resume/);
  const second = coordinator(files, out, ['--resume', '--port', String(port)]);
  for (const p of [second, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
});
