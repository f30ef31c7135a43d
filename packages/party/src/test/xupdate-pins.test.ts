// The party's x-update pinned down where the reference-solution tests leave room
// (docs/mutation.md): the clip of the target that the gaussian-share sensitivity bound
// assumes, reset, the form chosen at the factor limit, the conjugate-gradient preconditioner
// and its zero right-hand side, the paper mechanism's noise in the N x N form, and the
// messages of every refusal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { csrFromDense } from '@admm-share/core';
import { seeded } from '@admm-share/core/test-support';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';

const close = (a: ArrayLike<number>, b: ArrayLike<number>, tol: number, what: string) => {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= tol * (1 + Math.abs(b[i])), `${what}[${i}]: ${a[i]} vs ${b[i]}`);
};

test('updateFromBroadcast clips the target released - c to [-clip, clip] coordinate by coordinate, and only with bounds', () => {
  const rows = [[1, 0.5], [0, 1], [0.3, -0.2], [-1, 1], [0.5, 0.5]];
  const clip = 2;
  const c = Float64Array.of(-5, 1.5, -1.999, 3, 0.5);
  const released = Float64Array.of(0, 0, 0, 0.5, 0);
  // w = released - c = [5, -1.5, 1.999, -2.5, -0.5]: clipped to [2, -1.5, 1.999, -2, -0.5].
  const clipped = Float64Array.of(2, -1.5, 1.999, -2, -0.5);
  for (const intercept of [false, true]) {
    const x = new RidgeXUpdate(csrFromDense(rows), 0.1, intercept);
    x.released.set(released);
    x.updateFromBroadcast(c, 0.7, { clip, radius: 1e6 });
    const ref = new RidgeXUpdate(csrFromDense(rows), 0.1, intercept);
    ref.solve(clipped.slice(), 0.7);
    close(x.x, ref.x, 1e-12, `intercept ${intercept}: x`);
    close(x.share, ref.share, 1e-12, `intercept ${intercept}: share`);
    assert.deepEqual(x.released, x.share, 'released holds the new share');
    const free = new RidgeXUpdate(csrFromDense(rows), 0.1, intercept);
    free.released.set(released);
    free.updateFromBroadcast(c, 0.7);
    const unclipped = new RidgeXUpdate(csrFromDense(rows), 0.1, intercept);
    unclipped.solve(Float64Array.from(released, (r, i) => r - c[i]), 0.7);
    close(free.x, unclipped.x, 1e-12, `intercept ${intercept}: no bounds, no clip`);
  }
});

test('reset returns to the state before round 1', () => {
  const x = new RidgeXUpdate(csrFromDense([[1, 0], [0, 1], [1, 1]]), 0.1, true);
  x.updateFromBroadcast(Float64Array.of(-1, 2, -3), 1);
  assert.ok(x.penaltySq() > 0 && x.intercept !== 0);
  x.reset();
  assert.deepEqual([Array.from(x.x), x.intercept, Array.from(x.share), Array.from(x.released)], [[0, 0], 0, [0, 0, 0], [0, 0, 0]]);
});

test('the factor limit is inclusive: min(d, N) equal to it is still factored', () => {
  const D = csrFromDense([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1], [1, 0, 1]]);
  assert.equal(new RidgeXUpdate(D, 0.1, false, { eigenLimit: 3 }).form, 'primal');
  assert.equal(new RidgeXUpdate(D, 0.1, false, { eigenLimit: 2, choleskyLimit: 0 }).form, 'cg');
});

/** N x d with zero-mean, mutually orthogonal columns of very different norms, plus `shift` in every entry of column j. */
function orthogonalColumns(shift: number[]): number[][] {
  const base = [
    [1, 1, 1],
    [-1, 1, -1],
    [1, -1, -1],
    [-1, -1, 1],
  ];
  const scale = [1, 30, 0.01];
  return base.map((r) => r.map((v, j) => v * scale[j] + shift[j]));
}

test('conjugate gradients: the Jacobi preconditioner is exact for orthogonal (centred) columns, one iteration', () => {
  const w = Float64Array.of(1, -2, 0.5, 3);
  for (const [intercept, shift] of [[false, [0, 0, 0]], [true, [2, -7, 0.05]]] as const) {
    const D = csrFromDense(orthogonalColumns([...shift]));
    const cg = new RidgeXUpdate(D, 0.3, intercept, { eigenLimit: 1, choleskyLimit: 0 });
    assert.equal(cg.form, 'cg');
    cg.solve(w.slice(), 0.9);
    assert.equal(cg.lastIterations, 1, `intercept ${intercept}: one iteration with an exact preconditioner`);
    const exact = new RidgeXUpdate(D, 0.3, intercept);
    exact.solve(w.slice(), 0.9);
    close(cg.x, exact.x, 1e-10, `intercept ${intercept}: x`);
  }
});

test('conjugate gradients: a zero target gives x = 0 at once, whatever the warm start', () => {
  const D = csrFromDense(orthogonalColumns([0, 0, 0]).map((r, i) => r.map((v) => v + i * 0.1)));
  const cg = new RidgeXUpdate(D, 0.3, false, { eigenLimit: 1, choleskyLimit: 0 });
  cg.solve(Float64Array.of(1, -2, 0.5, 3), 0.9);
  assert.ok(cg.penaltySq() > 0);
  cg.solve(new Float64Array(4), 0.9);
  assert.equal(cg.lastIterations, 0);
  assert.deepEqual(Array.from(cg.x), [0, 0, 0]);
  assert.deepEqual(Array.from(cg.share), [0, 0, 0, 0]);
});

/** Rows of a rank-2 matrix in R^(5 x 8): every row is a combination of two fixed rows. */
const rankTwoWide = (() => {
  const p = [1, 0, 2, -1, 0.5, 0, 3, 1];
  const q = [0, 1, -1, 2, 0, 1.5, 0, -2];
  const coef = [[1, 0], [0, 1], [1, 1], [2, -1], [-0.5, 3]];
  return coef.map(([a, b]) => p.map((v, j) => a * v + b * q[j]));
})();

test('paper noise in the N x N form (d > N): D xi has one unit-variance component per non-zero eigenvalue, inside col(D)', () => {
  const D = csrFromDense(rankTwoWide);
  const x = new RidgeXUpdate(D, 0.1, false);
  assert.equal(x.form, 'dual');
  const start = Float64Array.of(0.5, -1, 2, 0, 1);
  x.released.set(start);
  const sigma = 3;
  // Every standard normal drawn equal to sigma: ||D xi||^2 = sigma^2 * rank exactly.
  x.addModelNoise(sigma, (out, s) => out.fill(s));
  const added = Array.from(x.released, (v, i) => v - start[i]);
  const sq = added.reduce((acc, v) => acc + v * v, 0);
  assert.ok(Math.abs(sq - 2 * sigma * sigma) < 1e-9, `||D xi||^2 = ${sq}, expected ${2 * sigma * sigma}`);
  // Inside col(D) = span of the rows' coefficient vectors: orthogonal to null(D^T).
  // D = C [p; q] with C the 5 x 2 coefficients, so null(D^T) = null(C^T).
  const C = [[1, 0], [0, 1], [1, 1], [2, -1], [-0.5, 3]];
  for (const v of [[1, 1, -1, 0, 0], [2, -1, 0, -1, 0], [-0.5, 3, 0, 0, -1]]) {
    assert.deepEqual([0, 1].map((k) => C.reduce((acc, row, i) => acc + row[k] * v[i], 0)), [0, 0], 'the test vector is in null(C^T)');
    const along = v.reduce((acc, vi, i) => acc + vi * added[i], 0);
    assert.ok(Math.abs(along) < 1e-9, `noise along null(D^T): ${along}`);
  }
  assert.deepEqual(x.share, new Float64Array(5), 'the private share is untouched');
});

test('paper noise in the d x d form: the same count of unit components', () => {
  // Rows in span(p, q) (first four columns), e_1, 0 and 2 (p + q): rank 3 in R^4, N = 8.
  const D = csrFromDense(rankTwoWide.map((r) => r.slice(0, 4)).concat([[1, 0, 0, 0], [0, 0, 0, 0], [2, 2, 2, 2]]));
  const x = new RidgeXUpdate(D, 0.1, false);
  assert.equal(x.form, 'primal');
  x.addModelNoise(0.5, (out, s) => out.fill(s));
  const sq = x.released.reduce((acc, v) => acc + v * v, 0);
  assert.ok(Math.abs(sq - 3 * 0.25) < 1e-9, `||D xi||^2 = ${sq}, expected 3 sigma^2 (rank 3)`);
});

test('paper noise is refused with an intercept', () => {
  const x = new RidgeXUpdate(csrFromDense([[1, 0], [0, 1], [1, 1]]), 0.1, true);
  assert.throws(() => x.addModelNoise(1, (out) => out.fill(1)), { name: 'RangeError', message: 'the paper mechanism is not defined with an intercept' });
});

test('lambda 0 with duplicate columns: the minimum-norm solution, split evenly', () => {
  const rand = seeded('min-norm');
  const base = Array.from({ length: 12 }, () => [rand() - 0.5, rand() - 0.5]);
  const D = csrFromDense(base.map(([a, b]) => [a, a, b]));
  const x = new RidgeXUpdate(D, 0, false);
  const w = Float64Array.from({ length: 12 }, () => rand() * 2 - 1);
  x.solve(w.slice(), 1.3);
  const twoCol = new RidgeXUpdate(csrFromDense(base), 0, false);
  twoCol.solve(w.slice(), 1.3);
  close([x.x[0], x.x[1], x.x[2]], [twoCol.x[0] / 2, twoCol.x[0] / 2, twoCol.x[1]], 1e-9, 'x');
  close(x.share, twoCol.share, 1e-9, 'share');
});

test('each refusal of RidgeXUpdate names the argument and the value', () => {
  const D = csrFromDense([[1, 0], [0, 2], [3, 1]]);
  assert.throws(() => new RidgeXUpdate(D, -1, false), { name: 'RangeError', message: 'lambda must be >= 0, got -1' });
  const u = new RidgeXUpdate(D, 1, false);
  assert.throws(() => u.solve(new Float64Array(3), 0), { name: 'RangeError', message: 'rho must be > 0, got 0' });
  assert.throws(() => u.solve(new Float64Array(3), 1, 0), { name: 'RangeError', message: 'radius must be > 0, got 0' });
  assert.throws(() => u.solve(new Float64Array(3), 1, -2), { name: 'RangeError', message: 'radius must be > 0, got -2' });
  assert.throws(() => u.solve(new Float64Array(2), 1), { name: 'RangeError', message: 'w has length 2, expected 3' });
  assert.throws(() => u.updateFromBroadcast(new Float64Array(4), 1), { name: 'RangeError', message: 'c has length 4, expected 3' });
});

test('conjugate gradients on columns of very different scales: the factored solution to 1e-9 relative, for targets of any size', () => {
  // Column scales from 1e-2 to 1e2: the Jacobi preconditioner matters here, and the stopping
  // rule must be relative to the right-hand side (a target of size 1e-6 as well as 1e6).
  const rand = seeded('cg-scales');
  const n = 60;
  const d = 25;
  const scale = Array.from({ length: d }, (_, j) => 10 ** (-2 + (4 * j) / d));
  const rows = Array.from({ length: n }, () => Array.from({ length: d }, (_, j) => (rand() < 0.6 ? 0 : (rand() - 0.5) * scale[j])));
  const D = csrFromDense(rows, d);
  const w = Float64Array.from({ length: n }, () => rand() * 2 - 1);
  for (const intercept of [false, true]) {
    const exact = new RidgeXUpdate(D, 1e-2, intercept);
    for (const size of [1, 1e-6, 1e6]) {
      const cg = new RidgeXUpdate(D, 1e-2, intercept, { eigenLimit: 5, choleskyLimit: 0 });
      const target = w.map((v) => v * size);
      exact.solve(target.slice(), 0.5);
      cg.solve(target.slice(), 0.5);
      const top = Math.max(...Array.from(exact.x, Math.abs));
      const err = Math.max(...Array.from(exact.x, (v, j) => Math.abs(v - cg.x[j])));
      assert.ok(err <= 1e-9 * top, `intercept ${intercept}, target size ${size}: relative error ${err / top}`);
      assert.ok(cg.lastIterations <= 2 * d, `intercept ${intercept}, target size ${size}: ${cg.lastIterations} iterations`);
    }
  }
});

test('lambda 0 with duplicate columns inside a ball: the problem on [sqrt(2) a, b] with the same radius', () => {
  // x = (x0, x1, x2) on columns (a, a, b): for a fixed x0 + x1 the norm is least with x0 = x1,
  // so ||x||^2 = s^2 + x2^2 with s = (x0 + x1) / sqrt 2 multiplying the column sqrt(2) a.
  const rand = seeded('min-norm-ball');
  const base = Array.from({ length: 12 }, () => [rand() - 0.5, rand() - 0.5]);
  const w = Float64Array.from({ length: 12 }, () => rand() * 4 - 2);
  const three = new RidgeXUpdate(csrFromDense(base.map(([a, b]) => [a, a, b])), 0, false);
  const two = new RidgeXUpdate(csrFromDense(base.map(([a, b]) => [Math.SQRT2 * a, b])), 0, false);
  two.solve(w.slice(), 0.8);
  const free = Math.sqrt(two.penaltySq());
  for (const radius of [free * 0.3, free * 0.9, free * 2]) {
    three.solve(w.slice(), 0.8, radius);
    two.solve(w.slice(), 0.8, radius);
    assert.ok(three.x.every(Number.isFinite), `radius ${radius}: finite`);
    close(three.share, two.share, 1e-9, `radius ${radius}: share`);
    close([three.x[0], three.x[1], three.x[2]], [two.x[0] / Math.SQRT2, two.x[0] / Math.SQRT2, two.x[1]], 1e-9, `radius ${radius}: x`);
    assert.ok(Math.sqrt(three.penaltySq()) <= radius * (1 + 1e-12));
  }
});
