// The x-update tests' helpers: random blocks and an independent dense reference solution of
// the ridge problem (normal equations, primal and dual), to check RidgeXUpdate's forms against.
import assert from 'node:assert/strict';
import { Matrix, solve } from 'ml-matrix';
import { gaussian } from '@admm-share/core/test-support';
import type { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
// ---------------------------------------------------------------------------------------
// Helpers: seeded PRNG, random data, and the independent dense reference solution.
// ---------------------------------------------------------------------------------------

/** A dense n x d array with roughly `density` of the entries non-zero. */
export function randomDense(rand: () => number, n: number, d: number, density: number): number[][] {
  const g = gaussian(rand);
  return Array.from({ length: n }, () =>
    Array.from({ length: d }, () => (rand() < density ? Math.round(g() * 1000) / 250 + 0.5 : 0)),
  );
}

export interface Reference {
  x: Float64Array;
  intercept: number;
  share: Float64Array;
}

/**
 * argmin_x lambda/2 ||x||^2 + rho/2 ||D x + b 1 - w||^2 (b only with `intercept`) from the
 * dense normal equations (P + rho A^T A) theta = rho A^T w, A = [D | 1], P = diag(lambda, .., 0).
 */
export function referencePrimal(dense: number[][], w: Float64Array, lambda: number, rho: number, intercept: boolean): Reference {
  const d = dense[0].length;
  const A = new Matrix(intercept ? dense.map((r) => [...r, 1]) : dense.map((r) => [...r]));
  const p = A.columns;
  const lhs = A.transpose().mmul(A).mul(rho);
  for (let j = 0; j < d; j++) lhs.set(j, j, lhs.get(j, j) + lambda);
  const rhs = A.transpose().mmul(Matrix.columnVector(Array.from(w))).mul(rho);
  const theta = solve(lhs, rhs).getColumn(0);
  assert.equal(theta.length, p);
  return withShare(dense, Float64Array.from(theta.slice(0, d)), intercept ? theta[d] : 0);
}

/**
 * The same minimiser from the N x N representer form, better conditioned when d > N and
 * lambda is small (the d x d system above then has a huge null-space/row-space gap):
 * x = D^T alpha with, from the optimality conditions lambda x = -rho D^T r and 1^T r = 0,
 *   [lambda I + rho D D^T, rho 1; 1^T, 0] [alpha; b] = [rho w; 0]   (b and its row only with an intercept).
 */
export function referenceDual(dense: number[][], w: Float64Array, lambda: number, rho: number, intercept: boolean): Reference {
  const n = dense.length;
  const d = dense[0].length;
  const Dm = new Matrix(dense.map((r) => [...r]));
  const p = intercept ? n + 1 : n;
  const lhs = Matrix.zeros(p, p);
  lhs.setSubMatrix(Dm.mmul(Dm.transpose()).mul(rho), 0, 0);
  for (let i = 0; i < n; i++) lhs.set(i, i, lhs.get(i, i) + lambda);
  const rhs = Matrix.zeros(p, 1);
  for (let i = 0; i < n; i++) rhs.set(i, 0, rho * w[i]);
  if (intercept) {
    for (let i = 0; i < n; i++) {
      lhs.set(i, n, rho);
      lhs.set(n, i, 1);
    }
  }
  const sol = solve(lhs, rhs).getColumn(0);
  const alpha = Matrix.columnVector(sol.slice(0, n));
  const x = Float64Array.from(Dm.transpose().mmul(alpha).getColumn(0));
  assert.equal(x.length, d);
  return withShare(dense, x, intercept ? sol[n] : 0);
}

export function reference(dense: number[][], w: Float64Array, lambda: number, rho: number, intercept: boolean): Reference {
  return dense[0].length > dense.length && lambda > 0
    ? referenceDual(dense, w, lambda, rho, intercept)
    : referencePrimal(dense, w, lambda, rho, intercept);
}

export function withShare(dense: number[][], x: Float64Array, b: number): Reference {
  const n = dense.length;
  const d = x.length;
  const share = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let acc = b;
    for (let j = 0; j < d; j++) acc += dense[i][j] * x[j];
    share[i] = acc;
  }
  return { x, intercept: b, share };
}

export function maxAbs(v: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < v.length; i++) m = Math.max(m, Math.abs(v[i]));
  return m;
}

/** max_i |a_i - e_i| <= rel * max(scale, max_i |e_i|) */
export function assertCloseVec(actual: ArrayLike<number>, expected: ArrayLike<number>, rel: number, what: string, scale = 0): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  let err = 0;
  for (let i = 0; i < expected.length; i++) err = Math.max(err, Math.abs(actual[i] - expected[i]));
  const tol = rel * Math.max(scale, maxAbs(expected), Number.MIN_VALUE);
  assert.ok(err <= tol, `${what}: max abs error ${err.toExponential(3)} > ${tol.toExponential(3)}`);
}

export function assertCloseScalar(actual: number, expected: number, rel: number, what: string, scale = 0): void {
  assertCloseVec([actual], [expected], rel, what, scale);
}

export function checkAgainstReference(u: RidgeXUpdate, ref: Reference, what: string): void {
  assertCloseVec(u.x, ref.x, 1e-9, `${what}: x`);
  // The intercept can be close to 0: compare it on the scale of the share it is part of.
  assertCloseScalar(u.intercept, ref.intercept, 1e-9, `${what}: intercept`, maxAbs(ref.share));
  assertCloseVec(u.share, ref.share, 1e-9, `${what}: share`);
}

