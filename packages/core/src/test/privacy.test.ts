// Privacy accounting against independently computed reference values, and the noise sources.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { accountEpsilon, calibrateSigma, gdpDelta, normalCdf, osNoise, seededNoise, snapToGrid, GRID_BITS } from '../index.js';

// test-data/README.md says where these come from.
const VECTORS = fileURLToPath(new URL('../../../../test-data/gaussian-composition-vectors.json', import.meta.url));
const vectors = JSON.parse(readFileSync(VECTORS, 'utf8')) as {
  calibrate: { sensitivity: number; rounds: number; epsilon: number; delta: number; sigma_exact: number; sigma_rdp: number; sigma_zcdp: number; sigma_advanced: number; check_eps_exact_at_sigma_exact: number }[];
  account: { sensitivity: number; rounds: number; sigma: number; delta: number; epsilon_exact: number; epsilon_rdp: number; epsilon_zcdp: number }[];
};

const rel = (a: number, b: number) => Math.abs(a - b) / Math.abs(b);

test('calibrateSigma matches the reference vectors to 1e-6 relative (exact, RDP/zCDP, advanced)', () => {
  assert.ok(vectors.calibrate.length >= 8);
  for (const v of vectors.calibrate) {
    const base = { epsilon: v.epsilon, delta: v.delta, rounds: v.rounds, sensitivity: v.sensitivity };
    for (const [method, want] of [['exact', v.sigma_exact], ['rdp', v.sigma_rdp], ['rdp', v.sigma_zcdp], ['advanced', v.sigma_advanced]] as const) {
      const got = calibrateSigma({ ...base, method });
      assert.ok(rel(got, want) <= 1e-6, `${method} T=${v.rounds} eps=${v.epsilon}: ${got} vs ${want}`);
    }
  }
});

test('accountEpsilon matches the reference vectors to 1e-6 relative, and inverts calibrateSigma', () => {
  for (const v of vectors.account) {
    const base = { sigma: v.sigma, delta: v.delta, rounds: v.rounds, sensitivity: v.sensitivity };
    assert.ok(rel(accountEpsilon({ ...base, method: 'exact' }), v.epsilon_exact) <= 1e-6);
    assert.ok(rel(accountEpsilon({ ...base, method: 'rdp' }), v.epsilon_rdp) <= 1e-6);
    assert.ok(rel(accountEpsilon({ ...base, method: 'rdp' }), v.epsilon_zcdp) <= 1e-6);
  }
  for (const v of vectors.calibrate) {
    const eps = accountEpsilon({ sigma: v.sigma_exact, delta: v.delta, rounds: v.rounds, sensitivity: v.sensitivity, method: 'exact' });
    assert.ok(rel(eps, v.check_eps_exact_at_sigma_exact) <= 1e-6);
    for (const method of ['exact', 'rdp', 'advanced'] as const) {
      const sigma = calibrateSigma({ epsilon: v.epsilon, delta: v.delta, rounds: v.rounds, sensitivity: v.sensitivity, method });
      const back = accountEpsilon({ sigma, delta: v.delta, rounds: v.rounds, sensitivity: v.sensitivity, method });
      assert.ok(rel(back, v.epsilon) <= 1e-9, `${method}: ${back} vs ${v.epsilon}`);
    }
  }
});

test('accounting orders and scales as it must', () => {
  const c = { epsilon: 1, delta: 1e-5, rounds: 50, sensitivity: 2 };
  const exact = calibrateSigma({ ...c, method: 'exact' });
  const rdp = calibrateSigma({ ...c, method: 'rdp' });
  const adv = calibrateSigma({ ...c, method: 'advanced' });
  assert.ok(exact < rdp && rdp < adv, `${exact} < ${rdp} < ${adv}`);
  assert.ok(rel(exact, 2 * calibrateSigma({ ...c, sensitivity: 1, method: 'exact' })) < 1e-12, 'sigma is linear in the sensitivity');
  assert.ok(rel(calibrateSigma({ ...c, rounds: 200, method: 'exact' }), 2 * exact) < 1e-9, 'exact: sigma grows with sqrt(T)');
  let prev = 0;
  for (let t = 1; t <= 50; t++) {
    const e = accountEpsilon({ sigma: exact, delta: 1e-5, rounds: t, sensitivity: 2 });
    assert.ok(e > prev, 'epsilon spent grows with every round');
    prev = e;
  }
  assert.ok(rel(prev, 1) < 1e-9);
  assert.equal(accountEpsilon({ sigma: 1, delta: 1e-5, rounds: 0, sensitivity: 1 }), 0);
});

test('gdpDelta: direct formula where it is safe, and no overflow far out', () => {
  for (const [eps, mu] of [[0.5, 1], [1, 0.3], [3, 2]]) {
    const direct = normalCdf(-eps / mu + mu / 2) - Math.exp(eps) * normalCdf(-eps / mu - mu / 2);
    assert.ok(rel(gdpDelta(eps, mu), direct) < 1e-10);
  }
  const far = gdpDelta(800, 0.5);
  assert.ok(Number.isFinite(far) && far >= 0 && far < 1e-300);
  assert.ok(rel(normalCdf(-10), 7.619853024160527e-24) < 1e-12); // Phi(-10), a standard table value
});

test('bad accounting inputs are configuration errors', () => {
  assert.throws(() => calibrateSigma({ epsilon: 0, delta: 1e-5, rounds: 1, sensitivity: 1 }), /epsilon/);
  assert.throws(() => calibrateSigma({ epsilon: 1, delta: 1, rounds: 1, sensitivity: 1 }), /delta/);
  assert.throws(() => calibrateSigma({ epsilon: 1, delta: 1e-5, rounds: 0, sensitivity: 1 }), /rounds/);
  assert.throws(() => accountEpsilon({ sigma: -1, delta: 1e-5, rounds: 1, sensitivity: 1 }), /sigma/);
});

/** Kolmogorov-Smirnov distance of a sample from N(0, sigma^2). */
function ksDistance(xs: Float64Array, sigma: number): number {
  const s = Array.from(xs).sort((a, b) => a - b);
  let d = 0;
  s.forEach((v, i) => {
    const f = normalCdf(v / sigma);
    d = Math.max(d, Math.abs(f - i / s.length), Math.abs(f - (i + 1) / s.length));
  });
  return d;
}

test('both noise sources are Gaussian with the requested sigma (Kolmogorov-Smirnov)', () => {
  const n = 20001; // odd: the Box-Muller pair logic must handle it
  for (const src of [osNoise(), seededNoise('ks')]) {
    const xs = new Float64Array(n);
    src.addNormal(xs, 3);
    // Critical value at the 0.1 % level: 1.95 / sqrt(n).
    assert.ok(ksDistance(xs, 3) < 1.95 / Math.sqrt(n), `seeded=${src.seeded}`);
    const ys = new Float64Array(n).fill(10);
    src.addNormal(ys, 3);
    const mean = ys.reduce((a, b) => a + b, 0) / n;
    assert.ok(Math.abs(mean - 10) < 0.1, 'noise is added to the values');
  }
});

test('seeded noise is reproducible and says so; OS noise is not reproducible', () => {
  const a = new Float64Array(8);
  const b = new Float64Array(8);
  seededNoise('same').addNormal(a, 1);
  seededNoise('same').addNormal(b, 1);
  assert.deepEqual(a, b);
  assert.equal(seededNoise('same').seeded, true);
  const c = new Float64Array(8);
  const d = new Float64Array(8);
  osNoise().addNormal(c, 1);
  osNoise().addNormal(d, 1);
  assert.notDeepEqual(c, d);
  assert.equal(osNoise().seeded, false);
});

test('snapToGrid rounds to a power-of-two grid about a thousandth of sigma', () => {
  const v = Float64Array.of(0.123456789, -5.55555, 1e3 + 1e-9);
  snapToGrid(v, 3);
  const spacing = 2 ** (1 - GRID_BITS); // floor(log2 3) = 1
  for (const x of v) assert.equal(x / spacing, Math.round(x / spacing));
  assert.ok(Math.abs(v[0] - 0.123456789) <= spacing / 2);
});
