// The sensitivity bound that gaussian-share calibrates its noise with, checked against the
// party's actual update code: for random small data sets, random neighbouring pairs (one row
// replaced, rows of norm <= 1) and random public histories, the share computed on the two
// data sets never differs by more than the bound, and the bound is not vacuous.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { seeded } from '@admm-share/core/test-support';
import { type Csr, csrFromDense } from '@admm-share/core';
import { RidgeXUpdate } from '../xupdate.js';
import { gaussianShareSensitivity, normaliseRows } from '../privacy.js';

/** Largest observed / bound must stay above this: the bound is tight to within a factor of 4. */
const MAX_SLACK = 4;

function randomRow(rand: () => number, d: number, sparsity: number): number[] {
  const row = Array.from({ length: d }, () => (rand() < sparsity ? 0 : 2 * rand() - 1));
  const norm = Math.hypot(...row);
  const target = rand() < 0.5 ? 1 : rand(); // often exactly on the unit sphere, the worst case
  return norm === 0 ? row : row.map((v) => (v / norm) * target);
}

function share(D: Csr, lambda: number, rho: number, released: Float64Array, c: Float64Array, bx: number, bw: number): Float64Array {
  const x = new RidgeXUpdate(D, lambda, false);
  x.released.set(released);
  x.updateFromBroadcast(c, rho, { clip: bw, radius: bx });
  return x.share.slice();
}

test('gaussian-share: the observed share difference of neighbouring data sets never exceeds the calibrated bound', () => {
  const rand = seeded('sensitivity');
  let worstRatio = 0;
  let trials = 0;
  for (let set = 0; set < 60; set++) {
    const n = 5 + Math.floor(rand() * 40);
    const d = 1 + Math.floor(rand() * 8);
    const lambda = 10 ** (-3 + 3 * rand());
    const rho = 10 ** (-3 + 4 * rand());
    const bx = 10 ** (-1 + 2 * rand());
    const bw = 10 ** (-1 + 2 * rand());
    const rows = Array.from({ length: n }, () => randomRow(rand, d, rand() * 0.5));
    const D = csrFromDense(rows, d);
    const bound = gaussianShareSensitivity({ lambda, rho, bx, bw });
    // A public history: each round's broadcast and released share are the same for both
    // data sets (the adversary conditions on what it saw).
    let released = new Float64Array(n);
    for (let round = 0; round < 4; round++) {
      const scale = 10 ** (-1 + 3 * rand());
      const c = Float64Array.from({ length: n }, () => (2 * rand() - 1) * scale);
      const base = share(D, lambda, rho, released, c, bx, bw);
      for (let pair = 0; pair < 8; pair++) {
        const i = Math.floor(rand() * n);
        const replaced = rows.map((r) => r.slice());
        // Adversarial replacements too: the row's negation, or a zero row.
        const kind = rand();
        replaced[i] = kind < 0.3 ? rows[i].map((v) => -v) : kind < 0.4 ? new Array(d).fill(0) : randomRow(rand, d, 0);
        const other = share(csrFromDense(replaced, d), lambda, rho, released, c, bx, bw);
        let diff = 0;
        for (let k = 0; k < n; k++) diff += (base[k] - other[k]) ** 2;
        diff = Math.sqrt(diff);
        assert.ok(diff <= bound * (1 + 1e-9), `set ${set} round ${round}: difference ${diff} exceeds the bound ${bound}`);
        worstRatio = Math.max(worstRatio, diff / bound);
        trials++;
      }
      released = Float64Array.from(base, (v) => v + (2 * rand() - 1) * scale);
    }
  }
  assert.ok(trials >= 1000);
  console.log(`${trials} neighbouring pairs; largest observed difference / bound = ${worstRatio.toFixed(3)}`);
  assert.ok(worstRatio >= 1 / MAX_SLACK, `the bound is loose: the largest observed difference is ${worstRatio.toFixed(3)} of it`);
});

test('gaussian-share: the worst case is approached when the ball binds and the row flips', () => {
  // One feature, rows +-1: x is pushed to the ball's edge, and flipping one row moves that
  // sample's score from +bx to -bx, the 2 bx term of the bound.
  const n = 1000;
  const bx = 1;
  const bw = 2;
  const rows = Array.from({ length: n }, () => [1]);
  const flipped = rows.map((r, k) => (k === 0 ? [-1] : r));
  const c = new Float64Array(n).fill(-50); // target w = 50, clipped to 2: x wants to be 2 and stops at 1
  const lambda = 1e-2;
  const rho = 1e-2;
  const a = share(csrFromDense(rows, 1), lambda, rho, new Float64Array(n), c, bx, bw);
  const b = share(csrFromDense(flipped, 1), lambda, rho, new Float64Array(n), c, bx, bw);
  const diff = Math.hypot(...a.map((v, k) => v - b[k]));
  const bound = gaussianShareSensitivity({ lambda, rho, bx, bw });
  assert.ok(diff <= bound);
  assert.ok(Math.abs(a[0] - b[0] - 2 * bx) < 1e-9, `own-row change ${a[0] - b[0]}`);
  assert.ok(diff / bound > 0.3, `ratio ${diff / bound}`);
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
