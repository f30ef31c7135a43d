// The sensitivity bound that gaussian-share calibrates its noise with (docs/privacy.md,
// Theorem 1), checked against the party's actual update code:
// - the formula itself, against values computed by hand;
// - soundness: random neighbouring pairs (one row replaced, rows of norm <= 1) and random
//   public histories, and a hill-climbing search for the worst neighbour, never give a share
//   difference above the bound;
// - tightness: constructed neighbours reach at least 95 % of the bound, and the search reaches
//   the bound's 2 B_x term wherever the ball can bind. A bound that is wrong by a constant
//   factor (halved, say) or an update that forgets to clip its target fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gaussian, seeded } from '@admm-share/core/test-support';
import { type Csr, DenseRows, csrFromDense } from '@admm-share/core';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { defaultBw, gaussianShareSensitivity, normaliseDenseRows, normaliseRows } from '../privacy/mechanism.js';
import { hillClimb, intoBall, randomRow, rowMove } from './neighbours.js';

/** Relative rounding allowed above the bound (the solver is exact up to floating point). */
const ROUNDING = 1e-9;

interface Bounds {
  lambda: number;
  rho: number;
  bx: number;
  bw: number;
}

function share(D: Csr, p: Bounds, released: Float64Array, c: Float64Array): Float64Array {
  const x = new RidgeXUpdate(D, p.lambda, false);
  x.released.set(released);
  x.updateFromBroadcast(c, p.rho, { clip: p.bw, radius: p.bx });
  return x.share.slice();
}

function distance(a: Float64Array, b: Float64Array): number {
  let sq = 0;
  for (let k = 0; k < a.length; k++) sq += (a[k] - b[k]) ** 2;
  return Math.sqrt(sq);
}

/** ||s(D) - s(D')|| for D' = D with row i replaced by `replacement`, after the same public history. */
function neighbourDifference(rows: number[][], i: number, replacement: number[], d: number, p: Bounds, released: Float64Array, c: Float64Array): number {
  const other = rows.slice();
  other[i] = replacement;
  return distance(share(csrFromDense(rows, d), p, released, c), share(csrFromDense(other, d), p, released, c));
}

test('gaussianShareSensitivity is Theorem 1 of docs/privacy.md, checked against values computed by hand', () => {
  // Delta = sqrt( (2 sqrt(rho/lambda) (bx + bw))^2 + (2 bx)^2 ).
  const cases: [Bounds, number, string][] = [
    // sqrt(0.01/0.04) = 0.5; 2 * 0.5 * (2 + 1) = 3; 2 * 2 = 4; sqrt(9 + 16) = 5.
    [{ lambda: 0.04, rho: 0.01, bx: 2, bw: 1 }, 5, '3-4-5'],
    // (2 sqrt(1e-3) (1 + 3))^2 = 4 * 1e-3 * 16 = 0.064; (2 * 1)^2 = 4; sqrt(4.064) = 2.01593650693666441...
    [{ lambda: 1, rho: 1e-3, bx: 1, bw: 3 }, 2.0159365069366644, 'the near-tight case below'],
    // (2 sqrt(1e-4) * 4)^2 = 0.0064; sqrt(4.0064) = 2.00159936051148857...
    [{ lambda: 1, rho: 1e-4, bx: 1, bw: 3 }, 2.0015993605114886, 'rho = 1e-4'],
    // rho = lambda: (2 (0.5 + 1.5))^2 = 16, (2 * 0.5)^2 = 1, sqrt(17) = 4.12310562561766054...
    [{ lambda: 0.3, rho: 0.3, bx: 0.5, bw: 1.5 }, 4.1231056256176606, 'rho = lambda'],
  ];
  for (const [p, want, label] of cases) {
    const got = gaussianShareSensitivity(p);
    assert.ok(Math.abs(got - want) <= 1e-14 * want, `${label}: ${got}, by hand ${want}`);
  }
  // The a9a defaults (docs/privacy.md, section 8: "Delta = 44.7"): N = 32561, lambda = 1e-4,
  // rho = 0.01/N, bx = 20, so bw = 3 * 20 + 1/(N rho) = 60 + 1/0.01 = 160;
  // rho/lambda = 0.01/(32561 * 1e-4) = 1/325.61, sqrt = 0.0554180363076471...;
  // 2 * 0.0554180363 * (20 + 160) = 19.9504930707529625...; 2 * 20 = 40;
  // sqrt(19.9504930707529625^2 + 1600) = 44.6992413108562948...
  const n = 32561;
  const rho = 0.01 / n;
  const bw = defaultBw(20, n, rho);
  assert.ok(Math.abs(bw - 160) <= 1e-12 * 160, `default bw ${bw}`);
  const a9a = gaussianShareSensitivity({ lambda: 1e-4, rho, bx: 20, bw });
  assert.ok(Math.abs(a9a - 44.69924131085629) <= 1e-12 * 44.7, `a9a default sensitivity ${a9a}`);
});

test('random neighbouring data sets and histories: the share difference never exceeds the bound', () => {
  const rand = seeded('sensitivity');
  let worstRatio = 0;
  let trials = 0;
  for (let set = 0; set < 60; set++) {
    const n = 5 + Math.floor(rand() * 40);
    const d = 1 + Math.floor(rand() * 8);
    const p = { lambda: 10 ** (-3 + 3 * rand()), rho: 10 ** (-3 + 4 * rand()), bx: 10 ** (-1 + 2 * rand()), bw: 10 ** (-1 + 2 * rand()) };
    const rows = Array.from({ length: n }, () => randomRow(rand, d, rand() * 0.5));
    const D = csrFromDense(rows, d);
    const bound = gaussianShareSensitivity(p);
    // A public history: each round's broadcast and released share are the same for both
    // data sets (the adversary conditions on what it saw).
    let released = new Float64Array(n);
    for (let round = 0; round < 4; round++) {
      const scale = 10 ** (-1 + 3 * rand());
      const c = Float64Array.from({ length: n }, () => (2 * rand() - 1) * scale);
      const base = share(D, p, released, c);
      for (let pair = 0; pair < 8; pair++) {
        const i = Math.floor(rand() * n);
        const replaced = rows.map((r) => r.slice());
        // Adversarial replacements too: the row's negation, or a zero row.
        const kind = rand();
        replaced[i] = kind < 0.3 ? rows[i].map((v) => -v) : kind < 0.4 ? new Array(d).fill(0) : randomRow(rand, d, 0);
        const diff = distance(base, share(csrFromDense(replaced, d), p, released, c));
        assert.ok(diff <= bound * (1 + ROUNDING), `set ${set} round ${round}: difference ${diff} exceeds the bound ${bound}`);
        worstRatio = Math.max(worstRatio, diff / bound);
        trials++;
      }
      released = Float64Array.from(base, (v) => v + (2 * rand() - 1) * scale);
    }
  }
  assert.ok(trials >= 1000);
  // Random pairs rarely come close (the tight cases are constructed and searched for below);
  // this only says that the pairs tried are not all trivial.
  assert.ok(worstRatio >= 0.3, `largest observed difference / bound = ${worstRatio.toFixed(3)}`);
});

test('near-tight: one flipped row among identical rows, ball binding, reaches >= 95 % of the bound', () => {
  // Rows all equal to a unit vector u and a target clipped to +bw everywhere: the
  // unconstrained minimiser is x = u rho N bw / (lambda + rho N), outside the ball, so x = bx u.
  // Flipping row i to -u leaves x' = bx u (its unconstrained minimiser, with rho (N - 2) bw in
  // the numerator, is still outside the ball), so s - s' is 2 bx at coordinate i and zero
  // elsewhere: exactly 2 bx, against a bound whose other term is small when rho << lambda.
  const rand = seeded('near-tight');
  const cases = [
    // 1e-3 * 2000 * 3 / (1 + 2) = 2 > 1 = bx; ratio 2 / sqrt(4.064) = 0.99209...
    { n: 2000, d: 1, lambda: 1, rho: 1e-3, bx: 1, bw: 3, ratio: 2 / Math.sqrt(4.064) },
    // 1e-4 * 20000 * 3 / 3 = 2 > 1; ratio 2 / sqrt(4.0064) = 0.99920...
    { n: 20000, d: 1, lambda: 1, rho: 1e-4, bx: 1, bw: 3, ratio: 2 / Math.sqrt(4.0064) },
    // Three features, a random direction, bx = 2.5, bw = 10: 0.01 * 400 * 10 / 5 = 8 > 2.5;
    // bound sqrt((2 sqrt(0.01) 12.5)^2 + 25) = sqrt(6.25 + 25) = 5.59017; ratio 5 / 5.59017 = 0.89443.
    // Not 95 %: here the other term is large. Listed to show the own-row term is met exactly.
    { n: 400, d: 3, lambda: 1, rho: 1e-2, bx: 2.5, bw: 10, ratio: 5 / Math.sqrt(31.25) },
    // The same with rho = 1e-4 and N = 40000: 1e-4 * 40000 * 10 / 5 = 8; bound sqrt(0.0625 + 25); ratio 0.99875.
    { n: 40000, d: 3, lambda: 1, rho: 1e-4, bx: 2.5, bw: 10, ratio: 5 / Math.sqrt(25.0625) },
  ];
  let best = 0;
  for (const { n, d, ratio, ...p } of cases) {
    const u = intoBall(Array.from({ length: d }, gaussian(rand)).map((v, _, a) => v / Math.hypot(...a)));
    const rows = Array.from({ length: n }, () => u);
    // A history: whatever was released, the broadcast puts every target far above bw.
    const released = Float64Array.from({ length: n }, () => 100 * (rand() - 0.5));
    const c = Float64Array.from(released, (r) => r - p.bw * (2 + rand()));
    const diff = neighbourDifference(rows, 7, u.map((v) => -v), d, p, released, c);
    const bound = gaussianShareSensitivity(p);
    assert.ok(diff <= bound * (1 + ROUNDING), `N ${n}: difference ${diff} exceeds the bound ${bound}`);
    assert.ok(Math.abs(diff - 2 * p.bx) <= 1e-9 * p.bx, `N ${n}, d ${d}: difference ${diff}, by hand 2 bx = ${2 * p.bx}`);
    assert.ok(Math.abs(diff / bound - ratio) <= 1e-9, `N ${n}: ratio ${diff / bound}, by hand ${ratio}`);
    best = Math.max(best, diff / bound);
  }
  assert.ok(best >= 0.95, `the bound is loose: the best constructed case reaches ${best.toFixed(4)} of it`);
});

test('the clip of the target bounds what a far-away target at the replaced row can do (computed by hand)', () => {
  // N = 50 rows [1], lambda = 1, rho = 0.1, bx = 1, bw = 0.5; the broadcast leaves a target of
  // 1e6 at row 0 and 0 elsewhere. Clipped to 0.5, x = rho * 0.5 / (lambda + rho N) = 0.05 / 6
  // = 1/120 (inside the ball); with row 0 flipped to [-1], x' = -1/120. So s - s' is
  // 1/120 - (-1)(-1/120) = 0 at row 0 and x - x' = 2/120 at each of the 49 others:
  // 7 * 2/120 = 7/60 = 0.11666... Without the clip x = 1 and x' = -1 (the ball binds) and the
  // difference would be 7 * 2 = 14, six times the bound sqrt((2 sqrt(0.1) 1.5)^2 + 4) = 2.2136.
  const n = 50;
  const p = { lambda: 1, rho: 0.1, bx: 1, bw: 0.5 };
  const rows = Array.from({ length: n }, () => [1]);
  const c = new Float64Array(n);
  c[0] = -1e6;
  const diff = neighbourDifference(rows, 0, [-1], 1, p, new Float64Array(n), c);
  assert.ok(Math.abs(diff - 7 / 60) <= 1e-12, `difference ${diff}, by hand 7/60 = ${7 / 60}`);
  assert.ok(diff <= gaussianShareSensitivity(p));
});

/**
 * Hill climbing for the worst neighbour of a data set of n rows (d features): the search
 * moves the replaced row (row 0), its replacement, the other rows and the public history
 * (the broadcast c; the released share is a fixed public vector, and only the target
 * w = released - c enters the update), and keeps a move when ||s - s'|| / bound grows.
 * Returns the largest ratio seen; every pair evaluated is checked against the bound.
 */
function climb(rand: () => number, n: number, d: number, p: Bounds, iterations: number): number {
  const g = gaussian(rand);
  const bound = gaussianShareSensitivity(p);
  const row = () => intoBall(Array.from({ length: d }, () => g()));
  const released = Float64Array.from({ length: n }, () => p.bw * g());
  interface State {
    rows: number[][];
    replacement: number[];
    c: Float64Array;
    /** The share of the unchanged data set, filled in by evaluate. */
    s?: Float64Array;
  }
  const evaluate = (st: State): number => {
    const other = st.rows.slice();
    other[0] = st.replacement;
    st.s = share(csrFromDense(st.rows, d), p, released, st.c);
    const diff = distance(st.s, share(csrFromDense(other, d), p, released, st.c));
    assert.ok(diff <= bound * (1 + ROUNDING), `n ${n} d ${d} ${JSON.stringify(p)}: difference ${diff} exceeds the bound ${bound}`);
    return diff / bound;
  };
  // Start from random data and targets of random sign, some beyond the clip.
  const start: State = { rows: Array.from({ length: n }, row), replacement: row(), c: Float64Array.from(released, (r) => r - p.bw * (rand() < 0.5 ? -1 : 1) * 2 * rand()) };
  return hillClimb(
    rand,
    start,
    evaluate,
    7,
    (state, move, s) => {
      const moved = rowMove(state, move, s, g, rand);
      if (moved) return moved;
      const next: State = { ...state };
      if (move === 3) next.c = state.c.map((v) => v + s * p.bw * g());
      else if (move === 4) {
        // A far-away target at one row: what the clip is there for.
        next.c = state.c.slice();
        next.c[Math.floor(rand() * n)] += 10 * s * p.bw * g();
      } else if (move === 5) {
        // The target's sign flipped at a few rows.
        next.c = state.c.slice();
        for (let k = 0; k < 1 + s * 4; k++) {
          const j = Math.floor(rand() * n);
          next.c[j] = 2 * released[j] - next.c[j];
        }
      } else {
        // Targets that agree in sign with the current scores (beyond the clip at some rows): the
        // history that drives x to the edge of the ball.
        next.c = Float64Array.from(released, (r, j) => r - Math.sign(state.s![j]) * p.bw * (1 + s * rand()));
      }
      return next;
    },
    iterations,
  );
}

test('hill climbing for the worst neighbour stays within the bound, and finds the 2 B_x term wherever the ball can bind', () => {
  const rand = seeded('worst-neighbour');
  // Anything goes: small and large N, d > N (the N x N form of the update), either bound term dominant.
  for (let set = 0; set < 12; set++) {
    const n = 3 + Math.floor(rand() * 38);
    const d = 1 + Math.floor(rand() * 6);
    const p = { lambda: 10 ** (-2 + 2 * rand()), rho: 10 ** (-2 + 3 * rand()), bx: 10 ** (-1 + 2 * rand()), bw: 10 ** (-1 + 2 * rand()) };
    climb(rand, n, d, p, 300);
  }
  // Where the ball can bind (rho N >= 3 lambda and bw >= 2 bx: the unconstrained x reaches
  // about 3/4 bw >= 1.5 bx once the targets agree in sign) and rho << lambda, the own-row term
  // 2 bx is almost the whole bound: the search, started from random data, must get there.
  for (let set = 0; set < 4; set++) {
    const n = 300 + Math.floor(rand() * 200);
    const d = 1 + Math.floor(rand() * 3);
    const bx = 10 ** (-1 + 2 * rand());
    const lambda = 10 ** (-1 + 2 * rand());
    const p = { lambda, rho: (lambda * (3 + rand())) / n, bx, bw: bx * (2 + 0.5 * rand()) };
    const own = (2 * p.bx) / gaussianShareSensitivity(p);
    const best = Math.max(climb(rand, n, d, p, 300), climb(rand, n, d, p, 300));
    assert.ok(own >= 0.9, `set ${set}: the case meant (own term ${own})`);
    // (Observed: 0.93 to 0.97 of the bound, within 0.3 % of the own-row term.)
    assert.ok(best >= 0.97 * own, `set ${set} (n ${n}, d ${d}): the search reached ${best.toFixed(4)} of the bound, the own-row term alone is ${own.toFixed(4)}`);
  }
});

test('normaliseRows scales rows with norm > 1 to norm 1 and leaves the others alone', () => {
  const X = csrFromDense([
    [3, 4],
    [0.3, 0.4],
    [0, 0],
  ]);
  const { X: Y, scaled } = normaliseRows(X);
  assert.equal(scaled, 1);
  [0.6, 0.8, 0.3, 0.4].forEach((v, k) => assert.ok(Math.abs(Y.values[k] - v) < 1e-15));
  assert.deepEqual(Array.from(X.values), [3, 4, 0.3, 0.4], 'input untouched');
});

test('normaliseDenseRows scales rows with norm > 1 to norm 1 in place, wherever DenseRows has moved them, as normaliseRows does', () => {
  const rand = seeded('dense-normalise');
  const rows = 37;
  const cols = 5;
  const original = Array.from({ length: rows }, () => Array.from({ length: cols }, () => rand() * 2 - 1));
  const m = new DenseRows({ rows, cols, data: Float64Array.from(original.flat()) });
  m.front([5, 30, 2, 17, 0, 36]);
  const want = normaliseRows(csrFromDense(original));
  assert.ok(want.scaled > 0 && want.scaled < rows, 'some rows scaled, some not');
  assert.equal(normaliseDenseRows(m.matrix), want.scaled);
  const got = m.selectCsr(Array.from({ length: rows }, (_, i) => i));
  assert.deepEqual(Array.from(got.indptr), Array.from(want.X.indptr));
  got.values.forEach((v, k) => assert.ok(Math.abs(v - want.X.values[k]) < 1e-15, `entry ${k}: ${v} against ${want.X.values[k]}`));
});
