import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Matrix, solve } from 'ml-matrix';
import { DataError, InternalError, csrFromDense, csrHStack, fitCentral, flipCorrectedLogistic, logistic } from '@admm-share/core';
import { normal, seeded, tempDir } from '@admm-share/core/test-support';
import { CHUNK } from '../numerics/admm-kernels.js';
import { AdmmStep } from '../numerics/admm-step.js';
import { Anderson } from '../numerics/anderson.js';
import { ANDERSON_CHUNK } from '../numerics/anderson-team.js';
import { type Checkpoint, readCheckpoint, writeCheckpoint } from '../output/checkpoint.js';

/** F(v) = a v + b coordinate-wise, a in [0.5, 0.995]: a contraction whose fixed point b / (1 - a) is known exactly. */
function linearMap(dim: number) {
  const rng = seeded('anderson-linear');
  const a = Float64Array.from({ length: dim }, () => 0.5 + 0.495 * rng());
  const b = Float64Array.from({ length: dim }, () => normal(rng));
  const fixed = a.map((ai, i) => b[i] / (1 - ai));
  const apply = (out: Float64Array, v: Float64Array) => {
    for (let i = 0; i < dim; i++) out[i] = a[i] * v[i] + b[i];
  };
  const error = (v: Float64Array) => {
    let e = 0;
    let s = 0;
    for (let i = 0; i < dim; i++) {
      e += (v[i] - fixed[i]) ** 2;
      s += fixed[i] ** 2;
    }
    return Math.sqrt(e / s);
  };
  return { apply, error };
}

test('Anderson on a linear contraction: reaches the known fixed point to 1e-10 in a small fraction of the plain iterations', () => {
  const dim = 400;
  const { apply, error } = linearMap(dim);
  const f = new Float64Array(dim);
  // Plain iteration, counted here.
  const v = new Float64Array(dim);
  let plain = 0;
  while (error(v) > 1e-10 && plain < 100_000) {
    apply(f, v);
    v.set(f);
    plain++;
  }
  const aa = new Anderson(dim, 5);
  let accelerated = 0;
  while (error(aa.point) > 1e-10 && accelerated < 10_000) {
    apply(f, aa.point);
    aa.next(f);
    accelerated++;
  }
  assert.ok(error(aa.point) <= 1e-10, `Anderson did not converge: error ${error(aa.point)}`);
  assert.ok(plain > 1000, `sanity: the plain iteration needs ${plain}`);
  assert.ok(accelerated * 5 < plain, `Anderson took ${accelerated} iterations, the plain iteration ${plain}`);
  assert.ok(aa.counts.extrapolated > 0);
});

test('Anderson safeguard: an extrapolated point whose residual grew is rejected for the plain step from the last point kept, and the memory starts afresh', () => {
  const aa = new Anderson(2, 3);
  // First call: no history, plain.
  assert.equal(aa.next(Float64Array.of(1, 1)), 'plain');
  assert.deepEqual(Array.from(aa.point), [1, 1]);
  // Second: one difference, so an extrapolation. g0 = (1,1) at (0,0), g1 = (0.5, 0) at (1,1):
  // gamma = argmin ||g1 - gamma (g1 - g0)||, i.e. dG = (-0.5, -1), gamma = (g1.dG)/(dG.dG) = -0.25/1.25 = -0.2
  // (up to the 1e-8 regularisation), point = f1 - gamma (f1 - f0) = (1.5, 1) + 0.2 (0.5, 0) = (1.6, 1).
  assert.equal(aa.next(Float64Array.of(1.5, 1)), 'extrapolated');
  assert.ok(Math.abs(aa.point[0] - 1.6) < 1e-7 && Math.abs(aa.point[1] - 1) < 1e-7, `point ${Array.from(aa.point)}`);
  // Third: F at the extrapolated point has a larger residual than 0.5 -> rejected; back to f1.
  assert.equal(aa.next(Float64Array.of(5, 5)), 'rejected');
  assert.deepEqual(Array.from(aa.point), [1.5, 1]);
  assert.deepEqual(aa.counts, { extrapolated: 0, rejected: 1 });
  // The memory is empty again: the next step is plain.
  assert.equal(aa.next(Float64Array.of(1.75, 1)), 'plain');
  assert.deepEqual(Array.from(aa.point), [1.75, 1]);
});

test('Anderson snapshot and restore: the restored iteration continues bit for bit', () => {
  const dim = 50;
  const { apply } = linearMap(dim);
  const f = new Float64Array(dim);
  const a = new Anderson(dim, 4);
  for (let k = 0; k < 9; k++) {
    apply(f, a.point);
    a.next(f);
  }
  const b = new Anderson(dim, 4);
  const snap = a.snapshot();
  b.restore({ ...snap, point: snap.point.slice(), prevF: snap.prevF.slice(), prevG: snap.prevG.slice(), dF: snap.dF.map((x) => x.slice()), dG: snap.dG.map((x) => x.slice()), gram: snap.gram.slice(), rhs: snap.rhs.slice() });
  for (let k = 0; k < 6; k++) {
    apply(f, a.point);
    const sa = a.next(f);
    apply(f, b.point);
    const sb = b.next(f);
    assert.equal(sa, sb);
    assert.deepEqual(Array.from(b.point), Array.from(a.point), `step ${k}`);
  }
  assert.deepEqual(b.counts, a.counts);
});

test('Anderson with its passes shared with a worker thread: the same bits as in one thread, and a snapshot and a close() continue bit for bit', () => {
  // Several chunks, the last of an odd length (the kernels go two elements at a time).
  const dim = 2 * ANDERSON_CHUNK + 1001;
  const { apply, error } = linearMap(dim);
  const serial = new Anderson(dim, 4, false);
  const inTeam = new Anderson(dim, 4, true);
  const twin = new Anderson(dim, 4, true);
  assert.equal(serial.parallel, false);
  assert.equal(inTeam.parallel, true);
  assert.ok(inTeam.input.buffer instanceof SharedArrayBuffer, 'the worker reads F(v) where the caller wrote it');
  const f = new Float64Array(dim);
  try {
    const run = (aa: Anderson) => {
      apply(aa.input, aa.point);
      return aa.next(aa.input);
    };
    for (let k = 0; k < 12; k++) {
      const steps = [run(serial), run(inTeam), run(twin)];
      assert.equal(steps[1], steps[2], `step ${k}`);
      assert.equal(steps[1], steps[0], `step ${k}`);
      // The chunks' sums are added in the chunks' order, whichever thread took them.
      assert.deepEqual(Array.from(inTeam.point), Array.from(serial.point), `step ${k}: a team and one thread`);
      assert.deepEqual(Array.from(twin.point), Array.from(inTeam.point), `step ${k}: two runs in a team`);
      // A plain array as F(v) is copied into the shared input first.
      if (k === 5) {
        apply(f, inTeam.point);
        apply(twin.input, twin.point);
        assert.equal(inTeam.next(f), twin.next(twin.input));
        assert.deepEqual(Array.from(twin.point), Array.from(inTeam.point), 'F(v) in a plain array');
        apply(f, serial.point);
        serial.next(f);
      }
      // The worker ended and, on the next call, a new one started: nothing changes.
      if (k === 7) inTeam.close();
    }
    assert.ok(inTeam.counts.extrapolated > 0);
    assert.ok(error(inTeam.point) < 0.5, `converging (the error at the start is 1): error ${error(inTeam.point)}`);
    // A snapshot of the iteration in a team restored into another continues bit for bit.
    const restored = new Anderson(dim, 4, true);
    try {
      const snap = inTeam.snapshot();
      restored.restore({ ...snap, point: snap.point.slice(), prevF: snap.prevF.slice(), prevG: snap.prevG.slice(), dF: snap.dF.map((x) => x.slice()), dG: snap.dG.map((x) => x.slice()), gram: snap.gram.slice(), rhs: snap.rhs.slice() });
      for (let k = 0; k < 4; k++) {
        assert.equal(run(restored), run(inTeam));
        assert.deepEqual(Array.from(restored.point), Array.from(inTeam.point), `restored, step ${k}`);
      }
    } finally {
      restored.close();
    }
  } finally {
    inTeam.close();
    twin.close();
  }
});

/** An independent party: x = argmin lambda/2 ||x||^2 + rho/2 ||D x - w||^2 by a dense solve, w = released - c. */
function party(D: number[][], lambda: number, rho: number) {
  const d = D[0].length;
  const Dm = new Matrix(D);
  const A = Dm.transpose().mmul(Dm).mul(rho).add(Matrix.eye(d).mul(lambda));
  const share = new Float64Array(D.length);
  let penaltySq = 0;
  return {
    share,
    penaltySq: () => penaltySq,
    update(c: Float64Array) {
      const w = Matrix.columnVector(Array.from(share, (s, i) => s - c[i]));
      const x = solve(A, Dm.transpose().mmul(w).mul(rho));
      penaltySq = x.to1DArray().reduce((acc, v) => acc + v * v, 0);
      share.set(Dm.mmul(x).to1DArray());
    },
  };
}

function problem(seed: string, N = 300) {
  const rng = seeded(seed);
  const widths = [4, 3, 5];
  const blocks = widths.map((w) => Array.from({ length: N }, () => Array.from({ length: w }, () => normal(rng))));
  const y = Float64Array.from({ length: N }, (_, i) => (blocks.reduce((acc, b) => acc + b[i].reduce((s, v) => s + v, 0), 0) + 2 * normal(rng) > 0 ? 1 : -1));
  return { N, widths, blocks, y };
}

function coordinator(y: Float64Array, M: number, lambda: number, rho: number, anderson: number) {
  return new AdmmStep({ variant: 'exact', loss: logistic, y, parties: M, lambda, rho, alpha: 1.6, tolerance: { abs: 0, rel: 0 }, anderson });
}

test('exact ADMM with Anderson acceleration (each party its own c): the central optimum to 1e-9, in fewer rounds than without', () => {
  const { N, widths, blocks, y } = problem('anderson-admm');
  const lambda = 1e-3;
  const rho = 0.01 / N;
  const fStar = fitCentral(csrHStack(blocks.map((b, m) => csrFromDense(b, widths[m]))), y, logistic, lambda).objective;
  /** Rounds until the objective of the parties' models, computed here, is within 1e-9 of f*. */
  const roundsTo = (anderson: number) => {
    const parties = blocks.map((b) => party(b, lambda, rho));
    const co = coordinator(y, blocks.length, lambda, rho, anderson);
    co.step(parties.map((p) => p.share), true);
    for (let r = 1; r <= 3000; r++) {
      parties.forEach((p, m) => p.update(co.cFor(m)));
      co.step(parties.map((p) => p.share));
      let loss = 0;
      for (let i = 0; i < N; i++) {
        const s = parties.reduce((acc, p) => acc + p.share[i], 0);
        loss += Math.log1p(Math.exp(-y[i] * s));
      }
      const f = loss / N + (lambda / 2) * parties.reduce((acc, p) => acc + p.penaltySq(), 0);
      assert.ok(f >= fStar * (1 - 1e-12), `objective ${f} below f* ${fStar}`);
      if (f - fStar <= 1e-9 * fStar) return { rounds: r, co };
    }
    return { rounds: Infinity, co };
  };
  const plain = roundsTo(0);
  const fast = roundsTo(5);
  assert.equal(plain.co.accelerationCounts, undefined);
  assert.ok(Number.isFinite(plain.rounds), 'the plain iteration converges');
  assert.ok(fast.co.accelerationCounts!.extrapolated > 0);
  assert.ok(fast.rounds * 2 <= plain.rounds, `Anderson ${fast.rounds} rounds, plain ${plain.rounds}`);
});

test('the step shared with a worker thread, and the step with the TypeScript twins of the WebAssembly loss and prox, send every party what one thread sends: the same vectors, residuals and objective, bit for bit, with acceleration and the flip-corrected loss, and after a restore', () => {
  // Several chunks, the last one short: the threads take them as they come.
  const { N, blocks, y } = problem('step-split', 2 * CHUNK + 517);
  const lambda = 1e-3;
  const rho = 0.01 / N;
  const M = blocks.length;
  const cases = [
    { variant: 'exact', anderson: 4, loss: logistic },
    // The worker makes the loss again from its name and flip probability: a plain logistic there would change its samples.
    { variant: 'exact', anderson: 0, loss: flipCorrectedLogistic(0.2) },
    { variant: 'paper', anderson: 0, loss: logistic },
  ] as const;
  for (const { variant, anderson, loss } of cases) {
    const what = `${variant}, anderson ${anderson}, flip ${loss.labelFlip ?? 0}`;
    const opts = { variant, loss, y, parties: M, lambda, rho, alpha: variant === 'exact' ? 1.6 : 1, tolerance: { abs: 1e-4, rel: 1e-3 }, anderson };
    const serial = new AdmmStep({ ...opts, team: false });
    const inTeam = new AdmmStep({ ...opts, team: true });
    const twins = new AdmmStep({ ...opts, team: false, kernels: false });
    const resumed = new AdmmStep({ ...opts, team: false });
    assert.equal(serial.webAssembly, true);
    assert.equal(twins.webAssembly, false);
    assert.equal(serial.teamed, false);
    assert.equal(inTeam.teamed, true);
    try {
      const runs = [serial, inTeam, twins].map((co) => ({ co, parties: blocks.map((b) => party(b, lambda, rho)) }));
      for (const { co } of runs) co.step(blocks.map(() => new Float64Array(N)), true);
      for (let r = 1; r <= 12; r++) {
        const [a, b, c] = runs.map(({ co, parties }) => {
          parties.forEach((p, m) => p.update(co.cFor(m)));
          return co.step(parties.map((p) => p.share));
        });
        // The chunks' sums are added in the chunks' order, whichever thread took them.
        assert.deepEqual(b, a, `${what}, round ${r}: the residuals`);
        assert.deepEqual(c, a, `${what}, round ${r}: the residuals with the twins`);
        // Round 3's is never asked for: the worker thread's sum of it is still under way, or
        // done, when round 4's step begins.
        if (r !== 3) assert.equal(inTeam.objective(1), serial.objective(1), `${what}, round ${r}: the objective`);
        assert.equal(twins.objective(1), serial.objective(1), `${what}, round ${r}: the objective with the twins`);
        assert.equal(twins.exponentials, serial.exponentials, `${what}, round ${r}: the prox's exponentials`);
        const same = (u: Float64Array, v: Float64Array, where: string) => assert.deepEqual(Array.from(v), Array.from(u), where);
        for (let m = 0; m < M; m++) same(serial.cFor(m), inTeam.cFor(m), `${what}, round ${r}, party ${m}`);
        for (let m = 0; m < M; m++) same(serial.cFor(m), twins.cFor(m), `${what}, round ${r}, party ${m}, with the twins`);
        // The step in a team: its snapshot (its arrays in shared memory) goes on in one thread as it did.
        if (r > 6) resumed.step(runs[1].parties.map((p) => p.share));
        if (r === 6) {
          resumed.restore(inTeam.snapshot());
          // The restored coordinator sums the objective's loss itself, as the step did.
          assert.equal(resumed.objective(1), inTeam.objective(1), `${what}, the objective after a restore`);
        }
        if (r >= 6) for (let m = 0; m < M; m++) same(inTeam.cFor(m), resumed.cFor(m), `${what}, restored after round 6, round ${r}, party ${m}`);
      }
    } finally {
      for (const co of [serial, inTeam, twins, resumed]) co.close();
    }
  }
});

test('a worker thread that fails is reported by the first step it takes part in, with its message, and by every later step', () => {
  const { N, blocks, y } = problem('step-split-failure');
  // The worker makes the loss again by its name: one it does not know fails it as it starts.
  const loss = { ...logistic, name: 'hinge' as unknown as typeof logistic.name };
  const co = new AdmmStep({ variant: 'exact', loss, y, parties: blocks.length, lambda: 1e-3, rho: 0.01 / N, alpha: 1.6, tolerance: { abs: 1e-4, rel: 1e-3 }, anderson: 0, team: true });
  const failed = (err: unknown): boolean => err instanceof InternalError && /in the coordinator's step worker thread/.test(err.message) && /hinge/.test(err.message);
  try {
    const zeros = blocks.map(() => new Float64Array(N));
    // A step the thread has not begun by the time the main thread is done goes on without it
    // (ThreadTeam.waitOrSkip), so the first steps may pass while the thread starts.
    const t0 = performance.now();
    let steps = 0;
    for (;;) {
      try {
        co.step(zeros);
      } catch (err) {
        assert.ok(failed(err), `the thread's failure, not ${String(err)}`);
        break;
      }
      steps++;
      assert.ok(performance.now() - t0 < 10_000, `reported within 10 s, not after ${steps} steps`);
    }
    assert.throws(() => co.step(zeros), failed, 'the next step');
  } finally {
    co.close();
  }
});

test('a checkpoint keeps Anderson acceleration: the restored coordinator sends every party the same vectors as the uninterrupted one; a damaged state is refused', async (t) => {
  const { N, blocks, y } = problem('anderson-checkpoint');
  const lambda = 1e-3;
  const rho = 0.01 / N;
  const M = blocks.length;
  const parties = blocks.map((b) => party(b, lambda, rho));
  const co = coordinator(y, M, lambda, rho, 4);
  co.step(parties.map((p) => p.share), true);
  for (let r = 1; r <= 8; r++) {
    parties.forEach((p, m) => p.update(co.cFor(m)));
    co.step(parties.map((p) => p.share));
  }
  const path = join(tempDir(t), 'checkpoint.bin');
  const v = () => new Float64Array(N);
  const cp: Omit<Checkpoint, 'format'> = {
    jobId: 'job-a',
    round: 8,
    labelsDigest: 'd',
    samples: { labelRows: { train: Uint32Array.from({ length: N }, (_, i) => i), test: new Uint32Array(0) }, dropped: { train: 0, test: 0 } },
    evaluationSkipped: null,
    setup: { type: 'setup', jobId: 'job-a', lambda, loss: 'logistic', rounds: 100, rho, parties: M, algorithm: 'admm', labelFlip: 0 },
    admm: co.snapshot(),
    replay: { round: 8, rho, cs: blocks.map(v), previousShares: blocks.map(v), shares: blocks.map(v) },
    last: { stats: { primal: 0, dual: 0, epsPrimal: 1, epsDual: 1, rho }, penaltySq: 0, converged: false, test: undefined, seconds: 1, roundSeconds: 1, bytes: { toCoordinator: 0, fromCoordinator: 0 }, epsilonSpent: {} },
  };
  await writeCheckpoint(path, cp);
  const restored = coordinator(y, M, lambda, rho, 4);
  restored.restore(readCheckpoint(path).admm);
  // Both continue with the same parties' answers.
  const twins = blocks.map((b) => party(b, lambda, rho));
  twins.forEach((p, m) => p.share.set(parties[m].share));
  for (let r = 9; r <= 14; r++) {
    parties.forEach((p, m) => p.update(co.cFor(m)));
    twins.forEach((p, m) => p.update(restored.cFor(m)));
    co.step(parties.map((p) => p.share));
    restored.step(twins.map((p) => p.share));
    for (let m = 0; m < M; m++) assert.deepEqual(Array.from(restored.cFor(m)), Array.from(co.cFor(m)), `round ${r}, party ${m}`);
  }
  assert.deepEqual(restored.accelerationCounts, co.accelerationCounts);
  // A job without acceleration cannot take this checkpoint, nor the reverse.
  assert.throws(() => coordinator(y, M, lambda, rho, 0).restore(readCheckpoint(path).admm), /written with Anderson acceleration; this job runs without it/);
  // More differences than the memory: refused, naming the field.
  const snap = co.snapshot();
  const state = snap.anderson!.state;
  await writeCheckpoint(path, { ...cp, admm: { ...snap, anderson: { ...snap.anderson!, memory: 1, state: { ...state, dF: [v(), v()].map(() => new Float32Array((M + 2) * N)), dG: [v(), v()].map(() => new Float32Array((M + 2) * N)) } } } });
  assert.throws(() => readCheckpoint(path), (err: unknown) => err instanceof DataError && /admm\.anderson\.state: holds 2 differences, more than its memory 1/.test(err.message));
  // The differences are single precision, as kept: double-precision ones (format 4's) are refused.
  await writeCheckpoint(path, { ...cp, admm: { ...snap, anderson: { ...snap.anderson!, state: { ...state, dF: [new Float64Array((M + 2) * N) as unknown as Float32Array], dG: [new Float32Array((M + 2) * N)], gram: Float64Array.of(1), rhs: Float64Array.of(0) } } } });
  assert.throws(() => readCheckpoint(path), (err: unknown) => err instanceof DataError && /admm\.anderson\.state\.dF\[0\]: expected a Float32Array/.test(err.message));
});
