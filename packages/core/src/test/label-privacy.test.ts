// Label privacy in core: the logistic loss corrected for flipped labels (its value, derivatives,
// unbiasedness and proximal map against a bisection of the corrected per-sample objective's
// derivative, written here independently) and randomized response (the flip probability for an
// epsilon, the flip rate of the OS CSPRNG within binomial bounds, seeded flips reproducible).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyFlips, drawFlips, flipCorrectedLogistic, flipCorrection, flipProbability, logistic, osNoise, prox, seededNoise, trainingLoss } from '../index.js';
import { seeded } from './support.js';

const logUniform = (r: () => number, lo: number, hi: number) => Math.exp(Math.log(lo) + r() * (Math.log(hi) - Math.log(lo)));

/** log(1 + e^-m), written out here. */
const refLog1pExpNeg = (m: number) => (m > 0 ? Math.log1p(Math.exp(-m)) : -m + Math.log1p(Math.exp(m)));
/** 1 / (1 + e^m), written out here. */
const refSigmoidNeg = (m: number) => (m >= 0 ? Math.exp(-m) / (1 + Math.exp(-m)) : 1 / (1 + Math.exp(m)));

/**
 * argmin_t weight (log(1 + e^{-y t}) - c y t) + kappa/2 (t - a)^2 by bisection on its
 * derivative weight (-y sigma(-y t) - c y) + kappa (t - a), which is increasing in t. The root
 * lies within weight (1 + c) / kappa of a, so that interval (widened by 1) brackets it.
 */
function refCorrectedProx(y: number, a: number, kappa: number, weight: number, c: number): number {
  const d = (t: number) => weight * (-y * refSigmoidNeg(y * t) - c * y) + kappa * (t - a);
  const r = (weight * (1 + c)) / kappa + 1;
  let lo = a - r;
  let hi = a + r;
  assert.ok(d(lo) < 0 && d(hi) > 0, 'bracket');
  for (let it = 0; it < 2000; it++) {
    const mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    if (d(mid) < 0) lo = mid;
    else hi = mid;
  }
  return lo + (hi - lo) / 2;
}

test('flip probability 1/(1 + e^epsilon) and the correction p/(1 - 2p), against values computed by hand', () => {
  // 1/(1+e) = 0.26894142136999512, 1/(1+e^2) = 0.11920292202211755, 1/(1+e^3) = 0.04742587317756678.
  assert.ok(Math.abs(flipProbability(1) - 0.2689414213699951) < 1e-16);
  assert.ok(Math.abs(flipProbability(2) - 0.11920292202211755) < 1e-16);
  assert.ok(Math.abs(flipProbability(3) - 0.04742587317756678) < 1e-16);
  // p/(1-2p) at epsilon 1: 0.26894142137 / 0.46211715726 = 0.58197670687 (= 1/(e - 1)).
  assert.ok(Math.abs(flipCorrection(flipProbability(1)) - 1 / (Math.E - 1)) < 1e-15);
  assert.equal(flipCorrection(0), 0);
  for (const bad of [0, -1, NaN, Infinity, -Infinity]) assert.throws(() => flipProbability(bad), /label epsilon must be a positive number/);
  for (const bad of [0.5, 0.7, -0.01, NaN]) assert.throws(() => flipCorrection(bad), /flip probability must be in \[0, 0\.5\)/);
});

test('the corrected loss is unbiased: (1 - p) l~(y, t) + p l~(-y, t) = l(y, t), for every t and p', () => {
  const r = seeded('unbiased');
  for (let k = 0; k < 2000; k++) {
    const p = 0.49 * r();
    const loss = flipCorrectedLogistic(p);
    const t = (r() - 0.5) * 60;
    for (const y of [1, -1]) {
      const mean = (1 - p) * loss.value(y, t) + p * loss.value(-y, t);
      const truth = refLog1pExpNeg(y * t);
      assert.ok(Math.abs(mean - truth) <= 1e-12 * Math.max(1, Math.abs(t) / (1 - 2 * p)), `p ${p}, y ${y}, t ${t}: ${mean} vs ${truth}`);
      // The derivative too: E[d l~] = d l.
      const dmean = (1 - p) * loss.deriv(y, t) + p * loss.deriv(-y, t);
      assert.ok(Math.abs(dmean - -y * refSigmoidNeg(y * t)) <= 1e-12 / (1 - 2 * p), `derivative at p ${p}, t ${t}`);
    }
  }
});

test('corrected loss: value l(y t) - c y t, derivatives by finite differences; p = 0 is the plain logistic loss', () => {
  const p = 0.2;
  const c = 0.2 / 0.6;
  const loss = flipCorrectedLogistic(p);
  assert.equal(loss.name, 'logistic');
  assert.equal(flipCorrectedLogistic(0), logistic);
  assert.equal(trainingLoss('logistic', 0), logistic);
  assert.equal(trainingLoss('logistic', p).value(1, 2), loss.value(1, 2));
  assert.throws(() => trainingLoss('squared', p), /flipped labels need the logistic loss, not squared/);
  for (const y of [1, -1])
    for (const t of [-30, -3, -0.5, 0, 0.7, 4, 25]) {
      assert.ok(Math.abs(loss.value(y, t) - (refLog1pExpNeg(y * t) - c * y * t)) < 1e-14 * Math.max(1, Math.abs(t)));
      const h = 1e-5;
      const fd = (loss.value(y, t + h) - loss.value(y, t - h)) / (2 * h);
      assert.ok(Math.abs(loss.deriv(y, t) - fd) < 1e-8, `deriv at y ${y}, t ${t}`);
      const fd2 = (loss.deriv(y, t + h) - loss.deriv(y, t - h)) / (2 * h);
      assert.ok(Math.abs(loss.deriv2(y, t) - fd2) < 1e-8, `deriv2 at y ${y}, t ${t}`);
    }
});

test('corrected prox: equals a bisection of the corrected per-sample objective, and the plain prox at the shifted centre a + weight c y / kappa', () => {
  const r = seeded('corrected-prox');
  for (let k = 0; k < 3000; k++) {
    const p = k < 10 ? 0.499 : 0.49 * r();
    const c = p / (1 - 2 * p);
    const loss = flipCorrectedLogistic(p);
    const y = r() < 0.5 ? 1 : -1;
    const kappa = logUniform(r, 1e-8, 1e3);
    const weight = logUniform(r, 1e-6, 1);
    const a = (r() - 0.5) * (r() < 0.3 ? 200 : 8);
    const start = a + (r() - 0.5) * 100; // warm starts far away too
    const t = prox(loss, y, a, kappa, weight, start);
    const want = refCorrectedProx(y, a, kappa, weight, c);
    const scale = Math.max(1, Math.abs(want));
    assert.ok(Math.abs(t - want) <= 1e-11 * scale, `p ${p}, y ${y}, a ${a}, kappa ${kappa}, weight ${weight}: ${t} vs ${want}`);
    const shifted = prox(logistic, y, a + (weight * c * y) / kappa, kappa, weight, start);
    assert.ok(Math.abs(t - shifted) <= 1e-11 * scale, 'the linear term shifts the prox centre');
  }
});

test('corrected proxInto on vectors: slope dt/da by a finite difference (the shift does not change it)', () => {
  const r = seeded('corrected-slope');
  const n = 200;
  const loss = flipCorrectedLogistic(0.3);
  const y = Float64Array.from({ length: n }, () => (r() < 0.5 ? 1 : -1));
  const a = Float64Array.from({ length: n }, () => (r() - 0.5) * 10);
  const kappa = 0.3;
  const weight = 0.7;
  const solve = (at: Float64Array) => {
    const t = at.slice();
    const slope = new Float64Array(n);
    loss.proxInto(t, slope, new Float64Array(n), y, at, kappa, weight);
    return { t, slope };
  };
  const base = solve(a);
  const h = 1e-6;
  const up = solve(a.map((v) => v + h));
  const down = solve(a.map((v) => v - h));
  for (let i = 0; i < n; i++) {
    assert.ok(Math.abs(base.t[i] - refCorrectedProx(y[i], a[i], kappa, weight, 0.3 / 0.4)) < 1e-11 * Math.max(1, Math.abs(base.t[i])));
    assert.ok(Math.abs(base.slope[i] - (up.t[i] - down.t[i]) / (2 * h)) < 1e-6, `slope ${i}`);
  }
});

test('randomized response from the OS CSPRNG: the flip rate is within binomial bounds, and the flips are spread over the rows', () => {
  const n = 200_000;
  for (const epsilon of [1, 2, 3]) {
    const p = flipProbability(epsilon);
    const flipped = drawFlips(n, p, osNoise());
    // Binomial(n, p): mean n p, sd sqrt(n p (1 - p)); 6 sd is exceeded with probability about 2e-9.
    const sd = Math.sqrt(n * p * (1 - p));
    assert.ok(Math.abs(flipped.length - n * p) < 6 * sd, `epsilon ${epsilon}: ${flipped.length} flips of ${n}, expected ${n * p} +- ${6 * sd}`);
    // Each half of the rows gets its share (Binomial(n/2, p)).
    const firstHalf = flipped.filter((i) => i < n / 2).length;
    assert.ok(Math.abs(firstHalf - (n / 2) * p) < 6 * Math.sqrt((n / 2) * p * (1 - p)), `epsilon ${epsilon}: ${firstHalf} flips in the first half`);
    for (let k = 1; k < flipped.length; k++) assert.ok(flipped[k] > flipped[k - 1] && flipped[k] < n, 'ascending row indices');
  }
  // Two draws differ (the chance that two draws of 200,000 rows agree is nil).
  const p = flipProbability(1);
  assert.notDeepEqual(drawFlips(n, p, osNoise()), drawFlips(n, p, osNoise()));
});

test('randomized response: seeded flips are reproducible and say so; the rule is u < p on the uniforms', () => {
  const p = flipProbability(2);
  const a = drawFlips(5000, p, seededNoise('flips'));
  assert.deepEqual(a, drawFlips(5000, p, seededNoise('flips')));
  assert.notDeepEqual(a, drawFlips(5000, p, seededNoise('other flips')));
  assert.equal(seededNoise('flips').seeded, true);
  assert.equal(osNoise().seeded, false);
  // u < p flips; u = p and above do not.
  const source = { uniforms: (n: number) => Float64Array.from({ length: n }, (_, i) => [0.1, 0.25, 0.2499999, 0.9, 0.25000001][i]) };
  assert.deepEqual(Array.from(drawFlips(5, 0.25, source)), [0, 2]);
  assert.equal(drawFlips(5, 0, source).length, 0);
  assert.throws(() => drawFlips(5, 0.5, source), /flip probability must be in \[0, 0\.5\)/);
  assert.deepEqual(Array.from(applyFlips(Float64Array.of(1, -1, 1, 1), Uint32Array.of(1, 3))), [1, 1, 1, -1]);
});
