import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Loss, type LossName, log1pExpNeg, logistic, lossByName, meanLoss, prox, sigmoidNeg, squared } from '../index.js';
import { seeded } from './support.js';

/** A seeded generator of floats in [0, 1), so failures reproduce. */
const logUniform = (r: () => number, lo: number, hi: number) => Math.exp(Math.log(lo) + r() * (Math.log(hi) - Math.log(lo)));

// ---------------------------------------------------------------------------------------
// Reference 1-D minimiser, independent of the code under test.
// ---------------------------------------------------------------------------------------

/** 1 / (1 + e^m), written out here rather than taken from the module. */
function refSigmoidNeg(m: number): number {
  return m >= 0 ? Math.exp(-m) / (1 + Math.exp(-m)) : 1 / (1 + Math.exp(m));
}
/** log(1 + e^-m) */
function refLogistic(m: number): number {
  return m > 0 ? Math.log1p(Math.exp(-m)) : -m + Math.log1p(Math.exp(m));
}

/**
 * F(u) - F(v) for F(t) = weight*loss(y,t) + kappa/2 (t-a)^2, computed without the
 * cancellation of subtracting two rounded objective values, so that the comparison in
 * the golden-section search stays right down to |u - v| ~ 1e-16 |u|:
 *   squared:  loss(u) - loss(v) = (u - v)(u + v - 2y)/2
 *   logistic: loss(u) - loss(v) = log((1 + e^-mu)/(1 + e^-mv)) = log1p(sigma(-mv) expm1(mv - mu))
 *   quadratic: (u-a)^2 - (v-a)^2 = (u - v)(u + v - 2a)
 */
function objectiveDiff(name: LossName, y: number, a: number, kappa: number, weight: number, u: number, v: number): number {
  let dl: number;
  if (name === 'squared') dl = 0.5 * (u - v) * (u + v - 2 * y);
  else {
    const mu = y * u;
    const mv = y * v;
    dl = Math.abs(mv - mu) < 30 ? Math.log1p(refSigmoidNeg(mv) * Math.expm1(mv - mu)) : refLogistic(mu) - refLogistic(mv);
  }
  return weight * dl + 0.5 * kappa * (u - v) * (u + v - 2 * a);
}

/** Golden-section search for argmin F on [lo, hi] to width 1e-13 (relative for large |t|). */
function goldenArgmin(name: LossName, y: number, a: number, kappa: number, weight: number, lo: number, hi: number): number {
  const g = (Math.sqrt(5) - 1) / 2;
  for (let it = 0; it < 500; it++) {
    if (hi - lo <= 1e-13 * Math.max(1, Math.abs(lo), Math.abs(hi))) break;
    const x1 = hi - g * (hi - lo);
    const x2 = lo + g * (hi - lo);
    if (!(x1 > lo && x2 < hi && x1 <= x2)) break; // interval down to a few ulps
    if (objectiveDiff(name, y, a, kappa, weight, x1, x2) < 0) hi = x2;
    else lo = x1;
  }
  return (lo + hi) / 2;
}

/**
 * The brute-force prox. The brief's bracket [a - R - 1, a + R + 1] (R = weight/kappa) holds
 * the logistic minimiser (|t - a| = R sigma <= R), but not always the squared one, which lies
 * between a and y (|t - a| = R/(1+R) |y - a|, up to ~ 51): widen it to cover y too.
 */
function refProx(name: LossName, y: number, a: number, kappa: number, weight: number): number {
  const R = weight / kappa;
  return goldenArgmin(name, y, a, kappa, weight, Math.min(a, y) - R - 1, Math.max(a, y) + R + 1);
}

/** The optimality residual weight*loss'(y,t) + kappa (t - a), with loss' written out here. */
function residual(name: LossName, y: number, a: number, kappa: number, weight: number, t: number): number {
  const d = name === 'squared' ? t - y : -y * refSigmoidNeg(y * t);
  return weight * d + kappa * (t - a);
}

const close = (got: number, want: number, tol: number) => Math.abs(got - want) <= tol * Math.max(1, Math.abs(want));

// Sanity check of the reference itself against the squared loss's closed form,
// (weight*y + kappa*a)/(weight + kappa), computed here.
test('reference minimiser reproduces the closed form of the squared prox', () => {
  const r = seeded(7);
  for (let k = 0; k < 200; k++) {
    const y = r() < 0.5 ? -1 : 1;
    const a = -50 + 100 * r();
    const kappa = logUniform(r, 1e-2, 1e2);
    const weight = kappa * logUniform(r, 1e-3, 1e4);
    const want = (weight * y + kappa * a) / (weight + kappa);
    const got = refProx('squared', y, a, kappa, weight);
    assert.ok(close(got, want, 1e-11), `k=${k}: ${got} vs ${want}`);
  }
});

for (const loss of [logistic, squared]) {
  const name = loss.name;
  test(`${name} prox matches a golden-section minimiser on random problems with far warm starts`, () => {
    const r = seeded(name === 'logistic' ? 101 : 202);
    let cases = 0;
    let worst = 0;
    for (let k = 0; k < 400; k++) {
      const y = r() < 0.5 ? -1 : 1;
      const a = -50 + 100 * r();
      const kappa = logUniform(r, 1e-2, 1e2);
      const weight = kappa * logUniform(r, 1e-3, 1e4);
      const want = refProx(name, y, a, kappa, weight);
      const starts = [undefined, 1e3, -1e3, -1e4 + 2e4 * r(), want, -want, 0];
      for (const t0 of starts) {
        const t = t0 === undefined ? prox(loss, y, a, kappa, weight) : prox(loss, y, a, kappa, weight, t0);
        const err = Math.abs(t - want) / Math.max(1, Math.abs(want));
        worst = Math.max(worst, err);
        assert.ok(
          err <= 1e-9,
          `y=${y} a=${a} kappa=${kappa} weight=${weight} t0=${t0}: prox ${t}, reference ${want}`,
        );
        const res = residual(name, y, a, kappa, weight, t);
        assert.ok(
          Math.abs(res) <= 1e-12 * (weight + kappa) * Math.max(1, Math.abs(t)),
          `optimality residual ${res} at y=${y} a=${a} kappa=${kappa} weight=${weight} t0=${t0}`,
        );
        // and the module's own derivative agrees the point is stationary
        const res2 = weight * loss.deriv(y, t) + kappa * (t - a);
        assert.ok(Math.abs(res2) <= 1e-12 * (weight + kappa) * Math.max(1, Math.abs(t)));
        cases++;
      }
    }
    assert.equal(cases, 400 * 7);
    assert.ok(worst <= 1e-9, `worst relative error ${worst}`);
  });
}

test('logistic prox: edge cases (root exactly 0, extreme ratios, huge a)', () => {
  // y = 1, a = -1, R = 2: h(0) = -b - R/2 = 1 - 1 = 0, the root is s = t = 0.
  for (const t0 of [0, 5, -5, 1e6, -1e6]) assert.equal(prox(logistic, 1, -1, 1, 2, t0), 0);
  const cases: [number, number, number, number][] = [
    [1, 0, 1, 1],
    [-1, 0, 1, 1],
    [1, -50, 1e-2, 1e2], // R = 1e4
    [-1, 50, 1e-2, 1e2],
    [1, 50, 1e2, 1e-1], // R = 1e-3
    [1, 1e6, 1, 1],
    [-1, -1e6, 1, 1e3],
    [1, -1e6, 1, 1e3],
  ];
  for (const [y, a, kappa, weight] of cases) {
    const want = refProx('logistic', y, a, kappa, weight);
    for (const t0 of [a, 1e3, -1e3, 0]) {
      const t = prox(logistic, y, a, kappa, weight, t0);
      assert.ok(close(t, want, 1e-9), `y=${y} a=${a} kappa=${kappa} weight=${weight} t0=${t0}: ${t} vs ${want}`);
    }
  }
});

for (const loss of [logistic, squared]) {
  test(`${loss.name} proxInto on vectors: values match prox, slope matches a finite difference`, () => {
    const r = seeded(loss.name === 'logistic' ? 303 : 404);
    const n = 300;
    for (const [kappa, weight] of [
      [1, 1],
      [0.5, 1e-3],
      [3, 30],
      [1e-2, 10],
      [10, 1e-2 / 3],
    ]) {
      const y = Float64Array.from({ length: n }, () => (r() < 0.5 ? -1 : 1));
      const a = Float64Array.from({ length: n }, () => -50 + 100 * r());
      const t = Float64Array.from({ length: n }, () => -1e3 + 2e3 * r()); // warm starts anywhere
      const slope = new Float64Array(n);
      loss.proxInto(t, slope, new Float64Array(t.length), y, a, kappa, weight);
      const h = 1e-5;
      for (let i = 0; i < n; i++) {
        const want = refProx(loss.name, y[i], a[i], kappa, weight);
        assert.ok(close(t[i], want, 1e-9), `i=${i}: ${t[i]} vs ${want}`);
        const tp = prox(loss, y[i], a[i] + h, kappa, weight);
        const tm = prox(loss, y[i], a[i] - h, kappa, weight);
        const fd = (tp - tm) / (2 * h);
        assert.ok(slope[i] > 0 && slope[i] <= 1, `slope ${slope[i]}`);
        assert.ok(Math.abs(slope[i] - fd) <= 1e-6, `i=${i} kappa=${kappa} weight=${weight}: slope ${slope[i]}, finite difference ${fd}`);
      }
    }
  });
}

test('squared prox slope is kappa/(weight + kappa) exactly', () => {
  const t = new Float64Array(3);
  const slope = new Float64Array(3);
  squared.proxInto(t, slope, new Float64Array(3), Float64Array.of(1, -1, 1), Float64Array.of(0, 2, -4), 3, 1);
  // (weight*y + kappa*a)/(weight + kappa) with weight 1, kappa 3
  assert.deepEqual(Array.from(t), [0.25, 1.25, -2.75]);
  assert.deepEqual(Array.from(slope), [0.75, 0.75, 0.75]);
});

test('log1pExpNeg and sigmoidNeg: direct formula in range, finite at +-1000', () => {
  for (let m = -30; m <= 30; m += 0.37) {
    const l = Math.log(1 + Math.exp(-m));
    assert.ok(Math.abs(log1pExpNeg(m) - l) <= 1e-13 * Math.max(1, l) + 1e-15, `log1pExpNeg(${m})`);
    const s = 1 / (1 + Math.exp(m));
    assert.ok(Math.abs(sigmoidNeg(m) - s) <= 1e-15, `sigmoidNeg(${m})`);
  }
  assert.equal(log1pExpNeg(1000), 0);
  assert.equal(log1pExpNeg(-1000), 1000);
  assert.equal(sigmoidNeg(1000), 0);
  assert.equal(sigmoidNeg(-1000), 1);
  for (const m of [-1e308, -1000, -710, 710, 1000, 1e308]) {
    assert.ok(Number.isFinite(log1pExpNeg(m)), `log1pExpNeg(${m})`);
    assert.ok(Number.isFinite(sigmoidNeg(m)), `sigmoidNeg(${m})`);
  }
  assert.equal(log1pExpNeg(0), Math.LN2);
  assert.equal(sigmoidNeg(0), 0.5);
  // Small tails keep their relative precision: log(1 + e^-50) = e^-50 (1 - e^-50/2 ...)
  assert.ok(Math.abs(log1pExpNeg(50) / Math.exp(-50) - 1) < 1e-15);
  assert.ok(Math.abs(sigmoidNeg(50) / Math.exp(-50) - 1) < 1e-15);
});

test('loss values and derivatives agree with finite differences', () => {
  const r = seeded(5);
  for (const loss of [logistic, squared] as Loss[]) {
    for (let k = 0; k < 200; k++) {
      const y = r() < 0.5 ? -1 : 1;
      const t = -20 + 40 * r();
      const h = 1e-5;
      const d1 = (loss.value(y, t + h) - loss.value(y, t - h)) / (2 * h);
      const d2 = (loss.deriv(y, t + h) - loss.deriv(y, t - h)) / (2 * h);
      assert.ok(Math.abs(loss.deriv(y, t) - d1) < 1e-8, `${loss.name} deriv at y=${y} t=${t}`);
      assert.ok(Math.abs(loss.deriv2(y, t) - d2) < 1e-8, `${loss.name} deriv2 at y=${y} t=${t}`);
    }
  }
  assert.equal(squared.value(1, 3), 2);
  assert.ok(Math.abs(logistic.value(-1, 2) - Math.log(1 + Math.exp(2))) < 1e-15);
  assert.equal(lossByName('logistic'), logistic);
  assert.equal(lossByName('squared'), squared);
  // meanLoss: (0.5*(2-1)^2 + 0.5*(0+1)^2 + 0.5*(3-1)^2)/3 = (0.5 + 0.5 + 2)/3 = 1
  assert.equal(meanLoss(squared, Float64Array.of(1, -1, 1), Float64Array.of(2, 0, 3)), 1);
});

test('logistic proxInto: curvature d2t/da2 matches a finite difference of the slope', () => {
  const rand = seeded(77);
  const solve = (y: number, a: number, kappa: number) => {
    const t = Float64Array.of(a);
    const slope = new Float64Array(1);
    const curvature = new Float64Array(1);
    logistic.proxInto(t, slope, curvature, Float64Array.of(y), Float64Array.of(a), kappa, 1);
    return { slope: slope[0], curvature: curvature[0] };
  };
  for (let k = 0; k < 300; k++) {
    const y = rand() < 0.5 ? -1 : 1;
    const a = (rand() - 0.5) * 40;
    const kappa = 10 ** (rand() * 4 - 2);
    const h = 1e-4;
    const fd = (solve(y, a + h, kappa).slope - solve(y, a - h, kappa).slope) / (2 * h);
    const c = solve(y, a, kappa).curvature;
    assert.ok(Math.abs(fd - c) <= 1e-4 * (Math.abs(c) + 1e-3), `y ${y} a ${a} kappa ${kappa}: curvature ${c} vs finite difference ${fd}`);
  }
});
