import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Csr, WasmCsr, csrFromDense } from '@admm-share/core';
import { randomVector, seeded } from '@admm-share/core/test-support';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { assertCloseScalar, assertCloseVec, checkAgainstReference, maxAbs, randomDense, reference, referenceDual, referencePrimal } from './xupdate-reference.js';

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
