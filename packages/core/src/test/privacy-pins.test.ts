// Privacy accounting and noise pinned down where the reference-vector tests leave room
// (docs/mutation.md lists what `npm run mutation` found surviving): every refusal of a bad
// input with its message, the zero cases, the accountant that cannot answer, and the seeded
// noise stream against an independent implementation of the construction in noise.ts's header.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import seedrandom from 'seedrandom';
import { ConfigError, accountEpsilon, calibrateSigma, gdpDelta, osNoise, seededNoise } from '../index.js';

const spend = { sigma: 1, delta: 1e-5, rounds: 3, sensitivity: 1 };
const calib = { epsilon: 1, delta: 1e-5, rounds: 3, sensitivity: 1 };
const configError = (re: RegExp) => (e: unknown) => e instanceof ConfigError && re.test(e.message);

test('gdpDelta is 0 for mu <= 0, also at epsilon 0', () => {
  assert.equal(gdpDelta(0, 0), 0);
  assert.equal(gdpDelta(1, 0), 0);
  assert.equal(gdpDelta(1, -1), 0);
  assert.equal(gdpDelta(0, -0.5), 0);
});

test('accountEpsilon: zero rounds or zero sensitivity spend nothing under every accountant', () => {
  for (const method of ['exact', 'rdp', 'advanced'] as const) {
    assert.equal(accountEpsilon({ ...spend, rounds: 0, method }), 0, `${method}, no round`);
    assert.equal(accountEpsilon({ ...spend, sensitivity: 0, method }), 0, `${method}, sensitivity 0`);
  }
});

test('accountEpsilon refuses each bad input with its own message', () => {
  const cases: [object, RegExp][] = [
    [{ sigma: 0 }, /^sigma must be a positive number, got 0$/],
    [{ sigma: Number.POSITIVE_INFINITY }, /^sigma must be a positive number, got Infinity$/],
    [{ sensitivity: -1 }, /^sensitivity must be a non-negative number, got -1$/],
    [{ sensitivity: Number.NaN }, /^sensitivity must be a non-negative number, got NaN$/],
    [{ delta: 0 }, /^delta must be in \(0, 1\), got 0$/],
    [{ delta: -0.1 }, /^delta must be in \(0, 1\), got -0\.1$/],
    [{ delta: 1 }, /^delta must be in \(0, 1\), got 1$/],
    [{ rounds: -1 }, /^rounds must be an integer >= 0, got -1$/],
    [{ rounds: 1.5 }, /^rounds must be an integer >= 0, got 1\.5$/],
    [{ rounds: Number.NaN }, /^rounds must be an integer >= 0, got NaN$/],
    [{ rounds: 2 ** 53 }, /^rounds must be an integer >= 0, got 9007199254740992$/],
  ];
  for (const [bad, re] of cases) {
    for (const method of ['exact', 'rdp', 'advanced'] as const) {
      assert.throws(() => accountEpsilon({ ...spend, ...bad, method }), configError(re), `${JSON.stringify(bad)} ${method}`);
    }
  }
});

test('calibrateSigma refuses each bad input with its own message', () => {
  const cases: [object, RegExp][] = [
    [{ epsilon: 0 }, /^epsilon must be a positive number, got 0$/],
    [{ epsilon: -1 }, /^epsilon must be a positive number, got -1$/],
    [{ sensitivity: 0 }, /^sensitivity must be a positive number, got 0$/],
    [{ sensitivity: Number.POSITIVE_INFINITY }, /^sensitivity must be a positive number, got Infinity$/],
    [{ delta: 0 }, /^delta must be in \(0, 1\), got 0$/],
    [{ delta: 1.5 }, /^delta must be in \(0, 1\), got 1\.5$/],
    [{ rounds: 0 }, /^rounds must be an integer >= 1, got 0$/],
    [{ rounds: 2.5 }, /^rounds must be an integer >= 1, got 2\.5$/],
  ];
  for (const [bad, re] of cases) assert.throws(() => calibrateSigma({ ...calib, ...bad }), configError(re), JSON.stringify(bad));
});

test('the exact accountant is the default in both directions', () => {
  assert.equal(calibrateSigma(calib), calibrateSigma({ ...calib, method: 'exact' }));
  assert.equal(accountEpsilon(spend), accountEpsilon({ ...spend, method: 'exact' }));
  assert.notEqual(calibrateSigma(calib), calibrateSigma({ ...calib, method: 'rdp' }));
});

test('an epsilon the accountant cannot reach is an error, not a hang', () => {
  // Valid inputs each, but mu = sqrt(T) Delta / sigma overflows to infinity: no epsilon gives this delta.
  assert.throws(() => accountEpsilon({ sigma: 1e-300, delta: 1e-5, rounds: 2, sensitivity: 1e300 }), (e: unknown) => e instanceof RangeError && e.message === 'no solution: the function never changes sign');
});

/** Box-Muller on pairs of uniforms, as noise.ts documents it. */
function boxMuller(u: number[], n: number, sigma: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < u.length; i += 2) {
    const r = sigma * Math.sqrt(-2 * Math.log(u[i]));
    out.push(r * Math.cos(2 * Math.PI * u[i + 1]), r * Math.sin(2 * Math.PI * u[i + 1]));
  }
  return out.slice(0, n);
}

/** The construction noise.ts documents, written out again: u = (k + 1/2) / 2^53 from 53 bits of seedrandom. */
function referenceNormals(seed: string, sizes: number[], sigma: number): number[][] {
  const rng = seedrandom(seed);
  return sizes.map((n) => boxMuller(Array.from({ length: n + (n % 2) }, () => (Math.floor(rng.double() * 2 ** 53) + 0.5) / 2 ** 53), n, sigma));
}

/** Runs fn with node:crypto's randomFillSync replaced by `fill` (also for modules that imported it by name). */
function withRandomFill(fill: (bits: Uint32Array) => void, fn: () => void): void {
  const crypto = createRequire(import.meta.url)('node:crypto') as { randomFillSync: unknown };
  const original = crypto.randomFillSync;
  crypto.randomFillSync = (buf: Uint32Array) => {
    fill(buf);
    return buf;
  };
  syncBuiltinESMExports();
  try {
    fn();
  } finally {
    crypto.randomFillSync = original;
    syncBuiltinESMExports();
  }
}

test('seeded noise is the documented Box-Muller construction over seedrandom, call after call', () => {
  const sizes = [3, 4, 1, 5, 2];
  const sigma = 2.5;
  const want = referenceNormals('pin', sizes, sigma);
  const noise = seededNoise('pin');
  assert.equal(noise.seeded, true);
  for (let call = 0; call < 4; call++) {
    const out = new Float64Array(sizes[call]);
    noise.addNormal(out, sigma);
    assert.deepEqual(Array.from(out), want[call], `call ${call}: the same bits, the same doubles`);
  }
  const out = Float64Array.of(10, -10);
  noise.addNormal(out, sigma);
  assert.ok(Math.abs(out[0] - 10 - want[4][0]) < 1e-12 && Math.abs(out[1] + 10 - want[4][1]) < 1e-12, 'the noise is added to what is there');
});

test('OS noise: each uniform is (k + 1/2) / 2^53 with k the top 32 bits of one word and the top 21 of the next', () => {
  const rng = seedrandom('os-bits');
  const words: number[] = [];
  const fill = (bits: Uint32Array) => {
    for (let i = 0; i < bits.length; i++) bits[i] = rng.int32() >>> 0;
    words.push(...bits);
  };
  const sigma = 1.5;
  for (const n of [5, 2]) {
    const out = new Float64Array(n);
    words.length = 0;
    withRandomFill(fill, () => osNoise().addNormal(out, sigma));
    assert.equal(words.length, 2 * (n + (n % 2)), 'two 32-bit words per uniform, an even number of uniforms');
    const u = Array.from({ length: words.length / 2 }, (_, i) => (words[2 * i] * 2 ** 21 + (words[2 * i + 1] >>> 11) + 0.5) / 2 ** 53);
    assert.deepEqual(Array.from(out), boxMuller(u, n, sigma));
  }
});

test('OS noise: the extreme words give the documented tail cut sqrt(-2 ln 2^-54) and never 0 or 1 as a uniform', () => {
  const out = new Float64Array(2);
  withRandomFill((bits) => bits.fill(0), () => osNoise().addNormal(out, 2));
  // u1 = 2^-54: r = 2 sqrt(-2 ln 2^-54), about 8.65 sigma; u2 = 2^-54: theta is almost 0.
  assert.equal(out[0], 2 * Math.sqrt(-2 * Math.log(2 ** -54)) * Math.cos(2 * Math.PI * 2 ** -54));
  assert.ok(out[0] > 17.3 && out[0] < 17.31, `${out[0]}`);
  const top = new Float64Array(2);
  withRandomFill((bits) => bits.fill(0xffffffff), () => osNoise().addNormal(top, 2));
  assert.ok(Number.isFinite(top[0]) && Number.isFinite(top[1]) && Math.abs(top[0]) < 1e-7, `${top[0]}, ${top[1]}`);
});

/** Math.exp and Math.expm1 calls made by fn: the accountants evaluate each trial point with one or two. */
function expCalls(fn: () => void): number {
  const { exp, expm1 } = Math;
  let calls = 0;
  Math.exp = (x: number) => {
    calls++;
    return exp(x);
  };
  Math.expm1 = (x: number) => {
    calls++;
    return expm1(x);
  };
  try {
    fn();
  } finally {
    Math.exp = exp;
    Math.expm1 = expm1;
  }
  return calls;
}

test('accounting costs a bounded number of evaluations: bisection stops when it can no longer halve', () => {
  // Measured: about 55-65 for the calls below, against 2000 for a bisection that runs to its cap.
  // A tiny spend: delta(0) is already below the target, epsilon 0 at once.
  assert.ok(expCalls(() => assert.equal(accountEpsilon({ sigma: 1e6, delta: 1e-5, rounds: 1, sensitivity: 1e-3 }), 0)) <= 2);
  for (const method of ['exact', 'advanced'] as const) {
    const calls = expCalls(() => calibrateSigma({ ...calib, rounds: 100, method }));
    assert.ok(calls > 0 && calls <= 400, `${method} calibrateSigma: ${calls} exponentials`);
  }
  const calls = expCalls(() => accountEpsilon({ ...spend, rounds: 100 }));
  assert.ok(calls <= 400, `accountEpsilon: ${calls} exponentials`);
});
