// Privacy accounting and noise pinned down where the reference-vector tests leave room
// (docs/mutation.md lists what `npm run mutation` found surviving): every refusal of a bad
// input with its message, the zero cases, the accountant that cannot answer, and the seeded
// noise stream against an independent implementation of the construction in noise.ts's header.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import seedrandom from 'seedrandom';
import { ConfigError, accountEpsilon, calibrateSigma, gdpDelta, seededNoise } from '../index.js';

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

/** The construction noise.ts documents, written out again: u = (k + 1/2) / 2^53 from 53 bits, Box-Muller pairs. */
function referenceNormals(seed: string, sizes: number[], sigma: number): number[][] {
  const rng = seedrandom(seed);
  return sizes.map((n) => {
    const m = n + (n % 2);
    const u = Array.from({ length: m }, () => (Math.floor(rng.double() * 2 ** 53) + 0.5) / 2 ** 53);
    const out: number[] = [];
    for (let i = 0; i < m; i += 2) {
      const r = sigma * Math.sqrt(-2 * Math.log(u[i]));
      out.push(r * Math.cos(2 * Math.PI * u[i + 1]), r * Math.sin(2 * Math.PI * u[i + 1]));
    }
    return out.slice(0, n);
  });
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
