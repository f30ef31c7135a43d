import { test } from 'node:test';
import type { Worker } from 'node:worker_threads';
import assert from 'node:assert/strict';
import { Matrix } from 'ml-matrix';
import { type Dense, DenseTeam, balancedRanges, choleskyInPlace, packedAt, packedLength, sharedFloat64, unpackSymmetric } from '../index.js';
import { seeded } from './support.js';

const close = (a: number, b: number, tol: number, what: string) => assert.ok(Math.abs(a - b) <= tol * (1 + Math.abs(b)), `${what}: ${a} vs ${b}`);

/** An n x d matrix in shared memory, entries in [-1, 1), and the same as an ml-matrix Matrix. */
function sharedRandom(rand: () => number, n: number, d: number): { A: Dense; M: Matrix } {
  const data = sharedFloat64(n * d);
  for (let i = 0; i < data.length; i++) data[i] = 2 * rand() - 1;
  const M = new Matrix(Array.from({ length: n }, (_, i) => Array.from(data.subarray(i * d, (i + 1) * d))));
  return { A: { rows: n, cols: d, data }, M };
}

/** Runs DenseTeam.gram to its end, awaiting the threads' part (as the x-update does). */
async function gram(t: DenseTeam, g: Float64Array, side: 'primal' | 'dual', work: number): Promise<number> {
  let pieces = 0;
  for (const step of t.gram(g, side, work)) {
    pieces++;
    if (step) await step;
  }
  return pieces;
}

test('balancedRanges: contiguous, aligned, covering, and of about equal cost', () => {
  for (const [count, parts, align] of [[2000, 2, 4], [2001, 3, 4], [7, 4, 2], [1, 3, 1], [0, 2, 1]]) {
    const cost = (i: number) => count - i;
    const r = balancedRanges(count, parts, cost, align);
    assert.equal(r.length, parts);
    assert.equal(r[0][0], 0);
    assert.equal(r[parts - 1][1], count);
    for (let p = 0; p < parts; p++) {
      assert.ok(r[p][0] <= r[p][1], `range ${p} of ${count}`);
      if (p > 0) assert.equal(r[p][0], r[p - 1][1]);
      if (r[p][1] < count) assert.equal(r[p][1] % align, 0);
    }
    if (count >= 1000) {
      const total = (count * (count + 1)) / 2;
      for (const [from, to] of r) {
        let c = 0;
        for (let i = from; i < to; i++) c += cost(i);
        assert.ok(Math.abs(c - total / parts) < 0.01 * total, `range [${from}, ${to}) costs ${c} of ${total}`);
      }
    }
  }
});

test('DenseTeam: products and both Gram matrices agree with ml-matrix, with 1 and 2 threads', async () => {
  const rand = seeded(5);
  for (const [n, d, threads] of [[301, 37, 1], [300, 41, 2], [5, 130, 2], [2, 3, 2], [1, 5, 4]]) {
    const { A, M } = sharedRandom(rand, n, d);
    const t = DenseTeam.start(A, threads);
    try {
      for (let call = 0; call < 3; call++) {
        const x = Float64Array.from({ length: d }, () => rand() - 0.5);
        const w = Float64Array.from({ length: n }, () => rand() - 0.5);
        const ax = t.matVec(new Float64Array(n), x);
        const atw = t.matTVec(new Float64Array(d), w);
        const refAx = M.mmul(Matrix.columnVector(Array.from(x))).getColumn(0);
        const refAtw = M.transpose().mmul(Matrix.columnVector(Array.from(w))).getColumn(0);
        for (let i = 0; i < n; i++) close(ax[i], refAx[i], 1e-12, `(A x)[${i}] at ${n} x ${d}, ${threads} threads, call ${call}`);
        for (let j = 0; j < d; j++) close(atw[j], refAtw[j], 1e-12, `(A^T w)[${j}] at ${n} x ${d}, ${threads} threads, call ${call}`);
      }
      // Small pieces on this thread, so that it yields more than once.
      const gp = sharedFloat64(packedLength(d));
      const piecesG = await gram(t, gp, 'primal', 2000);
      const refG = M.transpose().mmul(M);
      const g = unpackSymmetric(gp, d);
      for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) close(g[i * d + j], refG.get(i, j), 1e-12, `G[${i}][${j}] at ${n} x ${d}, ${threads} threads`);
      const kp = sharedFloat64(packedLength(n));
      const piecesK = await gram(t, kp, 'dual', 2000);
      const refK = M.mmul(M.transpose());
      const k = unpackSymmetric(kp, n);
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) close(k[i * n + j], refK.get(i, j), 1e-12, `K[${i}][${j}] at ${n} x ${d}, ${threads} threads`);
      if (n === 300) assert.ok(piecesG > 2 && piecesK > 2, `pieces ${piecesG}, ${piecesK}`);
      // Still answering products after the Gram calls.
      const x = Float64Array.from({ length: d }, () => 1);
      const ax = t.matVec(new Float64Array(n), x);
      for (let i = 0; i < n; i++) close(ax[i], M.getRow(i).reduce((s, v) => s + v, 0), 1e-12, `row sum ${i}`);
    } finally {
      await t.close();
    }
  }
});

test('DenseTeam.cholesky: the factor choleskyInPlace forms, by blocks of rows over 1 and 2 threads; false for a matrix that is not positive definite', async () => {
  const rand = seeded(9);
  const { A } = sharedRandom(rand, 4, 3); // the threads' block is not used by this op
  for (const threads of [1, 2]) {
    const t = DenseTeam.start(A, threads);
    try {
      for (const n of [1, 9, 100, 131]) {
        // M M^T + n I, packed.
        const m = Array.from({ length: n }, () => Array.from({ length: n }, () => rand() - 0.5));
        const a = sharedFloat64(packedLength(n));
        for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) a[packedAt(i) + j] = m[i].reduce((s, v, k) => s + v * m[j][k], 0) + (i === j ? n : 0);
        const expected = a.slice();
        assert.ok(choleskyInPlace(expected, n));
        const gen = t.cholesky(a, n, 100); // small pieces: blocks of 8 rows
        let blocks = 0;
        let r;
        while (!(r = gen.next()).done) blocks++;
        assert.equal(r.value, true);
        if (n >= 100) assert.ok(blocks > 5, `${blocks} blocks`);
        for (let i = 0; i < a.length; i++) close(a[i], expected[i], 1e-12, `L (packed)[${i}] at n ${n}, ${threads} threads`);
      }
      // Not positive definite: a negative pivot in a later block.
      const n = 40;
      const a = sharedFloat64(packedLength(n));
      for (let i = 0; i < n; i++) a[packedAt(i) + i] = i === 30 ? -1 : 1;
      const gen = t.cholesky(a, n, 10);
      let r;
      while (!(r = gen.next()).done);
      assert.equal(r.value, false);
    } finally {
      await t.close();
    }
  }
});

test('DenseTeam refuses a block or a Gram matrix outside shared memory, and calls after close', async () => {
  assert.throws(() => DenseTeam.start({ rows: 2, cols: 2, data: new Float64Array(4) }, 1), /not in shared memory/);
  const { A } = sharedRandom(seeded(1), 4, 3);
  assert.throws(() => DenseTeam.start(A, 0), /threads must be an integer >= 1/);
  const t = DenseTeam.start(A, 1);
  assert.throws(() => t.gram(new Float64Array(packedLength(3)), 'primal', 100).next(), /not in shared memory/);
  assert.throws(() => t.matVec(new Float64Array(3), new Float64Array(3)), /out/);
  await t.close();
  assert.throws(() => t.matVec(new Float64Array(4), new Float64Array(3)), /closed/);
});

/** The team's threads (private), to make one die. */
const workersOf = (t: DenseTeam): Worker[] => (t as unknown as { team: { workers: Worker[] } }).team.workers;

test('DenseTeam: a thread that died makes the next call fail at once, naming its exit', async () => {
  const { A } = sharedRandom(seeded(2), 50, 20);
  const t = DenseTeam.start(A, 2);
  try {
    t.matVec(new Float64Array(50), new Float64Array(20));
    await workersOf(t)[1].terminate(); // its exit event has run when this resolves
    const t0 = performance.now();
    assert.throws(() => t.matVec(new Float64Array(50), new Float64Array(20)), /a product thread exited/);
    assert.throws(() => t.matTVec(new Float64Array(20), new Float64Array(50)), /a product thread exited/, 'and the call after it');
    assert.ok(performance.now() - t0 < 1000, 'not after a wait');
  } finally {
    await t.close();
  }
});

test('DenseTeam.gram: a thread that dies during the call rejects the wait for its part with its exit; closing during the wait settles it', async () => {
  const rand = seeded(3);
  const { A } = sharedRandom(rand, 1500, 600);
  for (const ending of ['dies', 'closed'] as const) {
    const t = DenseTeam.start(A, 1);
    t.matVec(new Float64Array(1500), new Float64Array(600)); // the thread is up
    // Killed as the call begins: its part (some 1e8 multiply-adds) is never done.
    if (ending === 'dies') void workersOf(t)[0].terminate();
    const gen = t.gram(sharedFloat64(packedLength(600)), 'primal', 1e12); // this thread's part in one piece
    let step = gen.next();
    while (!step.done && !(step.value instanceof Promise)) step = gen.next();
    assert.ok(step.value instanceof Promise, 'the last yield is the threads\' part');
    if (ending === 'dies') await assert.rejects(step.value, /a product thread exited/);
    else {
      const closing = t.close();
      await step.value; // settles (a wait left pending would end this test file early)
      await closing;
    }
    await t.close();
  }
});
