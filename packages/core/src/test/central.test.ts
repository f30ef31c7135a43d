import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Matrix, solve } from 'ml-matrix';
import {
  type Csr,
  type LabelTable,
  binaryLabels,
  classificationMetrics,
  csrFromDense,
  csrSliceColumns,
  fitCentral,
  logistic,
  predictScores,
  readLibsvm,
  squared,
} from '../index.js';
import seedrandom from 'seedrandom';

/** A seeded generator of floats in [0, 1), so failures reproduce. */
const prng = (seed: number): (() => number) => seedrandom(String(seed));
function gaussian(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

type Name = 'logistic' | 'squared';
/** d/ds loss(y, s), written out here. */
function lossDeriv(name: Name, y: number, s: number): number {
  if (name === 'squared') return s - y;
  const m = y * s;
  // -y / (1 + e^m), evaluated without overflow
  return m >= 0 ? (-y * Math.exp(-m)) / (1 + Math.exp(-m)) : -y / (1 + Math.exp(m));
}
function lossValue(name: Name, y: number, s: number): number {
  if (name === 'squared') return 0.5 * (s - y) * (s - y);
  const m = y * s;
  return m > 0 ? Math.log1p(Math.exp(-m)) : -m + Math.log1p(Math.exp(m));
}

/** Dense scores, gradient and objective of (1/N) sum loss(y_i, a_i x + b) + lambda/2 |x|^2, from the dense rows. */
function denseCheck(rows: number[][], y: ArrayLike<number>, name: Name, lambda: number, x: ArrayLike<number>, b: number) {
  const n = rows.length;
  const d = rows[0].length;
  const g = new Array<number>(d).fill(0);
  let gb = 0;
  let f = 0;
  for (let i = 0; i < n; i++) {
    let s = b;
    for (let j = 0; j < d; j++) s += rows[i][j] * x[j];
    const l1 = lossDeriv(name, y[i], s) / n;
    f += lossValue(name, y[i], s) / n;
    for (let j = 0; j < d; j++) g[j] += l1 * rows[i][j];
    gb += l1;
  }
  for (let j = 0; j < d; j++) {
    g[j] += lambda * x[j];
    f += (lambda / 2) * x[j] * x[j];
  }
  return { g, gb, f };
}

/** Sparse gradient norm (with the intercept component when given), for the real data set. */
function sparseGradNorm(X: Csr, y: Float64Array, lambda: number, x: Float64Array): number {
  const g = new Float64Array(X.cols);
  const n = X.rows;
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) s += X.values[k] * x[X.indices[k]];
    const l1 = lossDeriv('logistic', y[i], s) / n;
    for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) g[X.indices[k]] += l1 * X.values[k];
  }
  let acc = 0;
  for (let j = 0; j < X.cols; j++) acc += (g[j] + lambda * x[j]) ** 2;
  return Math.sqrt(acc);
}

/** A small random dense problem with some exact zeros (so the CSR form is really sparse). */
function makeProblem(seed: number, n: number, d: number, name: Name) {
  const r = prng(seed);
  const rows = Array.from({ length: n }, () => Array.from({ length: d }, () => (r() < 0.25 ? 0 : gaussian(r) * (1 + r()))));
  const wTrue = Array.from({ length: d }, () => gaussian(r));
  const y = rows.map((row) => {
    const s = row.reduce((acc, v, j) => acc + v * wTrue[j], 0.7) + 0.8 * gaussian(r);
    return name === 'logistic' ? (s > 0 ? 1 : -1) : s;
  });
  return { rows, X: csrFromDense(rows), y: Float64Array.from(y) };
}

for (const name of ['logistic', 'squared'] as const) {
  for (const intercept of [false, true]) {
    test(`fitCentral ${name}${intercept ? ' with intercept' : ''}: gradient vanishes at the solution`, () => {
      for (const [seed, lambda] of [
        [1, 1e-2],
        [2, 1e-4],
        [3, 1],
      ] as const) {
        const { rows, X, y } = makeProblem(seed * 10 + (intercept ? 1 : 0), 80, 6, name);
        const res = fitCentral(X, y, name === 'logistic' ? logistic : squared, lambda, { intercept });
        assert.equal(res.x.length, 6);
        if (!intercept) assert.equal(res.intercept, 0);
        const { g, gb, f } = denseCheck(rows, y, name, lambda, res.x, res.intercept);
        const gnorm = Math.hypot(...g, intercept ? gb : 0);
        assert.ok(gnorm < 1e-8, `seed ${seed} lambda ${lambda}: |grad| = ${gnorm}`);
        assert.ok(Math.abs(res.objective - f) <= 1e-12 * Math.max(1, f), `objective ${res.objective} vs ${f}`);
        if (intercept) assert.notEqual(res.intercept, 0);
        assert.ok(res.iterations < 100);
      }
    });
  }
}

test('fitCentral squared: equals the closed-form ridge solution (ml-matrix), intercept unpenalised', () => {
  for (const intercept of [false, true]) {
    for (const lambda of [1e-3, 0.1, 5]) {
      const { rows, X, y } = makeProblem(intercept ? 99 : 98, 50, 5, 'squared');
      const A = new Matrix(intercept ? rows.map((r) => [...r, 1]) : rows);
      const n = A.rows;
      const d = A.columns;
      // (A^T A / n + lambda D) w = A^T y / n, D = I except 0 for the intercept.
      const lhs = A.transpose().mmul(A).div(n);
      for (let j = 0; j < d; j++) if (!(intercept && j === d - 1)) lhs.set(j, j, lhs.get(j, j) + lambda);
      const rhs = A.transpose().mmul(Matrix.columnVector(Array.from(y))).div(n);
      const w = solve(lhs, rhs).getColumn(0);
      const res = fitCentral(X, y, squared, lambda, { intercept });
      for (let j = 0; j < 5; j++)
        assert.ok(Math.abs(res.x[j] - w[j]) <= 1e-10 * Math.max(1, Math.abs(w[j])), `lambda ${lambda} x[${j}] ${res.x[j]} vs ${w[j]}`);
      if (intercept) assert.ok(Math.abs(res.intercept - w[5]) <= 1e-10 * Math.max(1, Math.abs(w[5])));
      // Without the intercept, a ridge fit of data with an offset is worse: check intercept is really used.
      if (intercept) {
        const noB = fitCentral(X, y, squared, lambda);
        assert.ok(res.objective < noB.objective);
      }
    }
  }
});

test('fitCentral with intercept on a constant-label shift: the intercept absorbs it unpenalised', () => {
  // Squared loss with every y_i = 3: x = 0, b = 3 makes every residual 0, so both the loss
  // gradient and lambda*x vanish there: it is the optimum for any lambda. A penalised b
  // (lambda = 1e6) would instead give b ~ 3/(1 + 1e6).
  const rows = [
    [1, 0],
    [0, 2],
    [-1, 1],
    [2, -1],
  ];
  const y = Float64Array.of(3, 3, 3, 3);
  const res = fitCentral(csrFromDense(rows), y, squared, 1e6, { intercept: true });
  assert.ok(Math.abs(res.intercept - 3) < 1e-12, `b = ${res.intercept}`);
  assert.ok(Math.abs(res.x[0]) < 1e-12 && Math.abs(res.x[1]) < 1e-12);
});

// ---------------------------------------------------------------------------------------
// a9a reference values (scikit-learn, computed outside this repo)
// ---------------------------------------------------------------------------------------

// The repository's copy (data/a9a/README.md has its origin and checksums).
const trainPath = fileURLToPath(new URL('../../../../data/a9a/a9a', import.meta.url));
const testPath = fileURLToPath(new URL('../../../../data/a9a/a9a.t', import.meta.url));

let cache: { Xtr: Csr; ytr: Float64Array; Xte: Csr; yte: Float64Array } | undefined;
function a9a() {
  if (cache) return cache;
  const load = (p: string) => {
    const t = readLibsvm(p, { features: 123 });
    const labels: LabelTable = { file: p, ids: t.ids, raw: t.firstTokens!, lines: t.lines };
    const b = binaryLabels(labels);
    assert.equal(b.positive, '+1');
    return { X: t.X, y: b.y };
  };
  const tr = load(trainPath);
  const te = load(testPath);
  assert.equal(tr.X.rows, 32561);
  assert.equal(te.X.rows, 16281);
  assert.equal(tr.X.cols, 123);
  assert.equal(te.X.cols, 123);
  cache = { Xtr: tr.X, ytr: tr.y, Xte: te.X, yte: te.y };
  return cache;
}

const relClose = (got: number, want: number, tol: number, what: string) =>
  assert.ok(Math.abs(got - want) <= tol * Math.abs(want), `${what}: ${got} vs reference ${want}`);
const absClose = (got: number, want: number, tol: number, what: string) =>
  assert.ok(Math.abs(got - want) <= tol, `${what}: ${got} vs reference ${want}`);

test('a9a, lambda 1e-4: objective, gradient and test metrics match scikit-learn', () => {
  const { Xtr, ytr, Xte, yte } = a9a();
  const res = fitCentral(Xtr, ytr, logistic, 1e-4);
  relClose(res.objective, 0.3245069247, 1e-9, 'f*');
  const gnorm = sparseGradNorm(Xtr, ytr, 1e-4, res.x);
  assert.ok(gnorm < 1e-8, `|grad| = ${gnorm}`);
  const m = classificationMetrics(predictScores(Xte, res.x), yte);
  absClose(m.logLoss, 0.3238, 5e-5, 'test log loss');
  absClose(m.accuracy, 0.8499, 5e-5, 'test accuracy');
  absClose(m.auc, 0.9024, 5e-5, 'test AUC');
});

test('a9a, lambda 1e-4, party 1 only (columns 0..65): test metrics match scikit-learn', () => {
  const { Xtr, ytr, Xte, yte } = a9a();
  const Xtr1 = csrSliceColumns(Xtr, 0, 66);
  const Xte1 = csrSliceColumns(Xte, 0, 66);
  assert.equal(Xtr1.cols, 66);
  const res = fitCentral(Xtr1, ytr, logistic, 1e-4);
  const m = classificationMetrics(predictScores(Xte1, res.x), yte);
  absClose(m.logLoss, 0.3494, 5e-5, 'party-1 test log loss');
  absClose(m.accuracy, 0.8375, 5e-5, 'party-1 test accuracy');
});

test('a9a, lambda 1e-3: objective matches scikit-learn', () => {
  const { Xtr, ytr } = a9a();
  const res = fitCentral(Xtr, ytr, logistic, 1e-3);
  relClose(res.objective, 0.3333407521, 1e-9, 'f*');
});

test('Newton-CG (many features) reaches the dense-Hessian optimum', () => {
  const rand = prng(99);
  const n = 120;
  const d = 40;
  const rows = Array.from({ length: n }, () => Array.from({ length: d }, () => (rand() < 0.8 ? 0 : rand() * 2 - 1)));
  const X = csrFromDense(rows, d);
  const y = Float64Array.from({ length: n }, () => (rand() < 0.4 ? 1 : -1));
  for (const intercept of [false, true]) {
    const dense = fitCentral(X, y, logistic, 1e-2, { intercept });
    const cg = fitCentral(X, y, logistic, 1e-2, { intercept, denseHessianLimit: 5 });
    assert.ok(Math.abs(cg.objective - dense.objective) <= 1e-12 * dense.objective, `${cg.objective} vs ${dense.objective}`);
    for (let j = 0; j < d; j++) assert.ok(Math.abs(cg.x[j] - dense.x[j]) < 1e-6);
    assert.ok(Math.abs(cg.intercept - dense.intercept) < 1e-6);
  }
});

test('gisetteLikeDataset: gisette shape, dense values in [-1, 1], seeded', async () => {
  const { gisetteLikeDataset } = await import('../index.js');
  const a = gisetteLikeDataset({ trainRows: 40, testRows: 10 });
  const b = gisetteLikeDataset({ trainRows: 40, testRows: 10 });
  assert.deepEqual(a.blocks, [2000, 2000, 1000]);
  assert.equal(a.train.X.cols, 5000);
  assert.equal(a.train.X.rows, 40);
  assert.equal(a.test.X.rows, 10);
  assert.ok(a.train.X.values.length > 0.99 * 40 * 5000, 'dense');
  assert.ok(a.train.X.values.every((v) => v >= -1 && v <= 1 && Math.round(v * 1000) === v * 1000));
  assert.deepEqual(a.train.X.values, b.train.X.values);
  assert.deepEqual(a.train.y, b.train.y);
  const pos = a.train.y.filter((v) => v > 0).length;
  assert.ok(pos > 5 && pos < 35, 'both classes');
});
