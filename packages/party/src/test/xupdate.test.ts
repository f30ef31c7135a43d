import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CholeskyDecomposition, Matrix, solve } from 'ml-matrix';
import { type Csr, WasmCsr, csrFromDense, sharedFloat64 } from '@admm-share/core';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { THREADS_MIN_ENTRIES, threadsFor } from '../xupdate/block-operator.js';
import { factorPieces } from '../xupdate/cholesky.js';
import { gaussian, randomVector, seeded } from '@admm-share/core/test-support';

// ---------------------------------------------------------------------------------------
// Helpers: seeded PRNG, random data, and the independent dense reference solution.
// ---------------------------------------------------------------------------------------

/** A dense n x d array with roughly `density` of the entries non-zero. */
function randomDense(rand: () => number, n: number, d: number, density: number): number[][] {
  const g = gaussian(rand);
  return Array.from({ length: n }, () =>
    Array.from({ length: d }, () => (rand() < density ? Math.round(g() * 1000) / 250 + 0.5 : 0)),
  );
}

interface Reference {
  x: Float64Array;
  intercept: number;
  share: Float64Array;
}

/**
 * argmin_x lambda/2 ||x||^2 + rho/2 ||D x + b 1 - w||^2 (b only with `intercept`) from the
 * dense normal equations (P + rho A^T A) theta = rho A^T w, A = [D | 1], P = diag(lambda, .., 0).
 */
function referencePrimal(dense: number[][], w: Float64Array, lambda: number, rho: number, intercept: boolean): Reference {
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
function referenceDual(dense: number[][], w: Float64Array, lambda: number, rho: number, intercept: boolean): Reference {
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

function reference(dense: number[][], w: Float64Array, lambda: number, rho: number, intercept: boolean): Reference {
  return dense[0].length > dense.length && lambda > 0
    ? referenceDual(dense, w, lambda, rho, intercept)
    : referencePrimal(dense, w, lambda, rho, intercept);
}

function withShare(dense: number[][], x: Float64Array, b: number): Reference {
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

function maxAbs(v: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < v.length; i++) m = Math.max(m, Math.abs(v[i]));
  return m;
}

/** max_i |a_i - e_i| <= rel * max(scale, max_i |e_i|) */
function assertCloseVec(actual: ArrayLike<number>, expected: ArrayLike<number>, rel: number, what: string, scale = 0): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  let err = 0;
  for (let i = 0; i < expected.length; i++) err = Math.max(err, Math.abs(actual[i] - expected[i]));
  const tol = rel * Math.max(scale, maxAbs(expected), Number.MIN_VALUE);
  assert.ok(err <= tol, `${what}: max abs error ${err.toExponential(3)} > ${tol.toExponential(3)}`);
}

function assertCloseScalar(actual: number, expected: number, rel: number, what: string, scale = 0): void {
  assertCloseVec([actual], [expected], rel, what, scale);
}

function checkAgainstReference(u: RidgeXUpdate, ref: Reference, what: string): void {
  assertCloseVec(u.x, ref.x, 1e-9, `${what}: x`);
  // The intercept can be close to 0: compare it on the scale of the share it is part of.
  assertCloseScalar(u.intercept, ref.intercept, 1e-9, `${what}: intercept`, maxAbs(ref.share));
  assertCloseVec(u.share, ref.share, 1e-9, `${what}: share`);
}

const RHOS = [1, 0.01, 37.5, 0.3, 1];

test('test self-check: the two dense references agree on a well-conditioned d > N problem', () => {
  const rand = seeded(3);
  const dense = randomDense(rand, 8, 20, 0.5);
  for (const intercept of [false, true]) {
    const w = randomVector(rand, 8, 2, 1.5);
    const a = referencePrimal(dense, w, 0.7, 1.3, intercept);
    const b = referenceDual(dense, w, 0.7, 1.3, intercept);
    assertCloseVec(a.x, b.x, 1e-10, 'x');
    assertCloseVec(a.share, b.share, 1e-10, 'share');
  }
});

interface Case {
  name: string;
  n: number;
  d: number;
  density: number;
  lambda: number;
  form: 'primal' | 'dual';
  seed: number;
}

const CASES: Case[] = [
  { name: 'primal 40x6 sparse', n: 40, d: 6, density: 0.45, lambda: 0.7, form: 'primal', seed: 11 },
  { name: 'dual 8x20 sparse', n: 8, d: 20, density: 0.5, lambda: 0.7, form: 'dual', seed: 12 },
  { name: 'dual 8x20 dense, small lambda', n: 8, d: 20, density: 1, lambda: 1e-3, form: 'dual', seed: 13 },
  { name: 'square 10x10 (primal boundary)', n: 10, d: 10, density: 0.6, lambda: 0.2, form: 'primal', seed: 14 },
];

// ---------------------------------------------------------------------------------------
// solve(w, rho) against the dense normal equations
// ---------------------------------------------------------------------------------------

for (const c of CASES) {
  for (const intercept of [false, true]) {
    test(`RidgeXUpdate.solve: ${c.name}, ${intercept ? 'with' : 'without'} intercept, several rho in one object`, () => {
      const rand = seeded(c.seed * 7 + (intercept ? 1 : 0));
      const dense = randomDense(rand, c.n, c.d, c.density);
      const D = csrFromDense(dense, c.d);
      if (c.density < 1) assert.ok(D.values.length < c.n * c.d, 'test matrix should have zeros');
      const u = new RidgeXUpdate(D, c.lambda, intercept);
      assert.equal(u.form, c.form);
      assert.equal(u.n, c.n);
      assert.equal(u.d, c.d);
      for (const rho of RHOS) {
        // A target with a clear non-zero mean, so the intercept matters.
        const w = randomVector(rand, c.n, 2, 1.5);
        const ref = reference(dense, w, c.lambda, rho, intercept);
        u.solve(Float64Array.from(w), rho);
        checkAgainstReference(u, ref, `rho=${rho}`);
        if (!intercept) assert.equal(u.intercept, 0);
      }
    });
  }
}

test('RidgeXUpdate.solve: lambda = 0 with full-column-rank D (least squares), with and without intercept', () => {
  const rand = seeded(99);
  const dense = randomDense(rand, 40, 6, 0.5);
  const D = csrFromDense(dense, 6);
  for (const intercept of [false, true]) {
    const u = new RidgeXUpdate(D, 0, intercept);
    assert.equal(u.form, 'primal');
    for (const rho of [0.05, 1, 20]) {
      const w = randomVector(rand, 40, 1, -0.7);
      const ref = reference(dense, w, 0, rho, intercept);
      u.solve(Float64Array.from(w), rho);
      checkAgainstReference(u, ref, `lambda=0 intercept=${intercept} rho=${rho}`);
      // With lambda = 0 the answer does not depend on rho.
      const ref1 = reference(dense, w, 0, 1, intercept);
      assertCloseVec(u.x, ref1.x, 1e-9, 'lambda=0 solution independent of rho');
    }
  }
});

test('RidgeXUpdate.solve: an all-zero column gets coefficient 0 (lambda > 0)', () => {
  const rand = seeded(5);
  const dense = randomDense(rand, 30, 5, 0.5);
  for (const r of dense) r[2] = 0;
  const D = csrFromDense(dense, 5);
  for (const intercept of [false, true]) {
    const u = new RidgeXUpdate(D, 0.3, intercept);
    const w = randomVector(rand, 30, 1, 0.4);
    const ref = reference(dense, w, 0.3, 2, intercept);
    u.solve(Float64Array.from(w), 2);
    checkAgainstReference(u, ref, `zero column intercept=${intercept}`);
    assert.ok(Math.abs(u.x[2]) <= 1e-12 * maxAbs(ref.x), `x[2] = ${u.x[2]}`);
  }
});

// ---------------------------------------------------------------------------------------
// updateFromBroadcast, penaltySq, scores
// ---------------------------------------------------------------------------------------

for (const c of CASES.slice(0, 2)) {
  for (const intercept of [false, true]) {
    test(`RidgeXUpdate.updateFromBroadcast: target w = share_prev - c (${c.name}, intercept=${intercept})`, () => {
      const rand = seeded(c.seed * 13 + (intercept ? 1 : 0));
      const dense = randomDense(rand, c.n, c.d, c.density);
      const D = csrFromDense(dense, c.d);
      const u = new RidgeXUpdate(D, c.lambda, intercept);
      // First round from a zero share: w = -c.
      assert.deepEqual(Array.from(u.share), new Array<number>(c.n).fill(0));
      let sharePrev = new Float64Array(c.n);
      for (const rho of [0.5, 0.5, 3, 0.02]) {
        const bc = randomVector(rand, c.n, 1.5, -0.3);
        const bcCopy = Float64Array.from(bc);
        const w = sharePrev.map((s, i) => s - bc[i]);
        const ref = reference(dense, w, c.lambda, rho, intercept);
        u.updateFromBroadcast(bc, rho);
        checkAgainstReference(u, ref, `broadcast rho=${rho}`);
        assert.deepEqual(bc, bcCopy, 'updateFromBroadcast must not modify c');
        sharePrev = Float64Array.from(ref.share);
      }
    });
  }
}

test('RidgeXUpdate.penaltySq is ||x||^2 without the intercept; scores(X) = X x + b', () => {
  for (const c of CASES.slice(0, 2)) {
    for (const intercept of [false, true]) {
      const rand = seeded(c.seed * 31 + (intercept ? 1 : 0));
      const dense = randomDense(rand, c.n, c.d, c.density);
      const D = csrFromDense(dense, c.d);
      const u = new RidgeXUpdate(D, c.lambda, intercept);
      const w = randomVector(rand, c.n, 1, 3);
      const ref = reference(dense, w, c.lambda, 0.8, intercept);
      u.solve(Float64Array.from(w), 0.8);
      if (intercept) assert.ok(Math.abs(ref.intercept) > 0.1, 'test needs a clearly non-zero intercept');
      let sq = 0;
      for (const v of ref.x) sq += v * v;
      assertCloseScalar(u.penaltySq(), sq, 1e-9, `${c.name} intercept=${intercept}: penaltySq`);

      // A test matrix with the same columns and different rows.
      const testDense = randomDense(rand, 17, c.d, 0.6);
      const Xtest: Csr = csrFromDense(testDense, c.d);
      const expected = testDense.map((r) => r.reduce((acc, v, j) => acc + v * ref.x[j], ref.intercept));
      const got = u.scores(Xtest);
      assert.equal(got.length, 17);
      assertCloseVec(got, expected, 1e-9, `${c.name} intercept=${intercept}: scores`);
      // On the training matrix, scores equal the share.
      assertCloseVec(u.scores(D), ref.share, 1e-9, `${c.name} intercept=${intercept}: scores(D) = share`);
    }
  }
});

test('RidgeXUpdate rejects bad arguments', () => {
  const D = csrFromDense([
    [1, 0],
    [0, 2],
    [3, 1],
  ]);
  assert.throws(() => new RidgeXUpdate(D, -1, false), RangeError);
  assert.throws(() => new RidgeXUpdate(D, Number.NaN, false), RangeError);
  const u = new RidgeXUpdate(D, 1, false);
  assert.throws(() => u.solve(new Float64Array(3), 0), RangeError);
  assert.throws(() => u.solve(new Float64Array(3), -1), RangeError);
  assert.throws(() => u.solve(new Float64Array(2), 1), RangeError);
  assert.throws(() => u.updateFromBroadcast(new Float64Array(4), 1), RangeError);
});

test('the deflation preconditioner: the exact solution to the tolerance, in under half the Jacobi iterations, round after round', () => {
  const rand = seeded(777);
  // Rows near a 20-dimensional subspace of decaying weights (as common words make hashed text):
  // a few directions dominate D^T D across every column, which a diagonal cannot undo.
  const [n, d] = [400, 240];
  const basis = Array.from({ length: 20 }, () => Array.from({ length: d }, () => rand() - 0.5));
  const rows = Array.from({ length: n }, () => {
    const a = basis.map((_, k) => (rand() - 0.5) * 4 ** (-k / 4));
    return Array.from({ length: d }, (_, j) => a.reduce((acc, ak, k) => acc + ak * basis[k][j], 0) + (rand() < 0.05 ? rand() - 0.5 : 0));
  });
  const D = csrFromDense(rows, d);
  const deflated = new RidgeXUpdate(D, 1e-4, true, { eigenLimit: 10, choleskyLimit: 0 });
  const jacobi = new RidgeXUpdate(D, 1e-4, true, { eigenLimit: 10, choleskyLimit: 0, deflationRank: 0 });
  const exact = new RidgeXUpdate(D, 1e-4, true);
  let fewer = 0;
  for (let round = 0; round < 6; round++) {
    const c = Float64Array.from({ length: n }, () => rand() * 2 - 1);
    for (const u of [deflated, jacobi, exact]) u.updateFromBroadcast(c, 0.05);
    assertCloseVec(deflated.x, exact.x, 1e-9, `round ${round}: x`);
    assertCloseVec(deflated.share, exact.share, 1e-9, `round ${round}: share`);
    assert.ok(deflated.lastResidual <= 1e-12 && jacobi.lastResidual <= 1e-12);
    if (2 * deflated.lastIterations < jacobi.lastIterations) fewer++;
  }
  assert.equal(fewer, 6, 'the deflated solve takes fewer than half the iterations every round (about 75 against 195 here)');
});

test('deflation on badly scaled columns (three orders of magnitude): when a deflated solve needs more than 200 iterations, Jacobi takes over, and the solution is still exact', () => {
  const rand = seeded(31337);
  const [n, d] = [400, 200];
  const scale = Array.from({ length: d }, () => 10 ** (rand() * 3 - 1.5));
  // Half the entries non-zero, so that applying the 50 eigenvectors costs less than a product with the block.
  const rows = Array.from({ length: n }, () => Array.from({ length: d }, (_, j) => (rand() < 0.5 ? 0 : (rand() - 0.5) * scale[j])));
  const D = csrFromDense(rows, d);
  const deflated = new RidgeXUpdate(D, 1e-6, false, { eigenLimit: 10, choleskyLimit: 0 });
  const jacobi = new RidgeXUpdate(D, 1e-6, false, { eigenLimit: 10, choleskyLimit: 0, deflationRank: 0 });
  const exact = new RidgeXUpdate(D, 1e-6, false);
  for (let round = 0; round < 4; round++) {
    const c = Float64Array.from({ length: n }, () => rand() * 2 - 1);
    for (const u of [deflated, jacobi, exact]) u.updateFromBroadcast(c, 1);
    assertCloseVec(deflated.share, exact.share, 1e-9, `round ${round}: share`);
    assert.ok(deflated.lastResidual <= 1e-12, `round ${round}: residual ${deflated.lastResidual}`);
    if (round === 0) assert.ok(deflated.lastIterations > 200, `round 0: ${deflated.lastIterations} iterations (the deflated solve should give up here)`);
    else assert.ok(deflated.lastIterations <= jacobi.lastIterations + 3, `round ${round}: ${deflated.lastIterations} against Jacobi's ${jacobi.lastIterations}`);
  }
});

test('conjugate-gradient form (blocks too large to factor) gives the factored solution, with and without intercept, also in the ball', () => {
  const rand = seeded(4242);
  for (const intercept of [false, true]) {
    // 25 and 60 features: Jacobi; 150 (300 rows): the deflation preconditioner; 200 (130 rows): too
    // few non-zeros for applying 50 eigenvectors to cost less than a product with the block, so Jacobi.
    for (const [n, d] of [[60, 25], [25, 60], [300, 150], [130, 200]]) {
      const rows = Array.from({ length: n }, () => Array.from({ length: d }, () => (rand() < 0.7 ? 0 : rand() - 0.3)));
      const D = csrFromDense(rows, d);
      const exact = new RidgeXUpdate(D, 1e-3, intercept);
      const cg = new RidgeXUpdate(D, 1e-3, intercept, { eigenLimit: 10, choleskyLimit: 0 });
      assert.equal(cg.form, 'cg');
      for (const rho of [0.5, 2, 0.01]) {
        const c = Float64Array.from({ length: n }, () => rand() * 4 - 2);
        exact.updateFromBroadcast(c, rho);
        cg.updateFromBroadcast(c, rho);
        for (let j = 0; j < d; j++) assert.ok(Math.abs(exact.x[j] - cg.x[j]) <= 1e-8 * (1 + Math.abs(exact.x[j])), `x[${j}] ${cg.x[j]} vs ${exact.x[j]}`);
        for (let i = 0; i < n; i++) assert.ok(Math.abs(exact.share[i] - cg.share[i]) <= 1e-8 * (1 + Math.abs(exact.share[i])));
        assert.ok(cg.lastIterations > 0);
      }
      // In the ball: the same constrained minimiser (the radius binds for these targets).
      for (const radius of [0.05, 0.5, 1e3]) {
        const w = Float64Array.from({ length: n }, () => rand() * 4 - 2);
        exact.solve(w.slice(), 0.7, radius);
        cg.solve(w.slice(), 0.7, radius);
        const norm = Math.sqrt(cg.penaltySq());
        assert.ok(norm <= radius * (1 + 1e-12), `||x|| ${norm} <= ${radius} (up to rounding)`);
        if (radius < 1) assert.ok(norm > radius * (1 - 1e-9), 'the ball binds');
        for (let j = 0; j < d; j++) assert.ok(Math.abs(exact.x[j] - cg.x[j]) <= 1e-8 * (1 + Math.abs(exact.x[j])), `radius ${radius}: x[${j}] ${cg.x[j]} vs ${exact.x[j]}`);
        assert.ok(Math.abs(exact.intercept - cg.intercept) <= 1e-8);
      }
    }
  }
});

test('Cholesky form (blocks above the eigendecomposition limit) gives the eigen form\'s solution: primal and dual, dense and sparse, with and without intercept, a new rho, and in the ball', () => {
  const rand = seeded(5151);
  for (const intercept of [false, true]) {
    for (const [n, d, zeros] of [[70, 30, 0.1], [30, 70, 0.1], [70, 30, 0.8], [30, 70, 0.8]]) {
      const rows = Array.from({ length: n }, () => Array.from({ length: d }, () => (rand() < zeros ? 0 : rand() - 0.3)));
      const D = csrFromDense(rows, d);
      const exact = new RidgeXUpdate(D, 1e-2, intercept);
      const chol = new RidgeXUpdate(D, 1e-2, intercept, { eigenLimit: 10, rho: 0.5 });
      const what = `${n} x ${d}, ${zeros} zeros, intercept ${intercept}`;
      assert.equal(chol.form, 'cholesky', what);
      assert.equal(chol.side, d <= n ? 'primal' : 'dual', what);
      assert.equal(chol.dense, zeros < 0.5, what);
      for (const rho of [0.5, 0.5, 2, 0.01]) {
        const c = Float64Array.from({ length: n }, () => rand() * 4 - 2);
        exact.updateFromBroadcast(c, rho);
        chol.updateFromBroadcast(c, rho);
        for (let j = 0; j < d; j++) assert.ok(Math.abs(exact.x[j] - chol.x[j]) <= 1e-9 * (1 + Math.abs(exact.x[j])), `${what}, rho ${rho}: x[${j}] ${chol.x[j]} vs ${exact.x[j]}`);
        for (let i = 0; i < n; i++) assert.ok(Math.abs(exact.share[i] - chol.share[i]) <= 1e-9 * (1 + Math.abs(exact.share[i])), `${what}: share[${i}]`);
        assert.ok(Math.abs(exact.intercept - chol.intercept) <= 1e-9 * (1 + Math.abs(exact.intercept)));
        assert.equal(chol.lastIterations, 0, 'no conjugate gradients outside the ball');
      }
      for (const radius of [0.05, 0.5, 1e3]) {
        const w = Float64Array.from({ length: n }, () => rand() * 4 - 2);
        exact.solve(w.slice(), 0.7, radius);
        chol.solve(w.slice(), 0.7, radius);
        assert.ok(chol.penaltySq() <= radius * radius * (1 + 1e-12), `${what}: in the ball of ${radius}`);
        for (let j = 0; j < d; j++) assert.ok(Math.abs(exact.x[j] - chol.x[j]) <= 1e-7 * (1 + Math.abs(exact.x[j])), `${what}, radius ${radius}: x[${j}] ${chol.x[j]} vs ${exact.x[j]}`);
      }
    }
  }
});

test('Cholesky form: no factorisation without lambda > 0 or above its limit (0: never), and the paper\'s noise D xi has the covariance sigma^2 P of D xi, xi ~ N(0, sigma^2 (D^T D)^-1)', () => {
  const rand = seeded(5252);
  const [n, d] = [40, 12];
  const rows = Array.from({ length: n }, () => Array.from({ length: d }, () => rand() - 0.5));
  const D = csrFromDense(rows, d);
  assert.equal(new RidgeXUpdate(D, 0, false, { eigenLimit: 5 }).form, 'cg');
  assert.equal(new RidgeXUpdate(D, 1, false, { eigenLimit: 5, choleskyLimit: 0 }).form, 'cg');
  assert.equal(new RidgeXUpdate(D, 1, false, { eigenLimit: 5, choleskyLimit: 11 }).form, 'cg');
  assert.equal(new RidgeXUpdate(D, 1, false, { eigenLimit: 5, choleskyLimit: 12 }).form, 'cholesky', 'the limit is inclusive');
  assert.throws(() => new RidgeXUpdate(D, 1, false, { eigenLimit: 5 }).hatTrace(1), /hatTrace needs an eigendecomposition/);
  // P = A (A^T A)^-1 A^T (primal: D has full column rank), or I (dual: 12 rows of 40 features,
  // full row rank). Along a unit vector q the noise's variance is sigma^2 q^T P q: checked along
  // a column of D (q^T P q = 1), a random direction (in between) and, on the primal side, a
  // direction orthogonal to D's columns (0).
  const sigma = 0.7;
  const draws = 600;
  const wide = Array.from({ length: 12 }, () => Array.from({ length: 36 }, () => rand() - 0.5));
  for (const A of [new Matrix(rows), new Matrix(wide)]) {
    const [m, k] = [A.rows, A.columns];
    const chol = new RidgeXUpdate(csrFromDense(A.to2DArray(), k), 1, false, { eigenLimit: 5 });
    assert.equal(chol.form, 'cholesky');
    const P = k <= m ? A.mmul(solve(A.transpose().mmul(A), A.transpose())) : Matrix.eye(m);
    const unit = (v: number[]) => {
      const norm = Math.hypot(...v);
      return v.map((x) => x / norm);
    };
    const along = [unit(A.getColumn(0)), unit(Array.from({ length: m }, () => rand() - 0.5))];
    if (k < m) {
      // A random vector minus its projection on D's columns.
      const r = Matrix.columnVector(Array.from({ length: m }, () => rand() - 0.5));
      along.push(unit(r.sub(P.mmul(r)).getColumn(0)));
    }
    const sums = along.map(() => 0);
    const g = gaussian(seeded(5353 + k));
    for (let t = 0; t < draws; t++) {
      chol.released.fill(0);
      chol.addModelNoise(sigma, (out, s) => {
        for (let i = 0; i < out.length; i++) out[i] = s * g();
      });
      along.forEach((q, a) => (sums[a] += q.reduce((acc, qi, i) => acc + qi * chol.released[i], 0) ** 2));
    }
    along.forEach((q, a) => {
      const expected = sigma ** 2 * Matrix.rowVector(q).mmul(P).mmul(Matrix.columnVector(q)).get(0, 0);
      const seen = sums[a] / draws;
      // The mean of 600 squared normals is within 5 sd (sqrt(2 / 600)) of its expectation.
      assert.ok(Math.abs(seen - expected) <= 5 * Math.sqrt(2 / draws) * sigma ** 2 + 1e-12, `${m} x ${k}, direction ${a}: variance ${seen} against ${expected}`);
    });
  }
});

test('Cholesky form: factorInPieces forms the factor the constructor forms at once (a block mostly dense and one mostly sparse), and the event loop turns between the pieces', async () => {
  const rand = seeded(5454);
  for (const zeros of [0.1, 0.8]) {
    const rows = Array.from({ length: 50 }, () => Array.from({ length: 20 }, () => (rand() < zeros ? 0 : rand() - 0.3)));
    const D = csrFromDense(rows, 20);
    const inPlace = new RidgeXUpdate(D, 1e-2, true, { eigenLimit: 5, rho: 0.3 });
    const inPieces = new RidgeXUpdate(D, 1e-2, true, { eigenLimit: 5 });
    let turns = 0;
    const turn = (): void => void (inPieces.factorMs === 0 && (turns++, setImmediate(turn)));
    setImmediate(turn);
    const pieces = await inPieces.factorInPieces(0.3);
    assert.ok(pieces >= 1);
    assert.ok(turns >= pieces, `${turns} turns of the event loop in ${pieces} pieces`);
    const ms = inPieces.factorMs;
    assert.ok(ms > 0);
    const w = Float64Array.from({ length: 50 }, () => rand() * 2 - 1);
    inPlace.solve(w.slice(), 0.3);
    inPieces.solve(w.slice(), 0.3);
    assert.equal(inPieces.factorMs, ms, 'the solve used the factor formed in pieces (nothing factored again)');
    assert.deepEqual(inPieces.x, inPlace.x, `${zeros} zeros`);
    assert.deepEqual(inPieces.share, inPlace.share);
  }
});

test('factorPieces in small pieces forms the Cholesky factor of lambda I + rho G~ (dense and sparse, primal and dual side, centred or not), checked against ml-matrix', () => {
  const rand = seeded(5656);
  const [lambda, rho] = [0.05, 0.7];
  // 300 x 24 (primal: three panels of 128 rows) and 24 x 90 (dual), half the entries zero.
  for (const [n, d, side] of [[300, 24, 'primal'], [24, 90, 'dual']] as const) {
    const rows = randomDense(rand, n, d, 0.5);
    const mu = Float64Array.from({ length: d }, (_, j) => rows.reduce((s, r) => s + r[j], 0) / n);
    // G~ from the centred rows, independently of the kernels.
    const c = new Matrix(rows.map((r) => r.map((v, j) => v - mu[j])));
    for (const centred of [true, false]) {
      const a = centred ? c : new Matrix(rows);
      const g = side === 'primal' ? a.transpose().mmul(a) : a.mmul(a.transpose());
      const k = g.rows;
      const expected = new CholeskyDecomposition(Matrix.eye(k).mul(lambda).add(g.mul(rho))).lowerTriangularMatrix;
      const csr = csrFromDense(rows, d);
      const dense = { rows: n, cols: d, data: Float64Array.from(rows.flat()) };
      for (const block of [{ dense }, { csr }]) {
        const into = new Float64Array((k * (k + 1)) / 2); // the factor, packed
        let pieces = 0;
        for (const _ of factorPieces({ ...block, side, mu: centred ? mu : undefined, lambda, rho, into }, 2000)) pieces++;
        const what = `${side} ${block.dense ? 'dense' : 'sparse'}${centred ? ' centred' : ''}`;
        assert.ok(pieces >= 4, `${what}: ${pieces} pieces`);
        for (let i = 0; i < k; i++)
          for (let j = 0, at = (i * (i + 1)) / 2 + j; j <= i; j++, at++) assert.ok(Math.abs(into[at] - expected.get(i, j)) <= 1e-9 * (1 + Math.abs(expected.get(i, j))), `${what}: L[${i}][${j}] ${into[at]} against ${expected.get(i, j)}`);
      }
    }
  }
});

test('Cholesky form: a factorisation cancelled between its pieces resolves with nothing factored, and the next solve factors in place', async () => {
  const rand = seeded(5555);
  const rows = Array.from({ length: 400 }, () => Array.from({ length: 300 }, () => rand() - 0.5));
  const D = csrFromDense(rows, 300);
  const x = new RidgeXUpdate(D, 1e-2, false, { eigenLimit: 5 });
  const reference = new RidgeXUpdate(D, 1e-2, false, { eigenLimit: 5, rho: 0.3 });
  const pending = x.factorInPieces(0.3);
  x.cancelFactor();
  assert.equal(await pending, 0);
  assert.equal(x.factorMs, 0, 'nothing was factored');
  const w = Float64Array.from({ length: 400 }, () => rand() * 2 - 1);
  x.solve(w.slice(), 0.3);
  reference.solve(w.slice(), 0.3);
  assert.ok(x.factorMs > 0, 'factored in place by the solve');
  assert.deepEqual(x.x, reference.x);
});

test('threads: a dense block in shared memory solves as on one thread, with 1 and 2 threads (Cholesky primal and dual, factored in pieces; eigen and cg forms), and stops when closed', async () => {
  const rand = seeded(5757);
  const close = (a: Float64Array, b: Float64Array, what: string): void => {
    for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-9 * (1 + Math.abs(b[i])), `${what}[${i}]: ${a[i]} vs ${b[i]}`);
  };
  for (const [n, d, opts] of [
    [300, 40, { eigenLimit: 10 }],
    [40, 300, { eigenLimit: 10 }],
    [80, 30, {}],
    [120, 40, { eigenLimit: 10, choleskyLimit: 0 }],
    [400, 200, { eigenLimit: 10 }], // a factor of more than one block of rows: the threads form the later blocks' columns
  ] as const) {
    const data = sharedFloat64(n * d);
    for (let i = 0; i < data.length; i++) data[i] = rand() - 0.3;
    const D = { rows: n, cols: d, data };
    const one = new RidgeXUpdate(D, 1e-2, true, { ...opts, rho: 0.4 });
    for (const threads of [1, 2]) {
      const what = `${n} x ${d} ${one.form}, ${threads} threads`;
      const x = new RidgeXUpdate(D, 1e-2, true, { ...opts, threads });
      try {
        assert.equal(x.threads, threads);
        if (x.form === 'cholesky') assert.ok((await x.factorInPieces(0.4)) >= 1, what);
        for (let round = 0; round < 3; round++) {
          const c = Float64Array.from({ length: n }, () => rand() * 2 - 1);
          one.reset();
          x.reset();
          one.updateFromBroadcast(c, 0.4);
          x.updateFromBroadcast(c, 0.4);
          close(x.x, one.x, `${what}: x`);
          close(x.share, one.share, `${what}: share`);
        }
      } finally {
        await x.close();
      }
    }
  }
  // Cancelled while its threads form the Gram matrix: nothing factored, and the next solve
  // (which factors in place) waits for the threads to finish the abandoned call.
  const data = sharedFloat64(600 * 200);
  for (let i = 0; i < data.length; i++) data[i] = rand() - 0.5;
  const D = { rows: 600, cols: 200, data };
  const x = new RidgeXUpdate(D, 1e-2, false, { eigenLimit: 10, threads: 1 });
  const reference = new RidgeXUpdate(D, 1e-2, false, { eigenLimit: 10, rho: 0.3 });
  let pending = x.factorInPieces(0.3);
  x.cancelFactor();
  assert.equal(await pending, 0);
  assert.equal(x.factorMs, 0);
  const w = Float64Array.from({ length: 600 }, () => rand() - 0.5);
  x.solve(w.slice(), 0.3);
  reference.solve(w.slice(), 0.3);
  close(x.x, reference.x, 'after a cancelled factorisation: x');
  // Closed while it factors: nothing factored, nothing left waiting.
  pending = x.factorInPieces(0.5);
  await x.close();
  assert.equal(await pending, 0);
});

test('threadsFor: a number as given; auto: none for a small block or one outside shared memory', () => {
  const big = { rows: THREADS_MIN_ENTRIES, cols: 1, data: sharedFloat64(1) }; // only rows x cols and the buffer are read
  assert.equal(threadsFor(2, big), 2);
  assert.equal(threadsFor(0, big), 0);
  assert.equal(threadsFor('auto', { ...big, rows: THREADS_MIN_ENTRIES - 1 }), 0);
  assert.equal(threadsFor('auto', { ...big, data: new Float64Array(1) }), 0);
  assert.ok(threadsFor('auto', big) <= 3);
  assert.throws(() => threadsFor(-1, big), /whole number/);
  assert.throws(() => threadsFor(1.5, big), /whole number/);
});

test('in place (a sparse block, noiseFree, no intercept, the eigen or Cholesky form): D^T (released - c) from the kernels\' memory gives the rounds of a separate released vector, bit for bit, with c there or not', () => {
  const rand = seeded('in-place');
  const D = csrFromDense(randomDense(rand, 300, 12, 0.4));
  const diff = WasmCsr.prototype.matTVecDiff;
  let inPlace = 0;
  WasmCsr.prototype.matTVecDiff = function (...args: Parameters<typeof diff>) {
    inPlace++;
    return diff.apply(this, args);
  };
  try {
    for (const opts of [{}, { eigenLimit: 0 }]) {
      const plain = new RidgeXUpdate(D, 0.1, false, opts);
      const shared = new RidgeXUpdate(D, 0.1, false, { ...opts, noiseFree: true });
      assert.equal(shared.form, 'eigenLimit' in opts ? 'cholesky' : 'primal');
      const into = shared.broadcastInto!;
      assert.equal(into.length, 300);
      for (const [r, rho] of [0.5, 0.5, 2, 2, 0.7].entries()) {
        const c = randomVector(rand, 300);
        plain.updateFromBroadcast(c, rho);
        const before = inPlace;
        // Even rounds: c decoded where the update reads it; odd rounds: an array of the caller's.
        if (r % 2 === 0) {
          into.set(c);
          shared.updateFromBroadcast(into, rho);
        } else shared.updateFromBroadcast(c, rho);
        assert.equal(inPlace, before + 1, `${shared.form} round ${r + 1}: in place`);
        assert.deepEqual(shared.share, plain.share, `${shared.form} round ${r + 1}: share`);
        assert.deepEqual(shared.x, plain.x, `${shared.form} round ${r + 1}: x`);
      }
      // With bounds (privacy) the target is clipped: formed, not in place.
      const before = inPlace;
      shared.updateFromBroadcast(randomVector(rand, 300), 1, { clip: 0.5, radius: 10 });
      assert.equal(inPlace, before, 'bounds: not in place');
    }
    // Neither with an intercept, nor with a separate released vector.
    for (const [intercept, noiseFree] of [[true, true], [false, false]]) {
      const before = inPlace;
      new RidgeXUpdate(D, 0.1, intercept, { noiseFree }).updateFromBroadcast(randomVector(rand, 300), 1);
      assert.equal(inPlace, before, `intercept ${intercept}, noiseFree ${noiseFree}: not in place`);
    }
  } finally {
    WasmCsr.prototype.matTVecDiff = diff;
  }
});

test('noiseFree: released is the share itself, and the rounds are those of a separate released vector, bit for bit', () => {
  const rand = seeded('noise-free');
  const dense = randomDense(rand, 300, 12, 0.4);
  const D = csrFromDense(dense);
  const plain = new RidgeXUpdate(D, 0.1, true);
  const shared = new RidgeXUpdate(D, 0.1, true, { noiseFree: true });
  assert.notEqual(plain.released, plain.share);
  assert.equal(shared.released, shared.share);
  for (const [r, rho] of [0.5, 0.5, 2, 2, 0.7].entries()) {
    const c = randomVector(rand, 300);
    plain.updateFromBroadcast(c, rho);
    shared.updateFromBroadcast(c, rho);
    assert.deepEqual(shared.share, plain.share, `round ${r + 1}: share`);
    assert.deepEqual(shared.released, plain.released, `round ${r + 1}: released`);
    assert.deepEqual(shared.x, plain.x, `round ${r + 1}: x`);
    assert.equal(shared.intercept, plain.intercept);
  }
});
