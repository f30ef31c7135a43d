import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Matrix, solve } from 'ml-matrix';
import { csrFromDense, csrHStack, fitCentral, logistic, squared } from '@admm-share/core';
import { CHUNK } from '../numerics/admm-kernels.js';
import { AdmmStep, type Variant } from '../numerics/admm-step.js';
import { gaussian, randomVector, seeded } from '@admm-share/core/test-support';

// ---------------------------------------------------------------------------------------
// Helpers written independently of the code under test
// ---------------------------------------------------------------------------------------

function randomLabels(rand: () => number, n: number): Float64Array {
  return Float64Array.from({ length: n }, () => (rand() < 0.5 ? -1 : 1));
}

/** log(1 + exp(x)), stable for large |x|. */
function softplus(x: number): number {
  return x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x));
}

/** 1 / (1 + exp(-x)) */
function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

/** Brute-force minimiser of a unimodal f on [lo, hi] by golden-section search. */
function goldenSection(f: (x: number) => number, lo: number, hi: number): number {
  const g = (Math.sqrt(5) - 1) / 2;
  let a = lo;
  let b = hi;
  let c = b - g * (b - a);
  let d = a + g * (b - a);
  let fc = f(c);
  let fd = f(d);
  for (let it = 0; it < 300 && b - a > 1e-15 * Math.max(1, Math.abs(a) + Math.abs(b)); it++) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - g * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + g * (b - a);
      fd = f(d);
    }
  }
  return (a + b) / 2;
}

function assertClose(actual: number, expected: number, tol: number, what: string): void {
  const err = Math.abs(actual - expected);
  assert.ok(err <= tol, `${what}: got ${actual}, expected ${expected} (error ${err.toExponential(3)} > ${tol.toExponential(3)})`);
}

/** Random shares with a few large entries so the logistic prox also meets saturated margins. */
function randomShares(rand: () => number, M: number, n: number): Float64Array[] {
  return Array.from({ length: M }, (_, m) => {
    const s = randomVector(rand, n, 2, 0.3 * (m - 1));
    s[0] = 40 * (m + 1);
    s[1] = -25 * (m + 1);
    return s;
  });
}

function coordinator(variant: Variant, loss: typeof logistic, y: Float64Array, M: number, lambda: number, rho: number, alpha: number): AdmmStep {
  return new AdmmStep({ variant, loss, y, parties: M, lambda, rho, alpha, tolerance: { abs: 1e-9, rel: 1e-9 } });
}

// ---------------------------------------------------------------------------------------
// z-update, exact sharing form
// ---------------------------------------------------------------------------------------

for (const { rhoN, alpha } of [
  { rhoN: 0.5, alpha: 1.6 },
  { rhoN: 50, alpha: 1 },
  { rhoN: 0.01, alpha: 1.8 },
]) {
  test(`exact form: zbar minimises l(M zbar) + M rho/2 (zbar - v)^2; dual and broadcast (rho*N = ${rhoN}, alpha = ${alpha})`, () => {
    const rand = seeded(1000 + rhoN * 10 + alpha);
    const N = 40;
    const M = 3;
    const rho = rhoN / N;
    const y = randomLabels(rand, N);
    const coord = coordinator('exact', logistic, y, M, 0.01, rho, alpha);
    for (let round = 0; round < 3; round++) {
      const uOld = Float64Array.from(coord.dualVar);
      const zOld = Float64Array.from(coord.z);
      const shares = randomShares(rand, M, N);
      const sharesCopy = shares.map((s) => Float64Array.from(s));
      coord.step(shares);
      assert.deepEqual(shares, sharesCopy, 'step must not modify the shares');
      for (let i = 0; i < N; i++) {
        let S = 0;
        for (const s of shares) S += s[i];
        const mean = S / M;
        const relaxed = alpha * mean + (1 - alpha) * zOld[i];
        const v = uOld[i] + relaxed;
        const yi = y[i];
        const f = (z: number) => softplus(-yi * M * z) / N + ((M * rho) / 2) * (z - v) * (z - v);
        // The minimiser is within 1/(N rho) of v (|l'| <= M/N).
        const r = 1 / (N * rho) + 1;
        const zGolden = goldenSection(f, v - r, v + r);
        const z = coord.z[i];
        const scale = Math.max(1, Math.abs(v));
        assertClose(z, zGolden, 1e-6 * scale, `round ${round} sample ${i}: zbar vs golden section`);
        // No worse than the brute-force minimiser, up to rounding: evaluating f near its minimum
        // cancels in (z - v), and v itself is known only to a few ulps (the coordinator forms it
        // in another order), which moves f by (M rho/2) (ulps of v)^2. Stationarity below is the sharp test.
        const vUlps = 8 * Number.EPSILON * Math.max(1, Math.abs(v));
        assert.ok(f(z) <= f(zGolden) + 64 * Number.EPSILON * Math.abs(f(zGolden)) + ((M * rho) / 2) * vUlps * vUlps, `round ${round} sample ${i}: f(zbar) > f(golden)`);
        // Stationarity to near machine precision.
        const g1 = (-yi * M * sigmoid(-yi * M * z)) / N;
        const g2 = M * rho * (z - v);
        assertClose(g1 + g2, 0, 1e-11 * (M / N + M * rho * (Math.abs(z) + Math.abs(v))), `round ${round} sample ${i}: stationarity`);
        // u_new = u_old + relaxed mean - zbar;  c = mean - zbar + u_new.
        const uNew = uOld[i] + relaxed - z;
        assertClose(coord.dualVar[i], uNew, 1e-12 * scale, `round ${round} sample ${i}: u`);
        assertClose(coord.c[i], mean - z + uNew, 1e-12 * scale, `round ${round} sample ${i}: c`);
        assertClose(coord.sum[i], S, 1e-12 * Math.abs(S) + 1e-300, `round ${round} sample ${i}: sum`);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------
// z-update, the paper's form
// ---------------------------------------------------------------------------------------

for (const rhoN of [1, 0.05, 30]) {
  test(`paper form: z minimises l(z) - y z + rho/2 (z - S)^2; y += rho (S - z); c = S - z + y/rho (rho*N = ${rhoN})`, () => {
    const rand = seeded(2000 + rhoN * 10);
    const N = 40;
    const M = 3;
    const rho = rhoN / N;
    const y = randomLabels(rand, N);
    const coord = coordinator('paper', logistic, y, M, 0.01, rho, 1.6);
    for (let round = 0; round < 3; round++) {
      const dualOld = Float64Array.from(coord.dualVar);
      const shares = randomShares(rand, M, N);
      coord.step(shares);
      for (let i = 0; i < N; i++) {
        let S = 0;
        for (const s of shares) S += s[i];
        const yi = y[i];
        const yd = dualOld[i];
        const f = (z: number) => softplus(-yi * z) / N - yd * z + (rho / 2) * (z - S) * (z - S);
        // The minimiser is within (1/N + |yd|)/rho of S.
        const r = (1 / N + Math.abs(yd)) / rho + 1;
        const zGolden = goldenSection(f, S - r, S + r);
        const z = coord.z[i];
        const scale = Math.max(1, Math.abs(S), Math.abs(yd / rho));
        assertClose(z, zGolden, 1e-6 * scale, `round ${round} sample ${i}: z vs golden section`);
        assert.ok(f(z) <= f(zGolden) + 64 * Number.EPSILON * Math.max(Math.abs(f(zGolden)), Math.abs(yd * z)), `round ${round} sample ${i}: f(z) > f(golden)`);
        const g = (-yi * sigmoid(-yi * z)) / N - yd + rho * (z - S);
        assertClose(g, 0, 1e-11 * (1 / N + Math.abs(yd) + rho * (Math.abs(z) + Math.abs(S))), `round ${round} sample ${i}: stationarity`);
        const ydNew = yd + rho * (S - z);
        assertClose(coord.dualVar[i], ydNew, 1e-12 * Math.max(1 / N, Math.abs(yd), rho * scale), `round ${round} sample ${i}: y`);
        assertClose(coord.c[i], S - z + ydNew / rho, 1e-11 * scale, `round ${round} sample ${i}: c`);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------
// Squared loss: closed forms
// ---------------------------------------------------------------------------------------

test('squared loss, exact form: zbar = (y/N + rho v)/(M/N + rho), two steps', () => {
  const rand = seeded(31);
  const N = 25;
  const M = 4;
  const rho = 0.7 / N;
  const alpha = 1.5;
  const y = randomVector(rand, N, 3, 1);
  const coord = coordinator('exact', squared, y, M, 0.1, rho, alpha);
  for (let round = 0; round < 2; round++) {
    const uOld = Float64Array.from(coord.dualVar);
    const zOld = Float64Array.from(coord.z);
    const shares = Array.from({ length: M }, () => randomVector(rand, N, 2));
    coord.step(shares);
    for (let i = 0; i < N; i++) {
      const mean = shares.reduce((acc, s) => acc + s[i], 0) / M;
      const relaxed = alpha * mean + (1 - alpha) * zOld[i];
      const v = uOld[i] + relaxed;
      const z = (y[i] / N + rho * v) / (M / N + rho);
      const scale = Math.max(1, Math.abs(v), Math.abs(y[i]));
      assertClose(coord.z[i], z, 1e-13 * scale, `round ${round} sample ${i}: zbar`);
      assertClose(coord.dualVar[i], uOld[i] + relaxed - z, 1e-12 * scale, `round ${round} sample ${i}: u`);
      assertClose(coord.c[i], mean - z + (uOld[i] + relaxed - z), 1e-12 * scale, `round ${round} sample ${i}: c`);
    }
  }
});

test('squared loss, paper form: z = (y/N + y_dual + rho S)/(1/N + rho), two steps', () => {
  const rand = seeded(32);
  const N = 25;
  const M = 2;
  const rho = 2 / N;
  const y = randomVector(rand, N, 3, 1);
  const coord = coordinator('paper', squared, y, M, 0.1, rho, 1);
  for (let round = 0; round < 2; round++) {
    const ydOld = Float64Array.from(coord.dualVar);
    const shares = Array.from({ length: M }, () => randomVector(rand, N, 2));
    coord.step(shares);
    for (let i = 0; i < N; i++) {
      const S = shares.reduce((acc, s) => acc + s[i], 0);
      const z = (y[i] / N + ydOld[i] + rho * S) / (1 / N + rho);
      const ydNew = ydOld[i] + rho * (S - z);
      const scale = Math.max(1, Math.abs(S), Math.abs(y[i]), Math.abs(ydOld[i] / rho));
      assertClose(coord.z[i], z, 1e-13 * scale, `round ${round} sample ${i}: z`);
      assertClose(coord.dualVar[i], ydNew, 1e-13 * scale, `round ${round} sample ${i}: y`);
      assertClose(coord.c[i], S - z + ydNew / rho, 1e-12 * scale, `round ${round} sample ${i}: c`);
    }
  }
});

// ---------------------------------------------------------------------------------------
// objective(penaltySq)
// ---------------------------------------------------------------------------------------

test('objective(penaltySq) = (1/N) sum log(1 + exp(-y_i S_i)) + lambda/2 penaltySq', () => {
  const rand = seeded(41);
  const N = 60;
  const M = 3;
  const lambda = 0.037;
  const y = randomLabels(rand, N);
  for (const variant of ['exact', 'paper'] as const) {
    const coord = coordinator(variant, logistic, y, M, lambda, 0.5 / N, 1.6);
    for (let round = 0; round < 2; round++) {
      const shares = randomShares(rand, M, N);
      coord.step(shares);
      let loss = 0;
      for (let i = 0; i < N; i++) {
        const S = shares.reduce((acc, s) => acc + s[i], 0);
        loss += softplus(-y[i] * S);
      }
      loss /= N;
      for (const p of [0, 1.25, 17]) {
        const expected = loss + (lambda / 2) * p;
        assertClose(coord.objective(p), expected, 1e-13 * expected, `${variant} round ${round} penaltySq ${p}`);
      }
    }
  }
});

test('step rejects a wrong number of shares or a wrong share length', () => {
  const coord = coordinator('exact', logistic, Float64Array.of(1, -1, 1), 2, 0.1, 1, 1);
  assert.throws(() => coord.step([new Float64Array(3)]), RangeError);
  assert.throws(() => coord.step([new Float64Array(3), new Float64Array(2)]), RangeError);
});

// ---------------------------------------------------------------------------------------
// End to end, in process: parties solve their ridge x-update with dense ml-matrix solves
// ---------------------------------------------------------------------------------------

interface DenseParty {
  d: number;
  /** Row-major N x d block. */
  D: Float64Array;
  /** K = (lambda I + rho D^T D)^-1 rho D^T, d x N row-major: x = K w. */
  K: Float64Array;
  x: Float64Array;
  share: Float64Array;
}

function makeParty(block: number[][], lambda: number, rho: number): DenseParty {
  const n = block.length;
  const d = block[0].length;
  const Dm = new Matrix(block.map((r) => [...r]));
  const lhs = Dm.transpose().mmul(Dm).mul(rho);
  for (let j = 0; j < d; j++) lhs.set(j, j, lhs.get(j, j) + lambda);
  const Km = solve(lhs, Dm.transpose().mul(rho));
  const K = new Float64Array(d * n);
  for (let j = 0; j < d; j++) for (let i = 0; i < n; i++) K[j * n + i] = Km.get(j, i);
  return { d, D: Float64Array.from(block.flat()), K, x: new Float64Array(d), share: new Float64Array(n) };
}

/** x = argmin lambda/2 ||x||^2 + rho/2 ||D x - (s - c)||^2; share = D x. */
function partyUpdate(p: DenseParty, c: Float64Array): void {
  const n = c.length;
  const w = p.share.map((s, i) => s - c[i]);
  for (let j = 0; j < p.d; j++) {
    let acc = 0;
    for (let i = 0; i < n; i++) acc += p.K[j * n + i] * w[i];
    p.x[j] = acc;
  }
  for (let i = 0; i < n; i++) {
    let acc = 0;
    for (let j = 0; j < p.d; j++) acc += p.D[i * p.d + j] * p.x[j];
    p.share[i] = acc;
  }
}

function makeDataset(seed: number, N: number, widths: number[]): { blocks: number[][][]; y: Float64Array } {
  const rand = seeded(seed);
  const g = gaussian(rand);
  const blocks = widths.map((d) => Array.from({ length: N }, () => Array.from({ length: d }, () => g())));
  const truth = widths.map((d) => Array.from({ length: d }, () => g()));
  const y = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    let t = 0.3;
    blocks.forEach((b, m) => b[i].forEach((v, j) => (t += v * truth[m][j])));
    y[i] = rand() < sigmoid(t) ? 1 : -1;
  }
  return { blocks, y };
}

interface RunResult {
  rounds: number;
  objective: number;
  primal: number;
  x: Float64Array;
}

function runInProcess(
  variant: Variant,
  blocks: number[][][],
  y: Float64Array,
  lambda: number,
  rho: number,
  alpha: number,
  maxRounds: number,
  done: (objective: number, primal: number) => boolean,
): RunResult {
  const N = y.length;
  const M = blocks.length;
  const parties = blocks.map((b) => makeParty(b, lambda, rho));
  const coord = coordinator(variant, logistic, y, M, lambda, rho, alpha);
  coord.step(parties.map((p) => p.share)); // initial step from zero shares
  let objective = Number.NaN;
  let primal = Number.NaN;
  let round = 0;
  for (round = 1; round <= maxRounds; round++) {
    for (const p of parties) partyUpdate(p, coord.c);
    const stats = coord.step(parties.map((p) => p.share));
    // Objective of the model just pushed, and the primal residual, computed here.
    let loss = 0;
    let res = 0;
    for (let i = 0; i < N; i++) {
      let S = 0;
      for (const p of parties) S += p.share[i];
      loss += softplus(-y[i] * S);
      const r = variant === 'exact' ? S / M - coord.z[i] : S - coord.z[i];
      res += r * r;
    }
    primal = Math.sqrt(variant === 'exact' ? M * res : res);
    let pen = 0;
    for (const p of parties) for (const v of p.x) pen += v * v;
    objective = loss / N + (lambda / 2) * pen;
    assertClose(stats.primal, primal, 1e-9 * primal + 1e-15, `round ${round}: stats.primal`);
    assertClose(coord.objective(pen), objective, 1e-12 * objective, `round ${round}: coordinator objective`);
    if (done(objective, primal)) break;
  }
  const x = Float64Array.from(parties.flatMap((p) => Array.from(p.x)));
  return { rounds: round, objective, primal, x };
}

test('end to end in process: exact form (alpha 1.6, rho = 0.1/N) reaches the central optimum; paper form (rho = 1/N) gets within 1e-3', () => {
  const N = 300;
  const widths = [4, 3, 5];
  const lambda = 1e-3;
  const { blocks, y } = makeDataset(7, N, widths);
  const X = csrHStack(blocks.map((b, m) => csrFromDense(b, widths[m])));
  const central = fitCentral(X, y, logistic, lambda);
  const fStar = central.objective;
  assert.ok(fStar > 0.2 && fStar < 0.69, `sanity: f* = ${fStar}`);

  const exact = runInProcess('exact', blocks, y, lambda, 0.1 / N, 1.6, 2000, (f, r) => f - fStar <= 1e-7 * fStar && r < 1e-6);
  const gap = (exact.objective - fStar) / fStar;
  assert.ok(exact.objective >= fStar * (1 - 1e-12), `exact: objective ${exact.objective} below f* ${fStar}`);
  assert.ok(gap <= 1e-7, `exact: relative gap ${gap.toExponential(3)} after ${exact.rounds} rounds`);
  assert.ok(exact.primal < 1e-6, `exact: primal residual ${exact.primal.toExponential(3)} after ${exact.rounds} rounds`);
  // The model itself is close to the central one (strongly convex problem).
  let dx = 0;
  let nx = 0;
  for (let j = 0; j < exact.x.length; j++) {
    dx = Math.max(dx, Math.abs(exact.x[j] - central.x[j]));
    nx = Math.max(nx, Math.abs(central.x[j]));
  }
  assert.ok(dx <= 1e-2 * nx, `exact: coefficients differ from central by ${dx.toExponential(3)}`);

  const paper = runInProcess('paper', blocks, y, lambda, 1 / N, 1, 2000, (f) => f - fStar <= 1e-3 * fStar);
  const paperGap = (paper.objective - fStar) / fStar;
  assert.ok(paper.objective >= fStar * (1 - 1e-12), `paper: objective ${paper.objective} below f* ${fStar}`);
  assert.ok(paperGap <= 1e-3, `paper: relative gap ${paperGap.toExponential(3)} after ${paper.rounds} rounds`);
});

test("the exact step's passes in WebAssembly give the TypeScript's bits: three parties, an odd number of samples over several chunks, with and without Anderson's F(v), in a team or not; so does the step with only the prox and loss there (a state too large for one memory with Anderson's)", () => {
  const rand = seeded(91);
  const n = 2 * CHUNK + 1001;
  const M = 3;
  const y = randomLabels(rand, n);
  for (const anderson of [0, 3])
    for (const team of [false, true]) {
      const opts = { variant: 'exact' as const, loss: logistic, y, parties: M, lambda: 1e-3, rho: 0.05 / n, alpha: 1.6, tolerance: { abs: 1e-6, rel: 1e-4 }, anderson, team };
      const wasm = new AdmmStep(opts);
      const prox = new AdmmStep({ ...opts, kernels: 'prox' });
      const twins = new AdmmStep({ ...opts, kernels: false });
      try {
        assert.equal(wasm.webAssembly, true);
        assert.equal(prox.webAssembly, true);
        assert.equal(twins.webAssembly, false);
        const zero = Array.from({ length: M }, () => new Float64Array(n));
        for (const co of [wasm, prox, twins]) co.step(zero, true);
        for (let r = 1; r <= 6; r++) {
          // Shares that move each round, as a party's would.
          const shares = randomShares(rand, M, n).map((s) => s.map((v) => v * 4));
          const b = twins.step(shares);
          for (const [kind, co] of [['all kernels', wasm], ['prox kernels', prox]] as const) {
            const what = `${kind}, anderson ${anderson}, team ${team}, round ${r}`;
            assert.deepEqual(co.step(shares), b, `${what}: the residuals`);
            for (let m = 0; m < M; m++) assert.deepEqual(Array.from(co.cFor(m)), Array.from(twins.cFor(m)), `${what}: party ${m}'s vector`);
            assert.deepEqual(Array.from(co.z), Array.from(twins.z), `${what}: z`);
            assert.deepEqual(Array.from(co.dualVar), Array.from(twins.dualVar), `${what}: the dual`);
            assert.equal(co.objective(1), twins.objective(1), `${what}: the objective`);
          }
        }
      } finally {
        for (const co of [wasm, prox, twins]) co.close();
      }
    }
});

test('closed while its worker thread sums the loss, a step in a team still gives the objective, the same as one thread', () => {
  const rand = seeded(17);
  const n = 3 * CHUNK + 5;
  const y = randomLabels(rand, n);
  const opts = { variant: 'exact' as const, loss: logistic, y, parties: 2, lambda: 1e-3, rho: 0.05 / n, alpha: 1.6, tolerance: { abs: 1e-6, rel: 1e-4 }, anderson: 3 };
  const inTeam = new AdmmStep({ ...opts, team: true });
  const serial = new AdmmStep({ ...opts, team: false });
  const shares = randomShares(rand, 2, n);
  for (const co of [inTeam, serial]) {
    co.step(shares.map((s) => new Float64Array(s.length)), true);
    co.step(shares);
  }
  inTeam.close();
  serial.close();
  assert.equal(inTeam.objective(1), serial.objective(1));
});
