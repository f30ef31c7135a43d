// The logistic proximal map pinned down where the accuracy tests leave room (docs/mutation.md):
// its cost. The z-update runs it on every sample every round, and loss.ts promises one or two
// exponentials per sample from a good warm start; a guard or stopping rule that is wrong
// still converges (the accuracy tests pass) but spends up to 100 Newton steps per sample.
// Counted by proxInto itself, which returns its exponentials (one per Newton step); the step's
// WebAssembly twin counts the same (wasm-kernels.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { logistic, lossByName, prox, sigmoidNeg, squared } from '../index.js';
import { seeded } from './support.js';

/** Samples whose solutions s = y t spread over s < -1, -1 <= s <= 1 and s > 1, both signs of y. */
function problem(n: number, seed: string) {
  const r = seeded(seed);
  const y = Float64Array.from({ length: n }, () => (r() < 0.5 ? -1 : 1));
  const a = Float64Array.from({ length: n }, () => -6 + 12 * r());
  return { y, a };
}

function solve(t: Float64Array, y: Float64Array, a: Float64Array, kappa: number, weight: number) {
  const slope = new Float64Array(t.length);
  const curvature = new Float64Array(t.length);
  const exps = logistic.proxInto(t, slope, curvature, y, a, kappa, weight);
  return { slope, curvature, exps };
}

test('logistic prox from its own solution: one exponential per sample', () => {
  const n = 400;
  const { y, a } = problem(n, 'exp-own');
  for (const [kappa, weight] of [[1, 1], [0.2, 1], [5, 0.5]]) {
    const t = a.slice();
    solve(t, y, a, kappa, weight);
    const s = Array.from(t, (v, i) => v * y[i]);
    assert.ok(s.some((v) => v < -1) && s.some((v) => v > 1) && s.some((v) => Math.abs(v) < 1), 'solutions on every side of the scale switch');
    const again = t.slice();
    const calls = solve(again, y, a, kappa, weight).exps;
    assert.equal(calls, n, `kappa ${kappa} weight ${weight}`);
    for (let i = 0; i < n; i++) assert.ok(Math.abs(again[i] - t[i]) <= 1e-14 * Math.max(1, Math.abs(t[i])), `sample ${i} stays at its solution`);
  }
});

test('logistic prox from a second-order prediction of a nearby problem: about one exponential per sample', () => {
  const n = 400;
  const { y, a } = problem(n, 'exp-near');
  const kappa = 0.7;
  const weight = 1;
  const t = a.slice();
  const { slope, curvature } = solve(t, y, a, kappa, weight);
  const r = seeded('exp-near-move');
  const moved = Float64Array.from(a, (v) => v + (r() - 0.5) * 0.02);
  // The coordinator's warm start: t + da (slope + da curvature / 2).
  const warm = Float64Array.from(t, (v, i) => {
    const da = moved[i] - a[i];
    return v + da * (slope[i] + 0.5 * da * curvature[i]);
  });
  const calls = solve(warm, y, moved, kappa, weight).exps;
  // Measured: 1.0 per sample here; 1.67 with the slope alone, 2.67 from the old solution.
  assert.ok(calls <= 1.25 * n, `${calls} exponentials for ${n} samples`);
  for (let i = 0; i < n; i++) assert.ok(Math.abs(warm[i] - prox(logistic, y[i], moved[i], kappa, weight)) <= 1e-12 * Math.max(1, Math.abs(warm[i])), `sample ${i}`);
});

test('logistic prox from a start far on the wrong side of the root restarts at 0: under 4.1 exponentials per sample', () => {
  const n = 200;
  const { y, a } = problem(n, 'exp-far');
  const t = a.slice();
  solve(t, y, a, 1, 1);
  // Start each sample at -100 times its solution: on the wrong side whenever the solution is not 0.
  // Measured: 3.93 per sample; 4.35 when either half-line's restart is left out, 4.78 when both are.
  const wrong = Float64Array.from(t, (v) => -100 * v);
  const calls = solve(wrong, y, a, 1, 1).exps;
  assert.ok(calls <= 4.1 * n, `${calls / n} exponentials per sample`);
  for (let i = 0; i < n; i++) assert.ok(Math.abs(wrong[i] - t[i]) <= 1e-12 * Math.max(1, Math.abs(t[i])), `sample ${i}: ${wrong[i]} vs ${t[i]}`);
});

test('sigmoidNeg far out: exp(-m) / (1 + exp(-m)) keeps the subnormal tail', () => {
  assert.equal(sigmoidNeg(720), Math.exp(-720));
  assert.ok(sigmoidNeg(720) > 0);
  assert.equal(sigmoidNeg(0), 0.5);
});

test('the losses carry their names', () => {
  assert.equal(logistic.name, 'logistic');
  assert.equal(squared.name, 'squared');
  assert.equal(lossByName('logistic'), logistic);
  assert.equal(lossByName('squared'), squared);
});
