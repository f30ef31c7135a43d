// The x-update's forms for blocks above the eigendecomposition limit (Cholesky, factored in
// pieces; conjugate gradients) and its threads, against the eigen form and ml-matrix.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CholeskyDecomposition, Matrix, solve } from 'ml-matrix';
import { csrFromDense, sharedFloat64 } from '@admm-share/core';
import { gaussian, seeded } from '@admm-share/core/test-support';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { THREADS_MIN_ENTRIES, threadsFor } from '../xupdate/block-operator.js';
import { factorPieces } from '../xupdate/cholesky.js';
import { randomDense } from './xupdate-reference.js';

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

