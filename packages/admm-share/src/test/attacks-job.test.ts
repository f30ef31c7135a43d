// What a party inside the job can do to a running coordinator and the honest parties (real
// child processes), the attacker a raw `ws` client (hostileParty): poison the job with a huge
// share and get the honest parties blamed, and speak out of turn. What an attacker can do
// before it is admitted: attacks-admission.test.ts.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { CloseCodes, encode } from '@admm-share/protocol';
import { coordinator, dataset, hostileParty, listening, party } from './attacks-support.js';
import { killAll, tempDir } from './procs.js';

after(killAll);

const NO_PRIVACY = { mechanism: 'none', epsilon: null, delta: null, rounds: 40, sigma: 0, sensitivity: 0, accountant: null, seeded: false } as const;

test('a party that sends a finite but huge share (1.7e308) is named and closed with 4003; the honest parties are not blamed', async (t) => {
  const dir = tempDir(t);
  const { s, files } = dataset(dir);
  const out = join(dir, 'poisoned');
  const ids = [...files.parties.slice(0, 2).map((p) => p.id), 'hostile'];
  const coord = coordinator(files, out, ['--rejoin-timeout', '1000'], ids);
  const { port } = await listening(coord);
  const honest = [0, 1].map((m) => party(files, m, port, out));
  let jobId = '';
  const hostile = hostileParty(port, {
    id: 'hostile',
    ids: s.train.ids,
    onSetup: (ws, setup) => {
      jobId = setup.jobId;
      ws.send(encode({ type: 'ready', jobId, privacy: NO_PRIVACY }));
    },
    onRound: (ws, round, n) => ws.send(encode({ type: 'share', jobId, round, share: new Float64Array(n).fill(1.7e308), penaltySq: 0, epsilonSpent: 0, solver: null })),
  });
  const closed = await hostile.closed;
  assert.equal(closed.code, CloseCodes.invalid.code, closed.reason);
  assert.match(closed.reason, /exceeds the bound/);
  assert.equal((await coord.exit).code, 69, coord.stderr());
  assert.match(coord.stderr(), /party hostile: share\.share\[0\] = 1\.7e\+308 exceeds the bound 1e\+100/);
  const failed = coord.records.find((r) => r.msg === 'job failed');
  assert.match(String(failed?.err), /^party hostile: /);
  // No honest party is closed for a bad message, and each learns who failed the job.
  const blamed = coord.records.filter((r) => r.msg === 'closing connection' && r.party !== 'hostile' && r.close !== CloseCodes.aborted.code);
  assert.deepEqual(blamed, []);
  for (const p of honest) {
    assert.equal((await p.exit).code, 69);
    assert.match(p.stderr(), /code 4009: job aborted: party hostile: /);
    assert.doesNotMatch(p.stderr() + p.stdout(), /bad message|NaN/);
  }
  assert.ok(!coord.records.some((r) => r.msg === 'round' && (r.round as number) >= 2), 'round 2 was never sent');
});

test('a share sent after ready but before round 1 asked for it, and one of the wrong length, are refused at once with 4004 naming the party', async (t) => {
  const dir = tempDir(t);
  const { s, files } = dataset(dir);
  const out = join(dir, 'early');
  const ids = [...files.parties.slice(0, 2).map((p) => p.id), 'eager'];
  const coord = coordinator(files, out, ['--round-timeout', '600000'], ids);
  const { port } = await listening(coord);
  const honest = [0, 1].map((m) => party(files, m, port, out));
  let sentAt = 0;
  const hostile = hostileParty(port, {
    id: 'eager',
    ids: s.train.ids,
    onSetup: (ws, setup) => {
      const n = setup.trainRows.length;
      ws.send(encode({ type: 'ready', jobId: setup.jobId, privacy: NO_PRIVACY }));
      sentAt = performance.now();
      ws.send(encode({ type: 'share', jobId: setup.jobId, round: 77, share: new Float64Array(n), penaltySq: 0, epsilonSpent: 0, solver: null }));
      ws.send(encode({ type: 'share', jobId: setup.jobId, round: 1, share: new Float64Array(n + 1), penaltySq: 0, epsilonSpent: 0, solver: null }));
    },
  });
  const closed = await hostile.closed;
  assert.equal(closed.code, CloseCodes.unexpected.code, closed.reason);
  assert.ok(closed.at - sentAt < 5000, `refused after ${closed.at - sentAt} ms (the round timeout is 10 minutes)`);
  assert.equal((await coord.exit).code, 69, coord.stderr());
  assert.match(coord.stderr(), /party eager: /);
  const refusal = coord.records.find((r) => r.msg === 'closing connection' && r.party === 'eager');
  assert.equal(refusal?.close, CloseCodes.unexpected.code);
  // Refused for the first share: the second is never read.
  assert.match(String(refusal?.detail), /a message when none was asked for|share for round 77/);
  for (const p of honest) {
    assert.equal((await p.exit).code, 69);
    assert.match(p.stderr(), /code 4009: job aborted: party eager: /);
  }
});
