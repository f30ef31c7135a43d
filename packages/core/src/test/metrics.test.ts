import { test } from 'node:test';
import assert from 'node:assert/strict';
import { accuracy, classificationMetrics, logLoss, rocAuc } from '../index.js';
import { pairAuc } from './support.js';

const f = (xs: number[]) => Float64Array.from(xs);

/** Brute-force Mann-Whitney: share of (positive, negative) pairs ordered correctly, ties 1/2. */
test('rocAuc: hand-computed case with a tie', () => {
  // Positives: 0.35, 0.8, 0.4; negatives: 0.1, 0.4. Pairs (pos vs neg):
  //   0.35 > 0.1 -> 1,  0.35 < 0.4 -> 0
  //   0.8  > 0.1 -> 1,  0.8  > 0.4 -> 1
  //   0.4  > 0.1 -> 1,  0.4 == 0.4 -> 1/2
  // Sum 4.5 over 3 * 2 = 6 pairs: AUC = 0.75.
  const auc = rocAuc(f([0.1, 0.4, 0.35, 0.8, 0.4]), f([-1, -1, 1, 1, 1]));
  assert.ok(Math.abs(auc - 0.75) < 1e-15, `auc ${auc}`);
});

test('rocAuc: perfect, reversed, all tied, one class only', () => {
  assert.equal(rocAuc(f([-2, -1, 0.5, 3]), f([-1, -1, 1, 1])), 1);
  assert.equal(rocAuc(f([-2, -1, 0.5, 3]), f([1, 1, -1, -1])), 0);
  assert.equal(rocAuc(f([0.3, 0.3, 0.3, 0.3, 0.3]), f([1, -1, -1, 1, 1])), 0.5);
  assert.ok(Number.isNaN(rocAuc(f([0.1, 0.2, 0.3]), f([1, 1, 1]))));
  assert.ok(Number.isNaN(rocAuc(f([0.1, 0.2, 0.3]), f([-1, -1, -1]))));
});

test('rocAuc: agrees with the pairwise count on random data with many ties', () => {
  let seed = 12345;
  const rand = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 2 ** 32;
  };
  for (let trial = 0; trial < 50; trial++) {
    const n = 2 + Math.floor(rand() * 60);
    const scores = Array.from({ length: n }, () => Math.floor(rand() * 7) / 2 - 1.5); // few distinct values
    const y = Array.from({ length: n }, () => (rand() < 0.4 ? 1 : -1));
    if (!y.includes(1) || !y.includes(-1)) continue;
    const expected = pairAuc(scores, y);
    const got = rocAuc(f(scores), f(y));
    assert.ok(Math.abs(got - expected) < 1e-12, `trial ${trial}: ${got} vs ${expected}`);
  }
});

test('accuracy: score exactly 0 predicts -1', () => {
  // predictions: -1 (0), +1, -1, -1 (0)  vs labels -1, +1, +1, +1 -> 2 of 4 right
  assert.equal(accuracy(f([0, 2, -1, 0]), f([-1, 1, 1, 1])), 0.5);
  assert.equal(accuracy(f([0]), f([-1])), 1);
  assert.equal(accuracy(f([0]), f([1])), 0);
  assert.equal(accuracy(f([-0]), f([-1])), 1);
  assert.equal(accuracy(f([1e-300, -1e-300]), f([1, -1])), 1);
});

test('logLoss: matches log(1 + exp(-y s)) and does not overflow', () => {
  const scores = [0, 0.5, -1.25, 3, -7, 20];
  const y = [1, -1, -1, 1, 1, -1];
  const direct = scores.reduce((acc, s, i) => acc + Math.log(1 + Math.exp(-y[i] * s)), 0) / y.length;
  const got = logLoss(f(scores), f(y));
  assert.ok(Math.abs(got - direct) < 1e-14 * Math.max(1, direct), `${got} vs ${direct}`);
  // log 2 at score 0
  assert.ok(Math.abs(logLoss(f([0]), f([1])) - Math.LN2) < 1e-16);
  // Large margins: log(1 + e^800) = 800 + log1p(e^-800) = 800 in double precision; log(1 + e^-800) = e^-800 = 0.
  assert.equal(logLoss(f([800]), f([-1])), 800);
  assert.equal(logLoss(f([-800]), f([1])), 800);
  assert.equal(logLoss(f([800]), f([1])), 0);
  assert.equal(logLoss(f([-1000, 1000]), f([-1, -1])), 500);
  // e^-40 ~ 4.248e-18: log1p keeps it where log(1 + x) would round to 0.
  const tiny = logLoss(f([40]), f([1]));
  assert.ok(Math.abs(tiny - Math.exp(-40)) < 1e-30, `${tiny}`);
});

test('classificationMetrics bundles the three metrics', () => {
  const s = f([0.1, 0.4, 0.35, 0.8, 0.4]);
  const y = f([-1, -1, 1, 1, 1]);
  const m = classificationMetrics(s, y);
  assert.ok(Math.abs(m.auc - 0.75) < 1e-15);
  assert.equal(m.accuracy, 0.6); // all scores > 0 -> all predict +1, 3 of 5 positives
  const direct = [0.1, 0.4, 0.35, 0.8, 0.4].reduce((a, v, i) => a + Math.log(1 + Math.exp(-[-1, -1, 1, 1, 1][i] * v)), 0) / 5;
  assert.ok(Math.abs(m.logLoss - direct) < 1e-15);
});
