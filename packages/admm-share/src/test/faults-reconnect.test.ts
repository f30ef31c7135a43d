// Reconnecting, over real processes: a reconnect attempt whose handshake hangs (the relay,
// faults-relay.ts, accepts the connection and never answers) is given up after its own short
// timeout, not after --connect-timeout, so the party still rejoins within --reconnect-timeout;
// and a scoring party frozen (SIGSTOP) past the coordinator's --request-timeout, closed with
// 4016, comes back by itself when it thaws and serves the next request; and a party that fails
// on its own tells the coordinator only the kind of failure, not its local paths.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readLibsvm, syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { faultRelay } from './faults-relay.js';
import { BIN, type Proc, freeze, killAll, run, tempDir } from './procs.js';

after(killAll);

/** A fault that is not survived must fail the test, not leave it waiting. */
const TIMEOUT = { timeout: 120_000 };

test('a reconnect attempt whose handshake hangs is dropped after its own timeout: the party rejoins within --reconnect-timeout and the job completes', TIMEOUT, async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 400, testRows: 100, seed: 'faults-handshake' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const out = join(dir, 'out');
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--rounds', '30', '--tol-abs', '0', '--tol-rel', '0', '--job', 'handshake-job']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const relay = await faultRelay(port);
  t.after(() => relay.close());
  // Where round 5 would reach party-1, its connection is cut and its next attempt hangs.
  relay.before(
    (m) => m.type === 'round' && m.round === 5,
    () => {
      relay.hang(1);
      relay.cutAll();
    },
  );
  // --connect-timeout stays at its 30 s: an attempt that waited for it would outlast --reconnect-timeout.
  const parties = files.parties.map((f, m) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${m === 0 ? relay.port : port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`), '--reconnect-timeout', '12000']),
  );
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.equal(relay.counts().hung, 1, 'one attempt hung');
  const retries = parties[0].records.filter((r) => r.msg === 'connection lost; reconnecting');
  const hung = retries.findIndex((r) => /handshake has timed out/.test(String(r.why)));
  assert.ok(hung > 0, `the hung attempt was given up: ${JSON.stringify(retries)}`);
  const waited = (retries[hung].time as number) - (retries[hung - 1].time as number);
  assert.ok(waited < 8000, `the hung attempt took ${waited} ms`);
  assert.equal(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).rounds, 30);
});

const PARTIES = ['party-1', 'party-2', 'party-3'];

test('a scoring party frozen past --request-timeout: 504, closed with 4016, and once thawed it rejoins by itself and serves the next request with the same scores', TIMEOUT, async (t) => {
  const dir = tempDir(t);
  const runDir = join(dir, 'run');
  const sim = run(BIN.share, ['simulate', '--out', runDir, '--rounds', '10']);
  assert.equal((await sim.exit).code, 0, sim.stderr());
  const token = 'faults-serve-token-0123456789ab';
  writeFileSync(join(dir, 'token'), token + '\n', { mode: 0o600 });
  // Heartbeats every minute: the freeze is met by the request's deadline, not by a missed ping.
  const c = run(BIN.coordinator, ['serve', '--model', join(runDir, 'job.json'), '--port', '0', '--http-port', '0', '--http-token-file', join(dir, 'token'), '--credentials', join(runDir, 'data', 'credentials.json'), '--request-timeout', '1000', '--heartbeat', '60000']);
  const { port } = (await c.waitFor((r) => r.msg === 'listening')) as { port: number };
  const { httpPort } = (await c.waitFor((r) => r.msg === 'serving POST /score')) as { httpPort: number };
  const data = (party: string) => join(runDir, 'data', `${party}.test.libsvm`);
  const parties: Proc[] = PARTIES.map((party) =>
    run(BIN.party, ['predict', '--coordinator', `ws://127.0.0.1:${port}`, '--id', party, '--model', join(runDir, `model-${party}.json`), '--data', data(party), '--ids', 'first', '--token-file', join(runDir, 'data', `${party}.token`), '--mechanism', 'none']),
  );
  const url = `http://127.0.0.1:${httpPort}`;
  const auth = { authorization: `Bearer ${token}` };
  const ready = async (what: string) => {
    for (let i = 0; i < 300; i++) {
      const h = (await (await fetch(`${url}/healthz`, { headers: auth })).json()) as { parties: Record<string, string> };
      if (PARTIES.every((p) => h.parties[p] === 'ready')) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(what);
  };
  const ids = readLibsvm(data('party-1'), { ids: 'first' }).ids.slice(0, 50);
  const post = () => fetch(`${url}/score`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ ids }) });
  const scores = async () => {
    const res = await post();
    assert.equal(res.status, 200);
    return ((await res.json()) as { results: { score: number }[] }).results.map((r) => r.score);
  };
  await ready('the parties did not become ready');
  const before = await scores();

  freeze(parties[2]);
  const slow = await post();
  assert.equal(slow.status, 504);
  // Frozen for twice --request-timeout in all.
  await new Promise((r) => setTimeout(r, 1000));
  parties[2].child.kill('SIGCONT');
  await parties[2].waitFor((r) => r.msg === 'connection lost; reconnecting' && /^code 4016/.test(String(r.why)), 'party-3 retrying after 4016');
  await ready('party-3 did not come back');
  assert.deepEqual(await scores(), before);
  assert.ok(c.records.some((r) => r.msg === 'party timed out (no answer in time); it may join again' && r.party === 'party-3'), 'the coordinator says why it closed party-3');
  assert.ok(!c.records.some((r) => r.msg === 'party left before the job started'));

  c.child.kill('SIGTERM');
  await c.exit;
  for (const p of parties) assert.equal((await p.exit).code, 0, p.stderr());
});

test("a party that fails on its own tells the coordinator only that (4012): its local paths stay in its own log", TIMEOUT, async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 200, testRows: 50, seed: 'faults-reasons' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const out = join(dir, 'out');
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--rounds', '5', '--job', 'reasons-job']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  // party-1's privacy ledger is unreadable: it fails at its welcome, naming the file.
  const f = files.parties[0];
  const model = join(dir, 'secret-folder', `model-${f.id}.json`);
  const ledger = join(dir, 'secret-folder', `model-${f.id}.ledger.json`);
  mkdirSync(join(dir, 'secret-folder'));
  writeFileSync(ledger, '{not json');
  const p = run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--epsilon', '1', '--model', model]);
  assert.equal((await p.exit).code, 65, p.stderr());
  assert.match(p.stderr(), /secret-folder/);
  assert.ok(p.records.some((r) => r.msg === 'party failure; closing' && String(r.err).includes(ledger)), 'the party logs the details');
  const lost = await coord.waitFor((r) => r.party === f.id && r.code === 4012, 'the coordinator seeing the close');
  assert.match(String(lost.reason), /^party failure/);
  coord.child.kill('SIGTERM');
  await coord.exit;
  assert.doesNotMatch(coord.stdout() + coord.stderr(), /secret-folder/);
});
