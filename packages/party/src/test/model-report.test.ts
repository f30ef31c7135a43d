// A party's coefficient report: odds ratios are exp of the coefficients, the original-unit
// columns appear when the preparation describes them, names from files are escaped, and the
// JSON is read back through its schema.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from '@admm-share/core/test-support';
import { type ReportedModel, partyReport, partyReportPage, partyReportPaths, readPartyReport, writePartyReport } from '../scoring/model-report.js';

const model: ReportedModel = {
  jobId: 'job-1',
  partyId: 'bank',
  role: 'active',
  loss: 'logistic',
  labels: { negative: 'no', positive: 'yes' },
  featureNames: ['income', '<b>age</b>', 'region=north'],
  coefficients: [0.5, -1.25, 0],
  intercept: -0.3,
  scoreClip: null,
  preprocessing: { rowScaling: false, intercept: true },
};

test('odds ratios are exp(coefficient); without preparation no original-unit columns', (t) => {
  const path = join(tempDir(t), 'model-bank.json');
  const r = writePartyReport(path, model);
  assert.deepEqual(r.coefficients.map((c) => c.oddsRatio), [Math.exp(0.5), Math.exp(-1.25), 1]);
  assert.equal(r.originalUnits, false);
  assert.deepEqual(readPartyReport(partyReportPaths(path).json), r);
  assert.deepEqual(partyReportPaths(path), { json: join(path, '..', 'model-bank.report.json'), html: join(path, '..', 'model-bank.report.html') });
  const page = partyReportPage(r);
  assert.match(page, /&lt;b&gt;age&lt;\/b&gt;/);
  assert.doesNotMatch(page, /<b>age/);
  assert.doesNotMatch(page, /per original unit/);
  assert.match(page, /odds ratio/);
});

test('with the preparation: standardised and original-unit coefficients, odds ratio per original unit', () => {
  const units = [
    { name: 'income', original: 'income', kind: 'numeric', center: 50000, scale: 20000, perUnit: 0.5 / 20000 },
    { name: '<b>age</b>', original: '<b>age</b>', kind: 'numeric', center: 40, scale: 10, perUnit: -0.125 },
    { name: 'region=north', original: 'region', kind: 'one-hot', perUnit: 0, center: null, scale: null },
  ];
  const r = partyReport(model, { columns: units, offset: -0.3 - 0.5 * 2.5 + 1.25 * 4 });
  assert.equal(r.originalUnits, true);
  assert.deepEqual(r.coefficients.map((c) => c.oddsRatioPerUnit), [Math.exp(0.5 / 20000), Math.exp(-0.125), 1]);
  assert.equal(r.coefficients[2].original, 'region');
  assert.equal(r.coefficients[2].scale, null);
  const page = partyReportPage(r);
  assert.match(page, /coefficient per original unit/);
  assert.match(page, /odds ratio per original unit/);
  assert.match(page, /one-hot/);
  assert.throws(() => partyReport(model, { columns: units.slice(1) }), /2 unit descriptions for 3 coefficients/);
});

test('squared loss: no odds ratios', () => {
  const r = partyReport({ ...model, loss: 'squared', labels: null });
  assert.deepEqual(r.coefficients.map((c) => c.oddsRatio), [null, null, null]);
  assert.equal(r.positiveClass, null);
  assert.doesNotMatch(partyReportPage(r), /odds ratio/);
});
