import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CholeskyDecomposition, Matrix } from 'ml-matrix';
import {
  choleskyInPlace,
  choleskySolveInPlace,
  csrFromDense,
  csrToDense,
  denseGramRows,
  denseMatTVec,
  denseMatVec,
  denseOuterGramRows,
  preferDense,
  unpackSymmetric,
} from '../index.js';
import { packLower, seeded } from './support.js';

const close = (a: number, b: number, tol: number, what: string) => assert.ok(Math.abs(a - b) <= tol * (1 + Math.abs(b)), `${what}: ${a} vs ${b}`);

/** rows x cols with entries in [-1, 1), `zeros` of them zero. */
function random(rand: () => number, rows: number, cols: number, zeros = 0): number[][] {
  return Array.from({ length: rows }, () => Array.from({ length: cols }, () => (rand() < zeros ? 0 : 2 * rand() - 1)));
}

test('csrToDense, products and both Gram matrices agree with ml-matrix on shapes that do not fill whole blocks', () => {
  const rand = seeded(11);
  // Sizes around the kernels' block edges: 4 x 2 blocks of columns, 128-row panels, 2 x 2 row pairs.
  for (const [n, d] of [[1, 1], [3, 5], [129, 7], [257, 130], [6, 1], [200, 3]]) {
    const rows = random(rand, n, d, 0.2);
    const A = csrToDense(csrFromDense(rows, d));
    const M = new Matrix(rows);
    assert.deepEqual(Array.from(A.data), rows.flat());
    const x = Float64Array.from({ length: d }, () => rand() - 0.5);
    const w = Float64Array.from({ length: n }, () => rand() - 0.5);
    const ax = denseMatVec(new Float64Array(n), A, x);
    const atw = denseMatTVec(new Float64Array(d), A, w);
    const refAx = M.mmul(Matrix.columnVector(Array.from(x))).getColumn(0);
    const refAtw = M.transpose().mmul(Matrix.columnVector(Array.from(w))).getColumn(0);
    for (let i = 0; i < n; i++) close(ax[i], refAx[i], 1e-12, `(A x)[${i}] at ${n} x ${d}`);
    for (let j = 0; j < d; j++) close(atw[j], refAtw[j], 1e-12, `(A^T w)[${j}] at ${n} x ${d}`);
    // Both Gram matrices formed in two ranges of rows (the second from an even row), packed.
    const split = Math.floor(n / 4) * 2;
    const gp = new Float64Array((d * (d + 1)) / 2);
    denseGramRows(A, gp, 0, split);
    denseGramRows(A, gp, split, n);
    const g = unpackSymmetric(gp, d);
    const refG = M.transpose().mmul(M);
    for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) close(g[i * d + j], refG.get(i, j), 1e-12, `G[${i}][${j}] at ${n} x ${d}`);
    const kp = new Float64Array((n * (n + 1)) / 2);
    denseOuterGramRows(A, kp, 0, split);
    denseOuterGramRows(A, kp, split, n);
    const k = unpackSymmetric(kp, n);
    const refK = M.mmul(M.transpose());
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) close(k[i * n + j], refK.get(i, j), 1e-12, `K[${i}][${j}] at ${n} x ${d}`);
  }
});

test('preferDense: at least half the entries non-zero', () => {
  assert.equal(preferDense(csrFromDense([[1, 0], [0, 0]])), false);
  assert.equal(preferDense(csrFromDense([[1, 0], [0, 1]])), true);
  assert.equal(preferDense(csrFromDense([[1, 1, 1], [0, 0, 0]])), true);
});

test('choleskyInPlace gives ml-matrix\'s factor (packed), and choleskySolveInPlace solves the system', () => {
  const rand = seeded(12);
  for (const n of [1, 2, 5, 33, 150]) {
    const B = new Matrix(random(rand, n + 3, n));
    const S = B.transpose().mmul(B);
    for (let i = 0; i < n; i++) S.set(i, i, S.get(i, i) + 0.1);
    const a = packLower(Float64Array.from(S.to1DArray()), n);
    assert.equal(a.length, (n * (n + 1)) / 2);
    assert.ok(choleskyInPlace(a, n));
    const L = new CholeskyDecomposition(S).lowerTriangularMatrix;
    for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) close(a[(i * (i + 1)) / 2 + j], L.get(i, j), 1e-10, `L[${i}][${j}] at n = ${n}`);
    const b = Float64Array.from({ length: n }, () => rand() - 0.5);
    const x = b.slice();
    choleskySolveInPlace(a, n, x);
    const back = S.mmul(Matrix.columnVector(Array.from(x))).getColumn(0);
    for (let i = 0; i < n; i++) close(back[i], b[i], 1e-9, `(S x)[${i}] at n = ${n}`);
  }
});

test('unpackSymmetric: the lower triangle by rows back to the symmetric square', () => {
  const p = Float64Array.from([1, 2, 3, 4, 5, 6]);
  assert.deepEqual(Array.from(unpackSymmetric(p, 3)), [1, 2, 4, 2, 3, 5, 4, 5, 6]);
  assert.throws(() => unpackSymmetric(p, 4), /length 6, expected 10/);
});

test('choleskyInPlace refuses a matrix that is not positive definite', () => {
  assert.equal(choleskyInPlace(Float64Array.from([1, 2, 1]), 2), false);
  assert.equal(choleskyInPlace(Float64Array.from([0, 0, 1]), 2), false);
  assert.throws(() => choleskyInPlace(Float64Array.from([1, 2, 2, 1]), 2), /length 4, expected 3/);
  assert.equal(choleskyInPlace(Float64Array.from([Number.NaN]), 1), false);
});
