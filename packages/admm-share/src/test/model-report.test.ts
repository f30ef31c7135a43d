// End to end: the model report a real run writes (coordinator: report.json, report.html,
// test-scores.csv; each party: model-ID.report.json/.html) against independent computations:
// the test scores against the parties' model files applied to the test rows, AUC by counting
// pairs, KS by trying every threshold, each party's contribution by counting pairs without its
// part; `admm-share report` draws the same report.json again; a party whose columns are empty
// is named in a warning.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { predictScores, syntheticDataset } from '@admm-share/core';
import { BIN, killAll, run, tempDir } from './procs.js';
import { pairAuc } from '@admm-share/core/test-support';

after(killAll);

const synthetic = syntheticDataset(); // what `simulate` uses without --data

interface Scores {
  header: string[];
  ids: string[];
  y: number[];
  total: number[];
  parts: number[][];
}

/** test-scores.csv, read here with a split (the synthetic ids hold no comma). */
function readScores(path: string): Scores {
  const [head, ...rows] = readFileSync(path, 'utf8').trim().split('\n');
  const header = head.split(',');
  const cells = rows.map((r) => r.split(','));
  return { header, ids: cells.map((c) => c[0]), y: cells.map((c) => Number(c[1])), total: cells.map((c) => Number(c[2])), parts: header.slice(3).map((_, m) => cells.map((c) => Number(c[3 + m]))) };
}

function scanKs(s: number[], y: number[]): number {
  const nPos = y.filter((v) => v > 0).length;
  const nNeg = y.length - nPos;
  let best = 0;
  for (const t of new Set(s)) {
    let tp = 0;
    let fp = 0;
    for (let i = 0; i < s.length; i++) if (s[i] >= t) (y[i] > 0 ? tp++ : fp++);
    best = Math.max(best, Math.abs(tp / nPos - fp / nNeg));
  }
  return best;
}

const close = (a: number, b: number, what: string, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b}`);

test('simulate writes the model report: its figures are those of the test scores, the scores those of the model files, and `admm-share report` draws the same report again', async (t) => {
  const out = tempDir(t);
  const p = run(BIN.share, ['simulate', '--dataset', 'synthetic', '--rounds', '20', '--intercept', '--no-baselines', '--out', out]);
  assert.equal((await p.exit).code, 0, p.stderr());
  assert.match(p.stdout(), /report\.json, report\.html, test-scores\.csv/);

  const s = readScores(join(out, 'test-scores.csv'));
  assert.deepEqual(s.header, ['id', 'label', 'score', 'party-1', 'party-2', 'party-3']);
  assert.equal(s.ids.length, synthetic.test.ids.length);
  // Each party's part is its model file's coefficients (and intercept) applied to its block of the test rows.
  const row = new Map(synthetic.test.ids.map((id, i) => [id, i]));
  let offset = 0;
  for (const [m, d] of synthetic.blocks.entries()) {
    const model = JSON.parse(readFileSync(join(out, `model-party-${m + 1}.json`), 'utf8'));
    const x = new Float64Array(synthetic.blocks.reduce((a, b) => a + b, 0));
    x.set(model.coefficients, offset);
    const expected = predictScores(synthetic.test.X, x, model.intercept ?? 0);
    s.ids.forEach((id, i) => close(s.parts[m][i], expected[row.get(id)!], `party ${m + 1} row ${id}`));
    offset += d;
    // The party's coefficient report: exp of the model file's coefficients, every name.
    const rep = JSON.parse(readFileSync(join(out, `model-party-${m + 1}.report.json`), 'utf8'));
    assert.deepEqual(rep.coefficients.map((c: { oddsRatio: number }) => c.oddsRatio), model.coefficients.map(Math.exp));
    assert.deepEqual(rep.coefficients.map((c: { name: string }) => c.name), model.featureNames);
    assert.equal(rep.intercept, model.intercept);
    const page = readFileSync(join(out, `model-party-${m + 1}.report.html`), 'utf8');
    assert.match(page, /<table>/);
    assert.doesNotMatch(page, /<script/i);
  }
  s.ids.forEach((id, i) => close(s.total[i], s.parts.reduce((a, part) => a + part[i], 0), `total ${id}`, 1e-12));
  s.ids.forEach((id, i) => assert.equal(s.y[i], synthetic.test.y[row.get(id)!]));

  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8'));
  const c = report.classification;
  const auc = pairAuc(s.total, s.y);
  close(c.auc, auc, 'auc', 1e-12);
  close(c.gini, 2 * auc - 1, 'gini', 1e-12);
  close(c.ks, scanKs(s.total, s.y), 'ks', 1e-12);
  let ll = 0;
  let right = 0;
  s.total.forEach((v, i) => {
    const prob = 1 / (1 + Math.exp(-v));
    ll -= Math.log(s.y[i] > 0 ? prob : 1 - prob);
    if (prob > 0.5 === s.y[i] > 0) right++;
  });
  close(c.logLoss, ll / s.y.length, 'log loss', 1e-12);
  close(c.accuracy, right / s.y.length, 'accuracy', 0);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  close(c.auc, summary.test.auc, 'the summary AUC', 1e-12);
  for (const [m, part] of s.parts.entries()) {
    const without = pairAuc(s.total.map((v, i) => v - part[i]), s.y);
    close(report.contributions[m].contribution, auc - without, `party ${m + 1} contribution`, 1e-12);
    assert.ok(report.contributions[m].contribution > 0.01, `party ${m + 1} adds ${report.contributions[m].contribution}`);
  }
  assert.deepEqual(report.warnings, []);
  assert.equal(summary.warnings, undefined);

  const html = readFileSync(join(out, 'report.html'), 'utf8');
  assert.equal(html.match(/<svg/g)?.length, 3, 'ROC, calibration and gains plots');
  assert.doesNotMatch(html, /<script/i);
  assert.doesNotMatch(html, /(src|href)="https?:/i);
  assert.match(html, /Gini/);

  const before = readFileSync(join(out, 'report.json'), 'utf8');
  const partyBefore = readFileSync(join(out, 'model-party-2.report.json'), 'utf8');
  writeFileSync(join(out, 'report.html'), '');
  const again = run(BIN.share, ['report', out]);
  assert.equal((await again.exit).code, 0, again.stderr());
  assert.equal(readFileSync(join(out, 'report.json'), 'utf8'), before);
  assert.equal(readFileSync(join(out, 'model-party-2.report.json'), 'utf8'), partyBefore);
  assert.equal(readFileSync(join(out, 'report.html'), 'utf8').match(/<svg/g)?.length, 3);
  assert.match(again.stdout(), /model report: .*report\.html/);
  assert.equal(again.stdout().match(/coefficients: /g)?.length, 3);
});

test('a party whose columns are all empty adds nothing: the report and summary.json name it', async (t) => {
  const out = tempDir(t);
  // Labels follow features 1-4 (party-1's); party-2's columns 5-7 hold nothing in any row.
  const rows = (n: number, prefix: string) =>
    Array.from({ length: n }, (_, i) => {
      const f = [1, 2, 3, 4].map((j) => Math.sin(i * (j + 0.37) + prefix.length));
      const label = f[0] + 0.5 * f[1] - f[2] + 0.3 * Math.cos(i * 1.7) > 0 ? 1 : -1;
      return `${label} ${f.map((v, j) => `${j + 1}:${v.toFixed(6)}`).join(' ')}`;
    }).join('\n') + '\n';
  writeFileSync(join(out, 'train.libsvm'), rows(400, 'train'));
  writeFileSync(join(out, 'test.libsvm'), rows(200, 'test-set'));
  const run1 = join(out, 'run');
  const p = run(BIN.share, ['simulate', '--data', join(out, 'train.libsvm'), '--test', join(out, 'test.libsvm'), '--features', '7', '--split', '4,3', '--rounds', '20', '--no-baselines', '--out', run1]);
  assert.equal((await p.exit).code, 0, p.stderr());
  const report = JSON.parse(readFileSync(join(run1, 'report.json'), 'utf8'));
  assert.equal(report.contributions[1].contribution, 0);
  assert.equal(report.warnings.length, 1);
  assert.match(report.warnings[0], /party party-2's part adds 0\.000 AUC/);
  const summary = JSON.parse(readFileSync(join(run1, 'summary.json'), 'utf8'));
  assert.deepEqual(summary.warnings, report.warnings);
  assert.match(p.stdout(), /WARNING: party party-2's part adds 0\.000 AUC/);
});

test('admm-share report: a folder that is not a run is refused naming what it lacks (exit 64)', async (t) => {
  const dir = tempDir(t);
  for (const target of [join(dir, 'absent'), dir]) {
    const p = run(BIN.share, ['report', target]);
    assert.equal((await p.exit).code, 64, p.stderr());
    assert.match(p.stderr(), target === dir ? /neither test-scores\.csv nor a model-\*\.json/ : /not a folder/);
  }
});
