// Files a trained job leaves, edited at rest by someone without the keys, over real processes:
// job.json with its classes swapped (every prediction inverted) and its plain digest computed
// again, or turned back into the unsigned format, is refused by `admm-coordinator predict` and
// `serve`; a party model with negated coefficients and a recomputed digest by `admm-party
// predict`; a label-flips file edited to `flipped: []` (the job would train on the true labels
// under a label epsilon) by the coordinator that would reuse it, also when signed again with the
// key (the count is impossible for p). Each names the file, exits 65, and prints no stack.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jsonDigest, syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { BIN, type Proc, STACK_LINE, killAll, run, tempDir } from './procs.js';

after(killAll);

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

/** 'refused' when `p` exited 65 naming `file` with `message` and no stack; else what it did. */
async function outcome(p: Proc, file: string, message: RegExp): Promise<string> {
  const started = p.waitFor((r) => r.msg === 'listening').then(() => 'listening');
  const first = await Promise.race([p.exit.then(() => 'exited'), started]);
  if (first === 'listening') {
    p.kill();
    await p.exit;
    return 'accepted: listening';
  }
  const { code } = await p.exit;
  const err = p.stderr();
  if (code === 65 && err.includes(file) && message.test(err) && !STACK_LINE.test(err)) return 'refused';
  return `exit ${code}: ${err.split('\n')[0].slice(0, 200)}`;
}

test('job.json and a party model edited with their plain digests recomputed are refused at predict and serve, naming the file', async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 300, testRows: 50, seed: 'integrity-models' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const out = join(dir, 'out');
  const ids = files.parties.map((p) => p.id);
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', ids.join(','), '--out', out, '--rounds', '5', '--job', 'integrity-job']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((f) => run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`)]));
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());

  const jobPath = join(out, 'job.json');
  const pristine = readFileSync(jobPath, 'utf8');
  const predict = () => run(BIN.coordinator, ['predict', '--model', jobPath, '--ids', files.labels, '--port', '0']);
  const serve = () => run(BIN.coordinator, ['serve', '--model', jobPath, '--port', '0', '--http-port', '0']);
  // What an editor who knows the format but not the key writes: the digest over the fields but itself (and the mac).
  const reDigest = (j: Record<string, unknown>) => {
    const { digest: _, mac: __, ...body } = j;
    return { ...body, digest: jsonDigest(body), ...(j.mac === undefined ? {} : { mac: j.mac }) };
  };
  const swapped = readJson(jobPath);
  swapped.labels = { negative: swapped.labels.positive, positive: swapped.labels.negative };
  const unsigned = { ...readJson(jobPath), format: 'admm-share-job/1', mac: undefined };
  unsigned.labels = swapped.labels;
  const outcomes: Record<string, string> = {};
  for (const [what, edited] of [['classes swapped', reDigest(swapped)], ['classes swapped, unsigned format 1', reDigest(unsigned)]] as const) {
    writeFileSync(jobPath, JSON.stringify(edited, null, 2) + '\n');
    outcomes[`predict, ${what}`] = await outcome(predict(), jobPath, /job description: (its content does not match its keyed digest|format 'admm-share-job\/1' has no keyed digest)/);
    outcomes[`serve, ${what}`] = await outcome(serve(), jobPath, /job description: (its content does not match its keyed digest|format 'admm-share-job\/1' has no keyed digest)/);
  }
  writeFileSync(jobPath, pristine);
  outcomes['predict, untouched'] = await outcome(predict(), jobPath, /^$/);

  // party-1's model with every coefficient and the intercept negated: its scores inverted.
  const modelPath = join(out, `model-${ids[0]}.json`);
  const m = readJson(modelPath);
  m.coefficients = m.coefficients.map((c: number) => -c);
  if (m.intercept !== null) m.intercept = -m.intercept;
  writeFileSync(modelPath, JSON.stringify(reDigest(m), null, 2) + '\n');
  const party = run(BIN.party, ['predict', '--coordinator', 'ws://127.0.0.1:1', '--id', ids[0], '--model', modelPath, '--data', files.parties[0].train, '--ids', 'first', '--mechanism', 'none', '--connect-timeout', '2000']);
  await party.exit;
  const err = party.stderr();
  outcomes['admm-party predict, coefficients negated'] =
    party.child.exitCode === 65 && err.includes(`${modelPath}: party model: its content does not match its keyed digest`) && !STACK_LINE.test(err) ? 'refused' : `exit ${party.child.exitCode}: ${err.split('\n')[0].slice(0, 200)}`;
  assert.deepEqual(outcomes, {
    'predict, classes swapped': 'refused',
    'serve, classes swapped': 'refused',
    'predict, classes swapped, unsigned format 1': 'refused',
    'serve, classes swapped, unsigned format 1': 'refused',
    'predict, untouched': 'accepted: listening',
    'admm-party predict, coefficients negated': 'refused',
  });
});

test('a label-flips file edited to `flipped: []` is refused by the coordinator that would reuse it, also when signed again with the key', async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 300, testRows: 50, seed: 'integrity-flips' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const out = join(dir, 'out');
  const coordinator = () => run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--job', 'flips-job', '--label-epsilon', '1']);
  // The flips are drawn (and written) before the coordinator listens.
  const first = coordinator();
  await first.waitFor((r) => r.msg === 'listening');
  first.kill();
  await first.exit;
  const path = join(out, 'label-flips.json');
  const flips = readJson(path);
  assert.ok(flips.flipped.length > 40, `${flips.flipped.length} of 300 labels flipped at p = 0.27`);
  const outcomes: Record<string, string> = {};
  writeFileSync(path, JSON.stringify({ ...flips, flipped: [] }) + '\n', { mode: 0o600 });
  outcomes['flipped: [], old mac'] = await outcome(coordinator(), path, /label flips: its content does not match its keyed digest/);
  // An operator with coordinator.key signs the empty mask: refused as impossible for p.
  const { mac: _, ...body } = { ...flips, flipped: [] };
  const key = readFileSync(join(out, 'coordinator.key'));
  writeFileSync(path, JSON.stringify({ ...body, mac: createHmac('sha256', key).update(JSON.stringify(body)).digest('hex') }) + '\n', { mode: 0o600 });
  outcomes['flipped: [], signed with the key'] = await outcome(coordinator(), path, /label flips: flipped: 0 of 300 labels flipped, but with flip probability 0\.2689 a draw has between \d+ and \d+ but for a chance below 1e-9/);
  writeFileSync(path, JSON.stringify(flips) + '\n', { mode: 0o600 });
  outcomes.untouched = await outcome(coordinator(), path, /^$/);
  assert.deepEqual(outcomes, { 'flipped: [], old mac': 'refused', 'flipped: [], signed with the key': 'refused', untouched: 'accepted: listening' });
});
