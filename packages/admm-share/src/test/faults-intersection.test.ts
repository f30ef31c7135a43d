// Faults before training, over real processes: an outage of the network during the private set
// intersection that outlasts both sides' heartbeats, and the coordinator killed with SIGKILL
// during the intersection and started again (with the same --job). The parties reconnect by
// themselves, as they do during training, and the job ends with the objective of the
// uninterrupted run. Each fault is placed by the relay (faults-relay.ts) before the
// coordinator's first `psi` reaches the last party to get one, so it lands in the intersection
// with every party admitted, however slow the machine.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { type FaultRelay, faultRelay, psiReaching } from './faults-relay.js';
import { BIN, type Proc, killAll, run, tempDir } from './procs.js';

after(killAll);

/** A fault that is not survived must fail the test, not leave it waiting. */
const TIMEOUT = { timeout: 120_000 };

const ROUNDS = '30';
const JOB = 'faults-job';
/** The outage: longer than either side's heartbeat timeout (the coordinator's at most 2 x 1000 ms, the party's 2000 ms). */
const OUTAGE_MS = 3500;

function setup(dir: string) {
  const s = syntheticDataset({ trainRows: 400, testRows: 100, seed: 'faults-test' });
  return writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
}
type Files = ReturnType<typeof setup>;

function coordinator(files: Files, out: string, extra: string[] = []): Proc {
  return run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--test-labels', files.testLabels!, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--rounds', ROUNDS, '--tol-abs', '0', '--tol-rel', '0', '--job', JOB, '--heartbeat', '1000', ...extra]);
}

function party(files: Files, m: number, port: number, out: string): Proc {
  const f = files.parties[m];
  return run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--test', f.test!, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`), '--heartbeat-timeout', '2000', '--reconnect-timeout', '30000']);
}

async function relayTo(t: { after(fn: () => Promise<void>): void }, port: number): Promise<FaultRelay> {
  const r = await faultRelay(port);
  t.after(() => r.close());
  return r;
}

/** Every process exits 0; fails as soon as one does not (the others would wait for it until their timeouts). */
function allExitZero(procs: Proc[]): Promise<void> {
  return new Promise((resolve, reject) => {
    let left = procs.length;
    for (const p of procs)
      void p.exit.then(({ code, signal }) => {
        if (code !== 0) reject(new assert.AssertionError({ message: `exit ${code ?? signal}: ${p.stderr().trim()}` }));
        else if (--left === 0) resolve();
      });
  });
}

const objectiveOf = (out: string): number => JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).objective;
const close = (got: number, want: number) => assert.ok(Math.abs(got - want) <= 1e-9 * Math.abs(want), `objective ${got} vs ${want}`);

/** The uninterrupted job, run once for the file (every test writes the same seeded data). */
const shared = tempDir({ after });
let uninterrupted: Promise<number> | undefined;
function baseline(): Promise<number> {
  uninterrupted ??= (async () => {
    const files = setup(shared);
    const out = join(shared, 'baseline');
    const coord = coordinator(files, out);
    const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
    const parties = files.parties.map((_, m) => party(files, m, port, out));
    for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
    return objectiveOf(out);
  })();
  return uninterrupted;
}

test('an outage during the intersection, longer than the heartbeat timeouts: the parties reconnect and join again, and the job ends with the uninterrupted objective', TIMEOUT, async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const expected = await baseline();
  const out = join(dir, 'outage');
  const coord = coordinator(files, out);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const relay = await relayTo(t, port);
  let started = 0;
  relay.before(
    psiReaching(files.parties.length),
    () => {
      relay.outage();
      started = Date.now();
      setTimeout(() => relay.restore(), OUTAGE_MS);
    },
  );
  const parties = files.parties.map((_, m) => party(files, m, relay.port, out));
  await allExitZero([coord, ...parties]);
  assert.ok(started > 0, 'the outage happened');
  // Both sides saw the connection die during the outage; the parties said so in words.
  assert.ok(coord.records.some((r) => r.msg === 'no heartbeat; dropping the connection'), 'the coordinator dropped a party by heartbeat');
  assert.ok(coord.records.some((r) => r.msg === 'party disconnected; it may join again'));
  // Each party in the intersection when the outage began lost its connection and said so in words.
  assert.ok(parties.some((p) => /connection lost; reconnecting/.test(p.stdout())), 'a party reconnected');
  for (const p of parties) assert.doesNotMatch(p.stdout() + p.stderr(), /closed the connection \(code 1006/);
  close(objectiveOf(out), expected);
});

test('kill -9 of the coordinator during the intersection, started again with the same --job: the parties join it again and the job ends with the uninterrupted objective', TIMEOUT, async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const expected = await baseline();
  const out = join(dir, 'crashed');
  const first = coordinator(files, out);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  const relay = await relayTo(t, port);
  relay.before(
    psiReaching(files.parties.length),
    () => void first.child.kill('SIGKILL'),
  );
  const parties = files.parties.map((_, m) => party(files, m, relay.port, out));
  assert.equal((await first.exit).signal, 'SIGKILL');
  // The parties are reconnecting (to the relay, which finds nothing listening behind it).
  await parties[0].waitFor((r) => r.msg === 'connection lost; reconnecting', 'a reconnect');
  // The same port, as an operator restarting it would: the relay forwards there.
  const second = coordinator(files, out, ['--port', String(port)]);
  await allExitZero([second, ...parties]);
  for (const p of parties) assert.doesNotMatch(p.stdout() + p.stderr(), /closed the connection \(code 1006/);
  close(objectiveOf(out), expected);
});

test('a connection lost during the set-up (after the intersection, before training): the party rejoins, is set up again, and the job ends with the uninterrupted objective', TIMEOUT, async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const expected = await baseline();
  const out = join(dir, 'setup');
  const coord = coordinator(files, out);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  // party-2's connection is cut where its set-up would reach it: it never gets that one.
  const relay = await relayTo(t, port);
  relay.before(
    (m) => m.type === 'setup',
    () => relay.cutAll(),
  );
  const parties = files.parties.map((_, m) => party(files, m, m === 1 ? relay.port : port, out));
  await allExitZero([coord, ...parties]);
  assert.ok(coord.records.some((r) => r.msg === 'party rejoined' && r.party === files.parties[1].id), 'party-2 rejoined');
  close(objectiveOf(out), expected);
});
