// The coordinator's stopping rule pinned down: the primal and dual residuals and their
// tolerances (Boyd et al. 2011, eq. 3.12, written for each ADMM form) recomputed here from the
// shares alone, round after round; and a checkpoint (snapshot, restore, lastShare) that
// continues exactly where it left off. A wrong residual stops training too early or never,
// which the end-to-end tests would not notice on easy problems. docs/mutation.md says why.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { logistic, squared } from '@admm-share/core';
import { randomVector, seeded } from '@admm-share/core/test-support';
import { AdmmStep, type AdmmSnapshot } from '../numerics/admm-step.js';

const norm2 = (v: ArrayLike<number>) => Array.from(v).reduce((acc, x) => acc + x * x, 0);

function close(actual: number, expected: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= 1e-11 * Math.max(1, Math.abs(expected)), `${what}: got ${actual}, expected ${expected}`);
}

/** Different shares every round, some rows the same as last round, so no residual term vanishes. */
function sharesFor(rand: () => number, M: number, N: number): Float64Array[] {
  return Array.from({ length: M }, (_, m) => randomVector(rand, N, 1 + m));
}

test('exact form: primal, dual and both tolerances are those of the sharing problem over M N coordinates', () => {
  const rand = seeded('admm-exact-residuals');
  const N = 7;
  const M = 3;
  const rho = 0.8;
  const alpha = 1.6;
  const tolerance = { abs: 1e-3, rel: 2e-2 };
  const y = randomVector(rand, N, 2);
  const coord = new AdmmStep({ variant: 'exact', loss: squared, y, parties: M, lambda: 0.1, rho, alpha, tolerance });
  let prevShares = Array.from({ length: M }, () => new Float64Array(N));
  let zOld = new Float64Array(N);
  let uOld = new Float64Array(N);
  let prevMean = new Float64Array(N);
  for (let round = 0; round < 4; round++) {
    const shares = sharesFor(rand, M, N);
    const stats = coord.step(shares);
    // zbar = argmin (1/N) sum_i l_i(M zbar_i) + M rho / 2 ||zbar - v||^2 with v = u + relaxed mean; squared loss in closed form.
    const mean = Float64Array.from({ length: N }, (_, i) => shares.reduce((acc, s) => acc + s[i], 0) / M);
    const v = mean.map((mi, i) => uOld[i] + alpha * mi + (1 - alpha) * zOld[i]);
    const z = v.map((vi, i) => (y[i] / N + rho * vi) / (M / N + rho));
    const u = v.map((vi, i) => vi - z[i]);
    // The sharing problem's x_m and z_m: x_m = s_m, z_m = s_m + zbar - mean (Boyd 7.3), in M N coordinates.
    const zm = shares.map((s) => s.map((si, i) => si + z[i] - mean[i]));
    const zmOld = prevShares.map((s, m) => s.map((si, i) => si + zOld[i] - prevMean[i]));
    const primal = Math.sqrt(M * norm2(mean.map((mi, i) => mi - z[i])));
    const dual = rho * Math.sqrt(zm.reduce((acc, zk, m) => acc + norm2(zk.map((x, i) => x - zmOld[m][i])), 0));
    const sqrtDim = Math.sqrt(M * N);
    const epsPrimal = sqrtDim * tolerance.abs + tolerance.rel * Math.sqrt(Math.max(shares.reduce((acc, s) => acc + norm2(s), 0), zm.reduce((acc, zk) => acc + norm2(zk), 0)));
    const epsDual = sqrtDim * tolerance.abs + tolerance.rel * rho * Math.sqrt(M * norm2(u));
    close(stats.primal, primal, `round ${round}: primal`);
    close(stats.dual, dual, `round ${round}: dual`);
    close(stats.epsPrimal, epsPrimal, `round ${round}: epsPrimal`);
    close(stats.epsDual, epsDual, `round ${round}: epsDual`);
    assert.equal(stats.rho, rho);
    for (let m = 0; m < M; m++) assert.deepEqual(coord.lastShare(m), shares[m], `round ${round}: party ${m}'s last share`);
    prevShares = shares.map((s) => s.slice());
    prevMean = mean;
    zOld = z;
    uOld = u;
  }
});

test('paper form: primal ||S - z||, dual rho sqrt(M) ||z - z_old||, tolerances over N coordinates', () => {
  const rand = seeded('admm-paper-residuals');
  const N = 6;
  const M = 2;
  const rho = 1.7;
  const tolerance = { abs: 3e-3, rel: 5e-2 };
  const y = randomVector(rand, N, 2);
  const coord = new AdmmStep({ variant: 'paper', loss: squared, y, parties: M, lambda: 0.1, rho, alpha: 1, tolerance });
  let zOld = new Float64Array(N);
  let ydOld = new Float64Array(N);
  for (let round = 0; round < 4; round++) {
    const shares = sharesFor(rand, M, N);
    const stats = coord.step(shares);
    const S = Float64Array.from({ length: N }, (_, i) => shares.reduce((acc, s) => acc + s[i], 0));
    const z = S.map((Si, i) => (y[i] / N + ydOld[i] + rho * Si) / (1 / N + rho));
    const yd = S.map((Si, i) => ydOld[i] + rho * (Si - z[i]));
    close(stats.primal, Math.sqrt(norm2(S.map((Si, i) => Si - z[i]))), `round ${round}: primal`);
    close(stats.dual, rho * Math.sqrt(M) * Math.sqrt(norm2(z.map((zi, i) => zi - zOld[i]))), `round ${round}: dual`);
    close(stats.epsPrimal, Math.sqrt(N) * tolerance.abs + tolerance.rel * Math.sqrt(Math.max(norm2(S), norm2(z))), `round ${round}: epsPrimal`);
    close(stats.epsDual, Math.sqrt(N) * tolerance.abs + tolerance.rel * Math.sqrt(norm2(yd)), `round ${round}: epsDual`);
    zOld = z;
    ydOld = yd;
  }
});

test('epsPrimal takes the larger of ||s|| and ||z||, in both forms', () => {
  const opts = { parties: 2, lambda: 0.1, rho: 1e-3, alpha: 1, tolerance: { abs: 0, rel: 1 } };
  // Paper form, one sample: S = 10 and z near 0 (the loss pulls hard), or S = 0 and z far from 0.
  const paper = { ...opts, variant: 'paper' as const, loss: squared };
  const big = new AdmmStep({ ...paper, y: Float64Array.of(0) });
  const s1 = big.step([Float64Array.of(4), Float64Array.of(6)]);
  assert.ok(Math.abs(big.z[0]) < 1, `the case: z = ${big.z[0]}`);
  close(s1.epsPrimal, 10, 'paper: S dominates');
  const pulled = new AdmmStep({ ...paper, y: Float64Array.of(50) });
  const s2 = pulled.step([Float64Array.of(0), Float64Array.of(0)]);
  assert.ok(Math.abs(pulled.z[0]) > 1, `the case: z = ${pulled.z[0]}`);
  close(s2.epsPrimal, Math.abs(pulled.z[0]), 'paper: z dominates');
  // Exact form: sum_m ||z_m||^2 = sum_m ||s_m||^2 + M (zbar^2 - mean^2), so ||s|| wins when zbar is pulled below the mean.
  const exact = { ...opts, variant: 'exact' as const, loss: squared };
  const shrunk = new AdmmStep({ ...exact, y: Float64Array.of(0) });
  const s3 = shrunk.step([Float64Array.of(4), Float64Array.of(6)]);
  assert.ok(Math.abs(shrunk.z[0]) < 1, `the case: zbar = ${shrunk.z[0]}`);
  close(s3.epsPrimal, Math.sqrt(16 + 36), 'exact: s dominates');
  const grown = new AdmmStep({ ...exact, y: Float64Array.of(50) });
  const s4 = grown.step([Float64Array.of(1), Float64Array.of(-1)]);
  const zb = grown.z[0];
  assert.ok(Math.abs(zb) > 1, `the case: zbar = ${zb}`);
  close(s4.epsPrimal, Math.sqrt((1 + zb) ** 2 + (-1 + zb) ** 2), 'exact: z dominates');
});

function copySnapshot(s: AdmmSnapshot): AdmmSnapshot {
  const copy = (v: Float64Array) => v.slice();
  return {
    rho: s.rho,
    c: copy(s.c),
    z: copy(s.z),
    dualVar: copy(s.dualVar),
    sum: copy(s.sum),
    a: copy(s.a),
    t: copy(s.t),
    slope: copy(s.slope),
    curvature: copy(s.curvature),
    prevShares: s.prevShares.map(copy),
  };
}

test('a coordinator restored from a snapshot continues exactly like the original', () => {
  for (const variant of ['exact', 'paper'] as const) {
    const rand = seeded(`admm-restore-${variant}`);
    const N = 9;
    const M = 3;
    const y = Float64Array.from({ length: N }, () => (rand() < 0.5 ? -1 : 1));
    const opts = { variant, loss: logistic, y, parties: M, lambda: 0.1, rho: 0.3, alpha: 1.5, tolerance: { abs: 1e-4, rel: 1e-3 } };
    const original = new AdmmStep(opts);
    for (let r = 0; r < 3; r++) original.step(sharesFor(rand, M, N));
    original.rho = 0.45; // adapted
    const snap = copySnapshot(original.snapshot());
    assert.equal(snap.rho, 0.45);
    const restored = new AdmmStep(opts);
    restored.restore(snap);
    assert.equal(restored.rho, 0.45);
    for (let m = 0; m < M; m++) assert.deepEqual(restored.lastShare(m), original.lastShare(m), `${variant}: party ${m}'s share`);
    for (const key of ['c', 'z', 'dualVar', 'sum'] as const) assert.deepEqual(restored[key], original[key], `${variant}: ${key}`);
    for (let r = 0; r < 3; r++) {
      const shares = sharesFor(rand, M, N);
      assert.deepEqual(restored.step(shares.map((s) => s.slice())), original.step(shares), `${variant} round ${r}: the same stats`);
      assert.deepEqual(restored.c, original.c, `${variant} round ${r}: the same broadcast`);
      assert.deepEqual(restored.snapshot(), original.snapshot(), `${variant} round ${r}: the same state`);
    }
  }
});

test('restore refuses a snapshot of another N or number of parties', () => {
  const y = Float64Array.of(1, -1, 1, 1);
  const opts = { variant: 'exact' as const, loss: logistic, parties: 2, lambda: 0.1, rho: 1, alpha: 1, tolerance: { abs: 1e-4, rel: 1e-3 } };
  const snap = copySnapshot(new AdmmStep({ ...opts, y }).snapshot());
  const message = 'checkpoint does not match this job (N or number of parties)';
  assert.throws(() => new AdmmStep({ ...opts, y: y.subarray(0, 3) }).restore(snap), (e: unknown) => e instanceof RangeError && e.message === message);
  assert.throws(() => new AdmmStep({ ...opts, y, parties: 3 }).restore(snap), (e: unknown) => e instanceof RangeError && e.message === message);
  assert.doesNotThrow(() => new AdmmStep({ ...opts, y }).restore(snap));
});

test('step names what is wrong with the shares', () => {
  const coord = new AdmmStep({ variant: 'exact', loss: logistic, y: Float64Array.of(1, -1, 1), parties: 2, lambda: 0.1, rho: 1, alpha: 1, tolerance: { abs: 1e-4, rel: 1e-3 } });
  assert.throws(() => coord.step([new Float64Array(3)]), { name: 'RangeError', message: 'expected 2 shares, got 1' });
  assert.throws(() => coord.step([new Float64Array(3), new Float64Array(2)]), { name: 'RangeError', message: 'share has length 2, expected 3' });
});

test("the z-update's warm start (the last solution moved along its slope and curvature) leaves about one exponential per sample", () => {
  // The step counts the prox's exponentials, one per Newton step (AdmmStep.exponentials,
  // in WebAssembly or in losses.ts). Measured on rounds 7-12 of this seeded run: 1.00-1.02 per
  // sample; with the curvature term's sign flipped 1.4-1.6, with the prediction's sign flipped
  // about 2-3, from the old solution about 2.7.
  for (const [variant, move] of [['exact', 0.05], ['paper', 0.2]] as const) {
    const rand = seeded(`admm-warm-${variant}`);
    const N = 300;
    const M = 3;
    const y = Float64Array.from({ length: N }, () => (rand() < 0.5 ? -1 : 1));
    const coord = new AdmmStep({ variant, loss: logistic, y, parties: M, lambda: 0.1, rho: 0.5, alpha: 1.5, tolerance: { abs: 1e-4, rel: 1e-3 } });
    let shares = Array.from({ length: M }, () => randomVector(rand, N, 2));
    let exps = 0;
    for (let round = 1; round <= 12; round++) {
      shares = shares.map((s) => s.map((v) => v + (rand() - 0.5) * move));
      coord.step(shares);
      assert.ok(coord.exponentials >= N, `${variant}, round ${round}: at least one exponential a sample (${coord.exponentials})`);
      if (round > 6) exps += coord.exponentials;
    }
    assert.ok(exps <= 1.15 * 6 * N, `${variant}: ${(exps / (6 * N)).toFixed(2)} exponentials per sample and round in the prox`);
  }
});
