// The active side's post-processing of a one-shot release (docs/privacy.md, section 9):
// denoiseRelease (regression calibration: keep the residual's signal share) and csrWithColumns
// (the design matrix [X, c_1, ..., c_k]). Expected values are computed by hand or by an
// independent computation written out here, never by calling the function under test again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Csr, csrFromDense, csrWithColumns, denoiseRelease } from '../index.js';
import { randomVector, seeded } from './support.js';

function close(a: number, b: number, tol: number, what: string): void {
  assert.ok(Math.abs(a - b) <= tol, `${what}: ${a}, expected ${b}`);
}

function closeArrays(a: ArrayLike<number>, b: ArrayLike<number>, tol: number, what: string): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) close(a[i], b[i], tol, `${what}[${i}]`);
}

test('denoiseRelease against values computed by hand', () => {
  // r = 1..5 and fitted = its mean 3 (df = 1, no features): residuals -2, -1, 0, 1, 2, so
  // rss = 10 and rss / (n - df) = 10 / 4 = 2.5 = tau^2 + sigma^2.
  const r = Float64Array.of(1, 2, 3, 4, 5);
  const fitted = new Float64Array(5).fill(3);
  // sigma = 1: tau^2 = 1.5, shrink = 1.5 / 2.5 = 0.6, column = 3 + 0.6 (r - 3) = 1.8, 2.4, 3, 3.6, 4.2.
  let d = denoiseRelease(r, fitted, 1, 1);
  close(d.signalVariance, 1.5, 1e-15, 'tau^2 at sigma 1');
  close(d.shrink, 0.6, 1e-15, 'shrink at sigma 1');
  closeArrays(d.column, [1.8, 2.4, 3, 3.6, 4.2], 1e-15, 'column at sigma 1');
  // sigma = 0.5: tau^2 = 2.25, shrink = 2.25 / 2.5 = 0.9, column = 1.2, 2.1, 3, 3.9, 4.8.
  d = denoiseRelease(r, fitted, 1, 0.5);
  close(d.signalVariance, 2.25, 1e-15, 'tau^2 at sigma 0.5');
  close(d.shrink, 0.9, 1e-15, 'shrink at sigma 0.5');
  closeArrays(d.column, [1.2, 2.1, 3, 3.9, 4.8], 1e-15, 'column at sigma 0.5');
  // sigma^2 = 2.5 exactly: no signal left, the column is the fitted values.
  d = denoiseRelease(r, fitted, 1, Math.sqrt(2.5));
  assert.ok(d.signalVariance <= 1e-15 && d.shrink <= 1e-15, `tau^2 ${d.signalVariance}, shrink ${d.shrink} at sigma^2 = 2.5`);
  // A fitted vector with more degrees of freedom: fitted = -1, 3, 3, 3, 7 leaves residuals
  // 2, -1, 0, 1, -2 (rss = 10), df = 3 leaves n - df = 2, so rss / 2 = 5, and sigma = 2 gives
  // tau^2 = 1, shrink = 1 / 5 = 0.2; column = fitted + 0.2 (r - fitted) = -0.6, 2.8, 3, 3.2, 6.6.
  d = denoiseRelease(r, Float64Array.of(-1, 3, 3, 3, 7), 3, 2);
  close(d.signalVariance, 1, 1e-15, 'tau^2 with df 3');
  close(d.shrink, 0.2, 1e-15, 'shrink with df 3');
  closeArrays(d.column, [-0.6, 2.8, 3, 3.2, 6.6], 1e-14, 'column with df 3');
});

test('denoiseRelease: the shrink is 0 when the residual variance is below sigma^2', () => {
  const rand = seeded('denoise-zero');
  for (let k = 0; k < 20; k++) {
    const n = 10 + Math.floor(rand() * 200);
    const fitted = randomVector(rand, n, 3, 1);
    // Residuals of standard deviation about 1, noise sigma from 1.5 to 10.
    const r = Float64Array.from(fitted, (v) => v + 2 * rand() - 1);
    const sigma = 1.5 + 8.5 * rand();
    const d = denoiseRelease(r, fitted, 1 + Math.floor(rand() * 5), sigma);
    assert.equal(d.shrink, 0, `sigma ${sigma}: shrink ${d.shrink}`);
    assert.equal(d.signalVariance, 0);
    assert.deepEqual(Array.from(d.column), Array.from(fitted), 'with nothing to keep the column is the fitted values');
  }
});

test('denoiseRelease against an independent computation, and the shrink tends to 1 as sigma -> 0', () => {
  const rand = seeded('denoise-independent');
  for (let k = 0; k < 10; k++) {
    const n = 20 + Math.floor(rand() * 300);
    const df = 1 + rand() * 10;
    const fitted = randomVector(rand, n, 2);
    const r = Float64Array.from(fitted, (v) => v + 3 * (rand() - 0.5));
    // Written out independently: the residual variance as E[e^2] with the degrees-of-freedom
    // correction n / (n - df), the signal variance as its excess over sigma^2 (floored at 0).
    let meanSq = 0;
    for (let i = 0; i < n; i++) meanSq += ((r[i] - fitted[i]) ** 2 - meanSq) / (i + 1);
    const residualVariance = (meanSq * n) / (n - df);
    let previous = -1;
    for (const sigma of [2, 1, 0.5, 0.3, 0.1, 1e-2, 1e-4, 1e-8]) {
      const tau2 = Math.max(0, residualVariance - sigma * sigma);
      const shrink = tau2 / residualVariance; // tau^2 / (tau^2 + sigma^2) when tau^2 > 0
      const d = denoiseRelease(r, fitted, df, sigma);
      close(d.signalVariance, tau2, 1e-12 * residualVariance, `n ${n} sigma ${sigma}: tau^2`);
      close(d.shrink, tau2 > 0 ? shrink : 0, 1e-12, `n ${n} sigma ${sigma}: shrink`);
      for (let i = 0; i < n; i++) {
        // column = fitted + shrink (r - fitted), i.e. (1 - shrink) fitted + shrink r.
        close(d.column[i], (1 - d.shrink) * fitted[i] + d.shrink * r[i], 1e-12 * (1 + Math.abs(r[i]) + Math.abs(fitted[i])), `column[${i}]`);
      }
      assert.ok(d.shrink >= previous, `the shrink grows as sigma falls: ${d.shrink} after ${previous}`);
      previous = d.shrink;
      // 1 - shrink = sigma^2 / (tau^2 + sigma^2) = sigma^2 / residual variance.
      if (tau2 > 0) close(1 - d.shrink, (sigma * sigma) / residualVariance, 1e-12, `1 - shrink at sigma ${sigma}`);
    }
    assert.ok(1 - previous <= 1e-15, `at sigma 1e-8 the shrink is ${previous}, not 1`);
    // So the column tends to the release itself.
    closeArrays(denoiseRelease(r, fitted, df, 1e-8).column, r, 1e-12, 'the column at sigma 1e-8');
  }
});

test('denoiseRelease with the labels: their covariance when the variance estimate is within its error, the variance otherwise', () => {
  const rand = seeded('denoise-target');
  const n = 2000;
  const t = Float64Array.from({ length: n }, () => (rand() < 0.3 ? 0.7 : -0.3));
  const fitted = new Float64Array(n);
  for (const [beta, sigma] of [
    [0.2, 3],
    [1, 0.3],
  ]) {
    // The release's signal is a fit of the labels, beta t; the noise is independent of them.
    const r = Float64Array.from(t, (x) => beta * x + sigma * (rand() + rand() + rand() - 1.5) * 2);
    let rss = 0;
    let cov = 0;
    for (let i = 0; i < n; i++) {
      rss += r[i] ** 2;
      cov += r[i] * t[i];
    }
    const byVariance = rss / (n - 1) - sigma * sigma;
    const weak = byVariance < 2 * sigma * sigma * Math.sqrt(2 / (n - 1));
    assert.equal(weak, beta === 0.2, `the weak signal is the one within the variance estimate's error (${byVariance})`);
    const d = denoiseRelease(r, fitted, 1, sigma, t);
    const expected = weak ? Math.max(0, cov / (n - 1)) : byVariance;
    assert.ok(Math.abs(d.signalVariance - expected) <= 1e-12, `${d.signalVariance} vs ${expected}`);
    assert.equal(denoiseRelease(r, fitted, 1, sigma).signalVariance, Math.max(0, byVariance));
    // The weak signal's variance, beta^2 var(t) = 0.0084, is found within the covariance's error
    // (about sigma std(t) / sqrt(n) = 0.031), where the variance estimate's error is 0.28.
    if (weak) assert.ok(Math.abs(d.signalVariance - beta ** 2 * 0.21) < 0.1, `${d.signalVariance}`);
  }
});

test('denoiseRelease refuses inconsistent input', () => {
  const r = Float64Array.of(1, 2, 3);
  assert.throws(() => denoiseRelease(r, Float64Array.of(1, 2), 1, 1), /fitted/);
  assert.throws(() => denoiseRelease(r, r, 3, 1), RangeError, 'as many degrees of freedom as rows');
  assert.throws(() => denoiseRelease(r, r, NaN, 1), RangeError);
});

/** A CSR matrix as dense rows, read entry by entry. */
function toDense(a: Csr): number[][] {
  const out = Array.from({ length: a.rows }, () => new Array<number>(a.cols).fill(0));
  for (let i = 0; i < a.rows; i++) {
    for (let p = a.indptr[i]; p < a.indptr[i + 1]; p++) {
      assert.ok(a.indices[p] >= 0 && a.indices[p] < a.cols, `row ${i}: column ${a.indices[p]} out of range`);
      if (p > a.indptr[i]) assert.ok(a.indices[p] > a.indices[p - 1], `row ${i}: columns not increasing`);
      out[i][a.indices[p]] += a.values[p];
    }
  }
  return out;
}

test('csrWithColumns equals [X, c_1, ..., c_k] built densely', () => {
  const rand = seeded('csr-with-columns');
  for (let k = 0; k < 20; k++) {
    const n = 1 + Math.floor(rand() * 30);
    const d = Math.floor(rand() * 6);
    // Sparse rows, some of them empty.
    const dense = Array.from({ length: n }, () => Array.from({ length: d }, () => (rand() < 0.6 ? 0 : 2 * rand() - 1)));
    const X = csrFromDense(dense, d);
    const before = { indptr: X.indptr.slice(), indices: X.indices.slice(), values: X.values.slice() };
    const cols = Array.from({ length: Math.floor(rand() * 4) }, () => randomVector(rand, n));
    const A = csrWithColumns(X, n, cols);
    assert.equal(A.rows, n);
    assert.equal(A.cols, d + cols.length);
    assert.equal(A.indptr.length, n + 1);
    const want = dense.map((row, i) => row.concat(cols.map((c) => c[i])));
    assert.deepEqual(toDense(A), want);
    assert.deepEqual({ indptr: X.indptr, indices: X.indices, values: X.values }, before, 'X untouched');
    // Without X: just the columns.
    if (cols.length > 0) {
      const B = csrWithColumns(undefined, n, cols);
      assert.equal(B.cols, cols.length);
      assert.deepEqual(
        toDense(B),
        dense.map((_, i) => cols.map((c) => c[i])),
      );
    }
  }
});

test('csrWithColumns refuses columns or X of the wrong length', () => {
  const X = csrFromDense([[1], [2], [3]], 1);
  assert.throws(() => csrWithColumns(X, 4, []), RangeError);
  assert.throws(() => csrWithColumns(X, 3, [Float64Array.of(1, 2)]), /column 0/);
  assert.throws(() => csrWithColumns(undefined, 2, [Float64Array.of(1, 2), Float64Array.of(1, 2, 3)]), /column 1/);
});
