// The paper experiment, small: every pipeline runs on real processes and the report,
// CSVs and plots come out consistent with each other.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defaultDataDir } from '../experiment.js';
import { A9A, BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

test('admm-share experiment paper --quick writes curves, baselines, plots and a report', async (t) => {
  const out = tempDir(t);
  // What is checked here is that every pipeline runs and its outputs agree, not a9a's figures:
  // --data-dir holds the first 1000 | 500 rows of a9a (--quick alone takes 4000 | 2000), and
  // the default --data-dir is the repository's a9a.
  assert.equal(resolve(defaultDataDir(), 'a9a') + '/', A9A);
  const dataDir = join(out, 'data-dir');
  mkdirSync(join(dataDir, 'a9a'), { recursive: true });
  for (const [file, rows] of [['a9a', 1000], ['a9a.t', 500]] as const)
    writeFileSync(join(dataDir, 'a9a', file), readFileSync(join(A9A, file), 'utf8').split('\n').slice(0, rows).join('\n') + '\n');
  const p = run(BIN.share, ['experiment', 'paper', '--quick', '--data-dir', dataDir, '--out', join(out, 'out')]);
  const { code } = await p.exit;
  assert.equal(code, 0, p.stderr());
  const curves = readFileSync(join(out, 'out', 'curves.csv'), 'utf8').trim().split('\n');
  assert.equal(curves[0], 'dataset,algorithm,epoch,objective,test_log_loss,test_accuracy,test_auc');
  const keys = new Set(curves.slice(1).map((l) => l.split(',').slice(0, 2).join(' / ')));
  for (const ds of ['a9a', 'spam', 'gisette'])
    for (const alg of ['ADMM (exact sharing)', 'ADMM (Algorithm 1 of the paper)', 'SGD (FDML)']) assert.ok(keys.has(`${ds} / ${alg}`), `${ds} / ${alg}`);
  assert.equal(curves.length - 1, 3 * 3 * 4, 'one row per dataset, algorithm and epoch');
  const baselines = readFileSync(join(out, 'out', 'baselines.csv'), 'utf8').trim().split('\n').slice(1).map((l) => l.split(',')[1]);
  assert.deepEqual(baselines, [
    'central (all features)', 'party-1 (features 1-66) only', 'party-2 (features 67-123) only',
    'central (all features)', 'party-1 (headers) only', 'party-2 (body) only', 'party-3 (links) only',
    'central (all features)', 'party-1 (features 1-2000) only', 'party-2 (features 2001-4000) only', 'party-3 (features 4001-5000) only',
  ]);
  for (const svg of ['a9a-curves.svg', 'spam-curves.svg', 'gisette-curves.svg', 'noise/sweep.svg']) assert.match(readFileSync(join(out, 'out', svg), 'utf8'), /^<svg/);
  const report = readFileSync(join(out, 'out', 'report.md'), 'utf8');
  assert.match(report, /!\[a9a: objective and test log loss per epoch\]\(a9a-curves\.svg\)/);
  assert.match(report, /## Test log loss under noise \(a9a\)/);
  assert.match(report, /Joint model \(ADMM, exact\) test AUC 0\.\d{4} against the best single party/);
});
