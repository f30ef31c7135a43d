// The coordinator's report files: test-scores.csv round trips (a quoted id included) and its
// errors, the warnings for a party that adds nothing, the squared-loss report, and the user's id
// column name in test-scores.csv and predictions.csv.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { DataError } from '@admm-share/core';
import { tempDir } from '@admm-share/core/test-support';
import { type TestScores, CONTRIBUTION_THRESHOLD, buildModelReport, contributionWarnings, formatModelReport, formatTestScores, idColumnName, readModelReport, readTestScores, weightWarnings } from '../output/model-report.js';
import { modelReportPage } from '../output/report-page.js';
import { formatPredictions } from '../prediction/predict.js';
import { reportWarnings } from '../job/report-of.js';

const f = (xs: number[]) => Float64Array.from(xs);

const scores: TestScores = {
  idColumn: 'customer "no", id',
  ids: ['a,1', 'b"2', 'c3', '<d4>'],
  y: f([1, -1, 1, -1]),
  total: f([1.5, -0.25, 0.75, 0.5]),
  parts: [
    { party: 'bank', scores: f([1, -0.5, 0.5, 0.5]) },
    { party: 'telco', scores: f([0.5, 0.25, 0.25, 0]) },
  ],
};

test('test-scores.csv: written and read back exactly, quoted ids and id column included', (t) => {
  const path = join(tempDir(t), 'test-scores.csv');
  writeFileSync(path, formatTestScores(scores));
  assert.equal(readFileSync(path, 'utf8').split('\n')[0], '"customer ""no"", id",label,score,bank,telco');
  assert.deepEqual(readTestScores(path), scores);
});

test('test-scores.csv: a bad file is a DataError naming the line', (t) => {
  const dir = tempDir(t);
  const cases: [string, RegExp][] = [
    ['id,score\n', /:1: .*header/],
    ['id,label,score,p\nx,1,2\n', /:2: 3 fields, but the header has 4/],
    ['id,label,score,p\nx,1,2,abc\n', /:2: column 'p'.*'abc'/],
    ['id,label,score\n"x,1,2\n', /:2: .*never closed/],
  ];
  for (const [i, [text, message]] of cases.entries()) {
    const path = join(dir, `s${i}.csv`);
    writeFileSync(path, text);
    assert.throws(() => readTestScores(path), (err: unknown) => err instanceof DataError && message.test(err.message), text);
  }
});

test('contribution warnings: a party below the threshold is named, with what the model scores without it; one party alone gets none', () => {
  const c = (party: string, contribution: number) => ({ party, figure: 'auc' as const, without: 0.8 - contribution, contribution });
  const w = contributionWarnings([c('bank', 0.1), c('telco', CONTRIBUTION_THRESHOLD / 2), c('shop', -0.01), c('ok', CONTRIBUTION_THRESHOLD)]);
  assert.equal(w.length, 2);
  assert.match(w[0], /^party telco's part adds 0\.001 AUC .*nothing measurable/);
  assert.match(w[1], /^party shop's part adds -0\.010 AUC/);
  assert.deepEqual(contributionWarnings([c('bank', 0)]), []);
  assert.deepEqual(contributionWarnings([c('bank', NaN), c('telco', NaN)]), [], 'one class in the test set: no AUC, no warning');
});

test('one-shot weight warnings: a weight ~0 next to the others (and to 1) is named', () => {
  assert.deepEqual(weightWarnings({ a: 0.8, b: 1.2 }), []);
  const w = weightWarnings({ a: 0.8, b: -2.6e-6 });
  assert.equal(w.length, 1);
  assert.match(w[0], /party b's release has combination weight -2\.60e-6/);
  // Relative to the largest other weight: 0.004 is ~0 next to 5, not next to 1.
  assert.equal(weightWarnings({ a: 5, b: 0.004 }).length, 1);
  assert.equal(weightWarnings({ b: 0.004 }).length, 0);
});

test('squared loss: RMSE, MAE and R^2, contributions as R^2 lost, and a page without ROC', async () => {
  // y 1, 2, 3, 4; total 1, 2, 3, 5 (errors 0, 0, 0, -1): RMSE 1/2, MAE 1/4, R^2 1 - 1/5.
  const s: TestScores = { idColumn: 'id', ids: ['1', '2', '3', '4'], y: f([1, 2, 3, 4]), total: f([1, 2, 3, 5]), parts: [{ party: 'p', scores: f([1, 2, 3, 5]) }, { party: 'q', scores: f([0, 0, 0, 0]) }] };
  const r = buildModelReport({ jobId: 'j', algorithm: 'admm', loss: 'squared', classes: null }, s);
  assert.equal(r.classification, null);
  assert.deepEqual(r.regression, { rmse: 0.5, mae: 0.25, r2: 1 - 1 / 5 });
  // Without p the score is 0: sse = 30, sst = 5, R^2 = -5; lost 0.8 + 5.
  assert.equal(r.contributions[0].without, 1 - 30 / 5);
  assert.equal(r.contributions[0].contribution, 0.8 + 5);
  assert.equal(r.contributions[1].contribution, 0);
  assert.match(r.warnings[0], /party q's part adds 0\.000 R\^2/);
  const page = await modelReportPage(r);
  assert.doesNotMatch(page, /<svg/);
  assert.match(page, /RMSE/);
});

test('the report page escapes names from files', async () => {
  const r = buildModelReport({ jobId: 'j', algorithm: 'admm', loss: 'logistic', classes: { negative: '<no>', positive: 'yes&"' } }, scores);
  const page = await modelReportPage(r);
  assert.match(page, /&lt;no&gt;/);
  assert.match(page, /yes&amp;&quot;/);
  assert.doesNotMatch(page, /<no>/);
  assert.doesNotMatch(page, /<script/i);
});

test("predictions.csv and test-scores.csv keep the user's id column name; ids from LIBSVM are 'id'", () => {
  assert.equal(idColumnName('x/new.csv', { idColumn: 'customer_id' }), 'customer_id');
  assert.equal(idColumnName('x/new.csv', {}), 'id');
  assert.equal(idColumnName('x/new.libsvm', { idColumn: 'customer_id' }), 'id');
  const csv = formatPredictions(['c1'], f([0]), { negative: 'no', positive: 'yes' }, [[]], 'customer_id');
  assert.equal(csv, 'customer_id,score,probability,positive_class,missing\nc1,0,0.5,yes,\n');
});

test('the summary warnings: the report\'s when the job evaluated, else a one-shot job\'s weights ~0', () => {
  const oneShot = { activeParty: 'bank', weights: { telco: -2.6e-6, shop: 0.7 }, intercept: null, local: null, warnings: [] };
  const w = reportWarnings({ oneShot }, undefined);
  assert.equal(w.length, 1);
  assert.match(w[0], /party telco's release has combination weight -2\.60e-6/);
  assert.deepEqual(reportWarnings({}, undefined), []);
  const report = buildModelReport({ jobId: 'j', algorithm: 'one-shot', loss: 'logistic', classes: null }, { ...scores, parts: [scores.parts[0], { party: 'telco', scores: new Float64Array(4) }] });
  assert.deepEqual(reportWarnings({ oneShot }, { report, scores }), report.warnings);
  assert.match(report.warnings[0], /party telco's part adds 0\.000 AUC/);
});

test('a test set of one class: no AUC, KS or ROC curve (null in the file), no warning, and the file reads back', (t) => {
  const one: TestScores = { ...scores, y: f([1, 1, 1, 1]) };
  const r = buildModelReport({ jobId: 'j', algorithm: 'admm', loss: 'logistic', classes: null }, one);
  assert.ok(Number.isNaN(r.classification!.auc));
  assert.deepEqual(r.classification!.roc, []);
  assert.deepEqual(r.classification!.gains.length, 4);
  assert.deepEqual(r.warnings, []);
  const path = join(tempDir(t), 'report.json');
  writeFileSync(path, formatModelReport(r));
  const back = readModelReport(path);
  assert.ok(Number.isNaN(back.classification!.auc) && Number.isNaN(back.classification!.ksThreshold));
  assert.equal(formatModelReport(back), formatModelReport(r));
});
