// The coordinator's step with class weights (--class-weight): each sample's z-update against a
// bisection of its own scalar problem, written out here, in both ADMM forms and with the
// WebAssembly kernels or their TypeScript twins; the kernels give the twins' bits with weights
// too; the objective is the weighted mean loss.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ConfigError, classWeighted, flipCorrectedLogistic, logistic, parseClassWeight } from '@admm-share/core';
import { randomVector, seeded, tempDir } from '@admm-share/core/test-support';
import { checkResumedClassWeights } from '../job/resume.js';
import { CHUNK } from '../numerics/admm-kernels.js';
import { AdmmStep } from '../numerics/admm-step.js';
import { readCheckpoint, writeCheckpoint } from '../output/checkpoint.js';

const W = { negative: 0.6, positive: 4.5 };

/** log(1 + e^-m) */
const softplusNeg = (m: number) => (m > 0 ? Math.log1p(Math.exp(-m)) : -m + Math.log1p(Math.exp(m)));

/** The root of an increasing g on [lo, hi] by bisection, to the last bit. */
function bisect(g: (t: number) => number, lo: number, hi: number): number {
  for (let it = 0; it < 2000; it++) {
    const mid = (lo + hi) / 2;
    if (mid === lo || mid === hi) break;
    if (g(mid) > 0) hi = mid;
    else lo = mid;
  }
  return (lo + hi) / 2;
}

const labels = (rand: () => number, n: number) => Float64Array.from({ length: n }, () => (rand() < 0.2 ? 1 : -1));

function shares(rand: () => number, M: number, n: number): Float64Array[] {
  return Array.from({ length: M }, (_, m) => {
    const s = randomVector(rand, n, 2, 0.3 * (m - 1));
    s[0] = 40 * (m + 1);
    s[1] = -25 * (m + 1);
    return s;
  });
}

for (const kernels of [true, false])
  for (const p of [0, 0.2])
    test(`exact form with class weights ${W.negative}/${W.positive}${p ? `, flip-corrected (p = ${p})` : ''}, ${kernels ? 'WebAssembly' : 'TypeScript'}: each zbar solves w_y l(y, M zbar)/N + M rho/2 (zbar - v)^2 (bisection), and the objective is the weighted mean loss`, () => {
      const rand = seeded(`cw-exact-${kernels}-${p}`);
      const N = 41;
      const M = 3;
      const rho = 0.3 / N;
      const alpha = 1.6;
      const c = p / (1 - 2 * p);
      const y = labels(rand, N);
      const loss = classWeighted(p ? flipCorrectedLogistic(p) : logistic, W);
      const coord = new AdmmStep({ variant: 'exact', loss, y, parties: M, lambda: 0.01, rho, alpha, tolerance: { abs: 1e-9, rel: 1e-9 }, kernels });
      assert.equal(coord.webAssembly, kernels);
      try {
        for (let round = 0; round < 3; round++) {
          const uOld = Float64Array.from(coord.dualVar);
          const zOld = Float64Array.from(coord.z);
          const s = shares(rand, M, N);
          coord.step(s);
          let weightedLoss = 0;
          for (let i = 0; i < N; i++) {
            const S = s.reduce((acc, v) => acc + v[i], 0);
            const v = uOld[i] + alpha * (S / M) + (1 - alpha) * zOld[i];
            const yi = y[i];
            const wi = yi > 0 ? W.positive : W.negative;
            // d/dz of w (log(1 + e^(-y M z)) - c y M z)/N + M rho/2 (z - v)^2, increasing in z.
            const g = (z: number) => (-wi * yi * M * (1 / (1 + Math.exp(yi * M * z)) + c)) / N + M * rho * (z - v);
            const r = (wi * (1 + c)) / (N * rho) + 1;
            const want = bisect(g, v - r, v + r);
            assert.ok(Math.abs(coord.z[i] - want) <= 1e-9 * Math.max(1, Math.abs(v)), `round ${round} sample ${i} (y ${yi}): zbar ${coord.z[i]}, bisection ${want}`);
            weightedLoss += wi * (softplusNeg(yi * S) - c * yi * S);
          }
          const f = coord.objective(2);
          const want = weightedLoss / N + 0.01;
          assert.ok(Math.abs(f - want) <= 1e-12 * Math.abs(want), `round ${round}: objective ${f}, weighted mean loss ${want}`);
        }
      } finally {
        coord.close();
      }
    });

test(`paper form with class weights: each z solves w_y l(y, z)/N - y_dual z + rho/2 (z - S)^2 (bisection)`, () => {
  const rand = seeded('cw-paper');
  const N = 37;
  const M = 2;
  const rho = 1 / N;
  const y = labels(rand, N);
  const coord = new AdmmStep({ variant: 'paper', loss: classWeighted(logistic, W), y, parties: M, lambda: 0.01, rho, alpha: 1, tolerance: { abs: 1e-9, rel: 1e-9 } });
  try {
    for (let round = 0; round < 3; round++) {
      const dualOld = Float64Array.from(coord.dualVar);
      const s = shares(rand, M, N);
      coord.step(s);
      for (let i = 0; i < N; i++) {
        const S = s.reduce((acc, v) => acc + v[i], 0);
        const yi = y[i];
        const wi = yi > 0 ? W.positive : W.negative;
        const g = (z: number) => (-wi * yi) / (1 + Math.exp(yi * z)) / N - dualOld[i] + rho * (z - S);
        const r = (wi / N + Math.abs(dualOld[i])) / rho + 1;
        const want = bisect(g, S - r, S + r);
        assert.ok(Math.abs(coord.z[i] - want) <= 1e-9 * Math.max(1, Math.abs(S), Math.abs(dualOld[i] / rho)), `round ${round} sample ${i}: z ${coord.z[i]}, bisection ${want}`);
      }
    }
  } finally {
    coord.close();
  }
});

test('with class weights the step in WebAssembly gives the TypeScript twins\' bits (all passes, prox only; in a team or not, with Anderson or not)', () => {
  const rand = seeded('cw-bits');
  const n = 2 * CHUNK + 777;
  const M = 2;
  const y = labels(rand, n);
  for (const anderson of [0, 3])
    for (const team of [false, true]) {
      const opts = { variant: 'exact' as const, loss: classWeighted(flipCorrectedLogistic(0.1), W), y, parties: M, lambda: 1e-3, rho: 0.05 / n, alpha: 1.6, tolerance: { abs: 1e-6, rel: 1e-4 }, anderson, team };
      const steps = [new AdmmStep(opts), new AdmmStep({ ...opts, kernels: 'prox' }), new AdmmStep({ ...opts, kernels: false })];
      const twins = steps[2];
      try {
        for (const co of steps) co.step(Array.from({ length: M }, () => new Float64Array(n)), true);
        for (let r = 1; r <= 4; r++) {
          const s = shares(rand, M, n).map((v) => v.map((x) => x * 4));
          const b = twins.step(s);
          for (const co of steps.slice(0, 2)) {
            const what = `${co === steps[0] ? 'all kernels' : 'prox kernels'}, anderson ${anderson}, team ${team}, round ${r}`;
            assert.deepEqual(co.step(s), b, `${what}: residuals`);
            assert.deepEqual(Array.from(co.z), Array.from(twins.z), `${what}: z`);
            for (let m = 0; m < M; m++) assert.deepEqual(Array.from(co.cFor(m)), Array.from(twins.cFor(m)), `${what}: party ${m}'s vector`);
            assert.equal(co.objective(1), twins.objective(1), `${what}: objective`);
          }
        }
      } finally {
        for (const co of steps) co.close();
      }
    }
});

test('a checkpoint keeps the class weights, and --resume refuses flags that give others (balanced: counted on the checkpointed training rows)', async (t) => {
  const n = 3;
  const v = () => new Float64Array(n);
  const path = join(tempDir(t), 'checkpoint.bin');
  // Training rows 0, 1, 3 of the label file: one positive of three, balanced 3/4 and 3/2.
  const weights = { negative: 0.75, positive: 1.5 };
  await writeCheckpoint(path, {
    jobId: 'job-w',
    round: 3,
    labelsDigest: 'd',
    samples: { labelRows: { train: Uint32Array.of(0, 1, 3), test: new Uint32Array(0) }, dropped: { train: 1, test: 0 } },
    evaluationSkipped: null,
    setup: { type: 'setup', jobId: 'job-w', lambda: 1e-4, loss: 'logistic', rounds: 100, rho: 0.5, parties: 1, algorithm: 'admm', labelFlip: 0, classWeights: weights },
    admm: { rho: 0.5, c: v(), z: v(), dualVar: v(), sum: v(), a: v(), t: v(), slope: v(), curvature: v(), prevShares: [v()] },
    replay: { round: 3, rho: 0.5, cs: [v()], previousShares: [v()], shares: [v()] },
    last: { stats: { primal: 0, dual: 0, epsPrimal: 1, epsDual: 1, rho: 0.5 }, penaltySq: 0, converged: false, test: undefined, seconds: 1, roundSeconds: 1, bytes: { toCoordinator: 0, fromCoordinator: 0 }, epsilonSpent: {} },
  });
  const cp = readCheckpoint(path);
  assert.deepEqual(cp.setup.classWeights, weights);
  const labels = { file: 'labels.csv', ids: ['a', 'b', 'c', 'd'], y: Float64Array.of(-1, 1, 1, -1), classes: { negative: 'no', positive: 'yes' } };
  checkResumedClassWeights(cp, parseClassWeight('balanced'), labels);
  checkResumedClassWeights(cp, parseClassWeight('no=0.75,yes=1.5'), labels);
  for (const [spec, message] of [
    [undefined, /the checkpointed job trains with class weights 0\.75 \(class -1\) and 1\.5 \(class \+1\), these flags give no class weights: resume it with its --class-weight/],
    [parseClassWeight('yes=2'), /these flags give class weights 1 \(class -1\) and 2 \(class \+1\)/],
  ] as const)
    assert.throws(() => checkResumedClassWeights(cp, spec, labels), (e: unknown) => e instanceof ConfigError && message.test(e.message));
  // A job checkpointed without weights is not resumed with them.
  const plain = { ...cp, setup: { ...cp.setup, classWeights: undefined } };
  checkResumedClassWeights(plain, undefined, labels);
  assert.throws(() => checkResumedClassWeights(plain, parseClassWeight('balanced'), labels), /trains with no class weights, these flags give class weights 0\.75/);
});
