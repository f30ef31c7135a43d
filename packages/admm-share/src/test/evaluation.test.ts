// A coordinator with test labels and a party without a test set: the job trains without
// evaluating (one warning, `evaluation.skipped` in summary.json) instead of turning the party
// away, and a job resumed from its checkpoint goes on the same way.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readTrace } from '@admm-share/coordinator';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { gate, roundMessage } from './gate.js';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

test('parties without a test set: no evaluation, a warning naming them, and the reason in summary.json, also after --resume', async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 400, testRows: 100, seed: 'evaluation-test' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const out = join(dir, 'out');
  const coordinator = (extra: string[]) =>
    run(BIN.coordinator, ['--algorithm', 'admm', '--labels', files.labels, '--test-labels', files.testLabels!, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--rounds', '40', '--tol-abs', '0', '--tol-rel', '0', '--job', 'eval-job', '--eval-every', '5', ...extra]);
  const first = coordinator(['--port', '0']);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  // The coordinator is stopped (SIGTERM) as round 12 is sent; party-1, behind a relay, never
  // gets that message, so the job is certainly mid-training when the signal is handled.
  const relay = await gate(port);
  t.after(() => relay.close());
  relay.before(roundMessage(12), () => {
    first.child.kill('SIGTERM');
    return 'drop';
  });
  // party-1 has no --test; party-2 has one but privacy on and no --release-test-scores, so it does not use it.
  const parties = files.parties.map((f, m) =>
    run(BIN.party, [
      '--coordinator', `ws://127.0.0.1:${m === 0 ? relay.port : port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--model', join(out, `model-${f.id}.json`), '--reconnect-timeout', '30000',
      ...(m === 0 ? ['--mechanism', 'none'] : ['--test', f.test!]),
      ...(m === 1 ? ['--epsilon', '50'] : m === 2 ? ['--mechanism', 'none'] : []),
    ]),
  );
  const reason = 'parties party-1, party-2 have no test set: no test metrics for this job; give every party --test (with privacy also --release-test-scores) to evaluate';
  const warning = await first.waitFor((r) => r.level === 40 && r.msg === reason, 'the warning');
  assert.deepEqual(warning.parties, ['party-1', 'party-2']);
  assert.equal((await first.exit).code, 130);
  const second = coordinator(['--port', String(port), '--resume']);
  for (const p of [second, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  // (party-2's ledger pays again for the round redone after the resume, so its budget may end the job a round early.)
  assert.ok(summary.rounds > 12 && summary.rounds <= 40, `rounds ${summary.rounds}`);
  assert.deepEqual(summary.evaluation, { skipped: reason });
  assert.equal(summary.test, undefined);
  assert.equal(summary.rows.test, 0);
  const trace = readTrace(join(out, 'trace.jsonl'));
  assert.equal(trace.filter((r) => r.test).length, 0, 'no round was evaluated');
  assert.equal(first.records.filter((r) => r.level === 40 && r.msg === reason).length, 1, 'one warning');
  // The coordinator's output ends with one human-readable line: how the job ended and why there are no metrics.
  const lastLine = second.stdout().trim().split('\n').at(-1)!;
  assert.match(lastLine, new RegExp(`^admm-coordinator: job \\S+ (converged after|ran|stopped by a privacy budget after) ${summary.rounds} rounds .*objective [0-9.e+-]+ \\(from noisy shares\\), no test metrics \\(`));
  assert.ok(lastLine.endsWith(`summary in ${join(out, 'summary.json')}`), lastLine);
});
