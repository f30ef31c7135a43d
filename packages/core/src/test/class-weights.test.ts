// Class weights (--class-weight): the flag's syntax and the weights it resolves to, the weighted
// logistic loss and its prox against written-out formulas and a bisection, and the weighted
// central fit against the unweighted fit of the data with the positive rows repeated.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ConfigError,
  classWeighted,
  csrFromDense,
  fitCentral,
  flipCorrectedLogistic,
  logistic,
  parseClassWeight,
  prox,
  resolveClassWeights,
  squared,
  trainingLoss,
} from '../index.js';
import { seeded } from './support.js';

/** log(1 + e^-m), written out. */
const softplusNeg = (m: number) => (m > 0 ? Math.log1p(Math.exp(-m)) : -m + Math.log1p(Math.exp(m)));

/**
 * argmin_t w (log(1 + e^(-y t)) - c y t) + kappa/2 (t - a)^2 by bisection on its derivative
 * -w y (sigma(-y t) + c) + kappa (t - a), which increases in t; the root is within
 * w (1 + c) / kappa of a.
 */
function bisectProx(y: number, a: number, kappa: number, w: number, c: number): number {
  const g = (t: number) => -w * y * (1 / (1 + Math.exp(y * t)) + c) + kappa * (t - a);
  let lo = a - (w * (1 + c)) / kappa - 1;
  let hi = a + (w * (1 + c)) / kappa + 1;
  for (let it = 0; it < 400 && hi - lo > 0; it++) {
    const mid = (lo + hi) / 2;
    if (mid === lo || mid === hi) break;
    if (g(mid) > 0) hi = mid;
    else lo = mid;
  }
  return (lo + hi) / 2;
}

test('parseClassWeight: balanced, or LABEL=W by raw label value; malformed lists, non-positive weights and repeated labels are ConfigErrors naming the flag', () => {
  assert.deepEqual(parseClassWeight('balanced'), { kind: 'balanced' });
  assert.deepEqual(parseClassWeight('no=1,yes=5'), { kind: 'explicit', weights: [{ label: 'no', weight: 1 }, { label: 'yes', weight: 5 }] });
  assert.deepEqual(parseClassWeight('-1=0.5, +1=2.5e0'), { kind: 'explicit', weights: [{ label: '-1', weight: 0.5 }, { label: '+1', weight: 2.5 }] });
  for (const [bad, why] of [
    ['yes', /'yes' is not LABEL=WEIGHT/],
    ['yes=', /'yes=' is not LABEL=WEIGHT/],
    ['=3', /'=3' is not LABEL=WEIGHT/],
    ['no=1,,yes=2', /'' is not LABEL=WEIGHT/],
    ['yes=0', /the weight of 'yes' is '0', not a positive number/],
    ['yes=-2', /the weight of 'yes' is '-2', not a positive number/],
    ['yes=abc', /the weight of 'yes' is 'abc', not a positive number/],
    ['yes=Infinity', /not a positive number/],
    ['yes=1e999', /not a positive number/],
    ['1=2,1.0=3', /label '1\.0' is given twice/],
  ] as const) assert.throws(() => parseClassWeight(bad), (e: unknown) => e instanceof ConfigError && /^--class-weight/.test(e.message) && why.test(e.message), bad);
});

test('resolveClassWeights: balanced is N / (2 N_c) on the rows given; explicit weights by raw value (numbers by value), a class not named keeps 1, an unknown label is a ConfigError', () => {
  // 3 positives among 10 rows: scikit-learn's balanced weights 10/(2*7) and 10/(2*3).
  const y = Float64Array.from([1, -1, -1, 1, -1, -1, -1, 1, -1, -1]);
  const classes = { negative: 'no', positive: 'yes' };
  const b = resolveClassWeights({ kind: 'balanced' }, y, classes);
  assert.equal(b.negative, 10 / 14);
  assert.equal(b.positive, 10 / 6);
  // Balanced weights make each class weigh N/2 in total.
  assert.ok(Math.abs(7 * b.negative - 5) < 1e-12 && Math.abs(3 * b.positive - 5) < 1e-12);
  assert.deepEqual(resolveClassWeights(parseClassWeight('yes=5'), y, classes), { negative: 1, positive: 5 });
  assert.deepEqual(resolveClassWeights(parseClassWeight('yes=4,no=0.5'), y, classes), { negative: 0.5, positive: 4 });
  assert.deepEqual(resolveClassWeights(parseClassWeight('+1=9'), y, { negative: '0', positive: '1' }), { negative: 1, positive: 9 });
  assert.deepEqual(resolveClassWeights(parseClassWeight('0.0=2'), y, { negative: '0', positive: '1' }), { negative: 2, positive: 1 });
  assert.throws(() => resolveClassWeights(parseClassWeight('maybe=3'), y, classes), (e: unknown) => e instanceof ConfigError && /label 'maybe' is not a class of the labels \(they are 'no' and 'yes'\)/.test(e.message));
  assert.throws(() => resolveClassWeights({ kind: 'balanced' }, new Float64Array(4).fill(-1), classes), (e: unknown) => e instanceof ConfigError && /one class only \('no'\)/.test(e.message));
});

test('classWeighted: value, deriv and deriv2 are w_y times the loss (flip-corrected too); weights 1 and 1 are the loss itself; squared loss and bad weights are refused', () => {
  const w = { negative: 0.6, positive: 3 };
  const p = 0.2;
  const c = p / (1 - 2 * p);
  const weighted = classWeighted(flipCorrectedLogistic(p), w);
  assert.deepEqual(weighted.classWeights, w);
  assert.equal(weighted.labelFlip, p);
  for (const y of [-1, 1])
    for (const t of [-30, -2.5, 0, 0.7, 12]) {
      const wy = y > 0 ? w.positive : w.negative;
      const s = 1 / (1 + Math.exp(y * t));
      assert.ok(Math.abs(weighted.value(y, t) - wy * (softplusNeg(y * t) - c * y * t)) < 1e-12 * Math.max(1, Math.abs(wy * t)), `value(${y}, ${t})`);
      assert.ok(Math.abs(weighted.deriv(y, t) - -wy * y * (s + c)) < 1e-13, `deriv(${y}, ${t})`);
      assert.ok(Math.abs(weighted.deriv2(y, t) - wy * s * (1 - s)) < 1e-13, `deriv2(${y}, ${t})`);
    }
  assert.equal(classWeighted(logistic, { negative: 1, positive: 1 }), logistic);
  assert.equal(trainingLoss('logistic', 0, { negative: 1, positive: 1 }), logistic);
  assert.throws(() => classWeighted(squared, w), /class weights need the logistic loss/);
  assert.throws(() => trainingLoss('squared', 0, w), /class weights need the logistic loss/);
  for (const bad of [0, -1, NaN, Infinity]) assert.throws(() => classWeighted(logistic, { negative: 1, positive: bad }), /positive and finite/);
});

test('the weighted prox is the bisection of the per-sample problem w_y weight l(y, t) + kappa/2 (t - a)^2, plain and flip-corrected, at both classes and far margins', () => {
  const rand = seeded('class-weight-prox');
  const w = { negative: 0.55, positive: 7.5 };
  for (const p of [0, 0.25]) {
    const c = p / (1 - 2 * p);
    const loss = classWeighted(p === 0 ? logistic : flipCorrectedLogistic(p), w);
    for (let k = 0; k < 300; k++) {
      const y = rand() < 0.5 ? -1 : 1;
      const a = k % 10 === 0 ? 400 * (rand() - 0.5) : 8 * (rand() - 0.5);
      const kappa = Math.exp(8 * (rand() - 0.5));
      const weight = k % 3 === 0 ? 1 : 1 / 1000;
      const wy = y > 0 ? w.positive : w.negative;
      const t = prox(loss, y, a, kappa, weight, k % 4 === 0 ? -a : a);
      const ref = bisectProx(y, a, kappa, wy * weight, c);
      assert.ok(Math.abs(t - ref) <= 1e-10 * Math.max(1, Math.abs(ref)), `p ${p}, y ${y}, a ${a}, kappa ${kappa}, weight ${weight}: ${t} vs bisection ${ref}`);
      // The class weight matters: the unweighted prox is elsewhere (unless the weight is ~1).
      const plain = bisectProx(y, a, kappa, weight, c);
      if (Math.abs(ref - plain) > 1e-6) assert.ok(Math.abs(t - plain) > 1e-7, 'weighted prox differs from the unweighted one');
    }
  }
});

test('the weighted central fit is the unweighted fit of the data with each positive row repeated w times (lambda scaled to match), an independent construction', () => {
  const rand = seeded('class-weight-central');
  const n = 120;
  const d = 4;
  const rows: number[][] = [];
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = Array.from({ length: d }, () => 2 * rand() - 1);
    rows.push(x);
    // About 15% positives.
    y[i] = x[0] + 0.5 * x[1] + 0.8 * (rand() - 0.5) > 0.9 ? 1 : -1;
  }
  const pos = y.reduce((a, v) => a + (v > 0 ? 1 : 0), 0);
  assert.ok(pos > 5 && pos < n / 3, `positives: ${pos}`);
  const repeat = 4;
  const lambda = 1e-2;
  const weighted = fitCentral(csrFromDense(rows, d), y, classWeighted(logistic, { negative: 1, positive: repeat }), lambda, { intercept: true });
  const dupRows: number[][] = [];
  const dupY: number[] = [];
  rows.forEach((x, i) => {
    for (let r = 0; r < (y[i] > 0 ? repeat : 1); r++) {
      dupRows.push(x);
      dupY.push(y[i]);
    }
  });
  const nDup = dupY.length;
  // (1/N) sum w_i l_i + lambda/2 |x|^2 = (N'/N) [(1/N') sum over the repeated rows + (lambda N / N')/2 |x|^2].
  const dup = fitCentral(csrFromDense(dupRows, d), Float64Array.from(dupY), logistic, (lambda * n) / nDup, { intercept: true });
  for (let j = 0; j < d; j++) assert.ok(Math.abs(weighted.x[j] - dup.x[j]) < 1e-8, `coefficient ${j}: ${weighted.x[j]} vs ${dup.x[j]}`);
  assert.ok(Math.abs(weighted.intercept - dup.intercept) < 1e-8, 'intercept');
  assert.ok(Math.abs(weighted.objective - (dup.objective * nDup) / n) < 1e-12, `objective ${weighted.objective} vs ${(dup.objective * nDup) / n}`);
  // And it is not the unweighted fit: the weights move the intercept towards the positives.
  const plain = fitCentral(csrFromDense(rows, d), y, logistic, lambda, { intercept: true });
  assert.ok(weighted.intercept > plain.intercept + 0.1, `weighted intercept ${weighted.intercept}, unweighted ${plain.intercept}`);
});
