// The active side of the one-shot release (docs/privacy.md, section 9): fitActive denoises
// each passive release against the active party's own features and fits the combined model.
// - with (almost) no noise, a release equal to an informative column gives back the central
//   fit on [D, column, 1], computed here by core's fitCentral on a matrix built densely;
// - the local-only model is the central fit on [D, 1];
// - a pure-noise release is shrunk away: the combined model is no better than the local one
//   beyond what one column of noise can buy;
// - an informative release with real noise still improves on the local model;
// - on a block too large to factor the denoising ridge runs on a sketch of the block: with a
//   rank at least the block's it is the exact ridge, at a lower rank close to it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gaussian, seeded } from '@admm-share/core/test-support';
import { csrFromDense, fitCentral, logistic } from '@admm-share/core';
import { exactPath, fitActive, sketchedPath } from '../privacy/release.js';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';

const LAMBDA = 1e-3;

/**
 * n rows of d features (norm <= 1) held by the active party, a column `hidden` it does not
 * hold (the passive party's score, in [-1, 1]), and +-1 labels from a logistic model on both.
 */
function data(seed: string, n: number, d: number) {
  const rand = seeded(seed);
  const g = gaussian(rand);
  const rows = Array.from({ length: n }, () => {
    const r = Array.from({ length: d }, () => g());
    const norm = Math.hypot(...r);
    return norm > 1 ? r.map((v) => v / norm) : r;
  });
  const beta = Array.from({ length: d }, () => 2 * g());
  const hidden = Float64Array.from({ length: n }, () => Math.tanh(g()));
  const y = Float64Array.from(rows, (r, i) => {
    const s = r.reduce((a, v, j) => a + v * beta[j], 0) + 3 * hidden[i] - 0.3;
    return rand() < 1 / (1 + Math.exp(-s)) ? 1 : -1;
  });
  return { rows, D: csrFromDense(rows, d), hidden, y, rand, g };
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

test('fitActive with a noiseless informative release recovers the central fit on [D, column, 1]', () => {
  const { rows, D, hidden, y } = data('release-fit-exact', 600, 4);
  const fit = fitActive(D, y, [{ party: 'p2', scores: hidden, sigma: 1e-8 }], logistic, LAMBDA);
  // The same design matrix built densely, and the central fit on it.
  const A = csrFromDense(
    rows.map((r, i) => r.concat([hidden[i]])),
    5,
  );
  const central = fitCentral(A, y, logistic, LAMBDA, { intercept: true });
  assert.equal(fit.weights.length, 1);
  assert.ok(maxAbsDiff(fit.coefficients, central.x.slice(0, 4)) <= 1e-6, `coefficients ${fit.coefficients} vs ${central.x.slice(0, 4)}`);
  assert.ok(Math.abs(fit.weights[0] - central.x[4]) <= 1e-6, `weight ${fit.weights[0]} vs ${central.x[4]}`);
  assert.ok(Math.abs(fit.intercept - central.intercept) <= 1e-6, `intercept ${fit.intercept} vs ${central.intercept}`);
  assert.ok(Math.abs(fit.objective - central.objective) <= 1e-9, `objective ${fit.objective} vs ${central.objective}`);
  // The weight is the informative one (the labels were drawn with weight 3 on this column).
  assert.ok(fit.weights[0] > 1.5, `weight ${fit.weights[0]}`);
  // The denoising kept the release: shrink 1 up to sigma^2 / residual variance.
  const [rep] = fit.denoising;
  assert.equal(rep.party, 'p2');
  assert.equal(rep.sigma, 1e-8);
  assert.ok(1 - rep.shrink <= 1e-12 && rep.signalVariance > 0.1, `shrink ${rep.shrink}, tau^2 ${rep.signalVariance}`);
  assert.ok(rep.penalty >= 1e-3 && rep.penalty <= 1e7, `GCV penalty ${rep.penalty} within its grid`);
  // The local-only model is the central fit on [D, 1].
  const local = fitCentral(D, y, logistic, LAMBDA, { intercept: true });
  assert.ok(maxAbsDiff(fit.local.coefficients, local.x) <= 1e-9, 'local coefficients');
  assert.ok(Math.abs(fit.local.intercept - local.intercept) <= 1e-9, 'local intercept');
  assert.ok(Math.abs(fit.local.objective - local.objective) <= 1e-12, 'local objective');
  assert.ok(fit.objective < fit.local.objective - 0.05, `the column helps: ${fit.objective} vs local ${fit.local.objective}`);
});

test('fitActive with a pure-noise release: the combined model is the local one up to what a column of noise buys', () => {
  for (const [seed, sigma] of [
    ['release-fit-noise-1', 1],
    ['release-fit-noise-2', 5],
    ['release-fit-noise-3', 0.1],
  ] as const) {
    const n = 2000;
    const { D, y, g } = data(seed, n, 4);
    const noise = Float64Array.from({ length: n }, () => sigma * g());
    const fit = fitActive(D, y, [{ party: 'p2', scores: noise, sigma }], logistic, LAMBDA);
    const [rep] = fit.denoising;
    // The residual variance estimates sigma^2 to about sigma^2 sqrt(2/n), so the kept share is
    // at most a few times sqrt(2/n) = 0.032.
    assert.ok(rep.shrink <= 0.1, `sigma ${sigma}: shrink ${rep.shrink}`);
    // Adding a column can only lower the training objective; a column independent of the labels
    // lowers it by about chi^2_1 / (2 n) in expectation (2.5e-4 here), a few times that at most.
    const gain = fit.local.objective - fit.objective;
    assert.ok(gain >= -1e-12, `sigma ${sigma}: the combined objective ${fit.objective} is above the local one ${fit.local.objective}`);
    assert.ok(gain <= 1e-3, `sigma ${sigma}: a noise column bought ${gain} of objective`); // (observed: 3e-10 to 2.2e-5)
  }
});

test('fitActive with an informative release under real noise: denoised, and still better than the local model', () => {
  const n = 3000;
  const { D, hidden, y, g } = data('release-fit-noisy', n, 4);
  const sigma = 0.5;
  // What a passive party releases is a ridge fit of the centred labels on its own column: here
  // the least-squares fit on the hidden column, v = b (hidden - mean), so that cov(v, t) = var(v).
  let hm = 0;
  let ym = 0;
  for (let i = 0; i < n; i++) {
    hm += hidden[i] / n;
    ym += y[i] / n;
  }
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (hidden[i] - hm) * (y[i] - ym);
    sxx += (hidden[i] - hm) ** 2;
  }
  const v = Float64Array.from(hidden, (h) => (sxy / sxx) * (h - hm));
  const noise = Float64Array.from({ length: n }, () => sigma * g());
  const release = Float64Array.from(v, (x, i) => x + noise[i]);
  // A second party whose release is noise only, listed first: the weights follow the order.
  const junk = Float64Array.from({ length: n }, () => 2 * g());
  const fit = fitActive(
    D,
    y,
    [
      { party: 'junk', scores: junk, sigma: 2 },
      { party: 'p2', scores: release, sigma },
    ],
    logistic,
    LAMBDA,
  );
  assert.deepEqual(
    fit.denoising.map((r) => r.party),
    ['junk', 'p2'],
  );
  assert.equal(fit.weights.length, 2);
  // v is independent of D, so its signal variance after [D, 1] is its own, estimated from the
  // release's covariance with the labels (sampling error about sigma std(t) / sqrt(n) = 0.009).
  let variance = 0;
  for (const x of v) variance += x ** 2 / (n - 1);
  const rep = fit.denoising[1];
  assert.ok(Math.abs(rep.signalVariance - variance) <= 0.03, `tau^2 ${rep.signalVariance}, sample variance of the released signal ${variance}`);
  assert.ok(Math.abs(rep.shrink - variance / (variance + sigma * sigma)) <= 0.05, `shrink ${rep.shrink}`);
  assert.ok(fit.denoising[0].shrink <= 0.1, `junk shrink ${fit.denoising[0].shrink}`);
  assert.ok(fit.weights[1] > 1, `weight on the informative release ${fit.weights[1]}`);
  assert.ok(fit.objective < fit.local.objective - 0.02, `combined ${fit.objective}, local ${fit.local.objective}`);
});

test('the sketched ridge path (blocks too large to factor) is the exact one at full rank, and close to it at lower rank', () => {
  const rand = seeded('sketch');
  const g = gaussian(rand);
  const n = 120;
  // 40 columns of which 12 carry most of the variance (decaying scales), sparse-ish.
  const rows = Array.from({ length: n }, () => Array.from({ length: 40 }, (_, j) => (rand() < 0.6 ? g() * (j < 12 ? 1 : 0.02) : 0)));
  const D = csrFromDense(rows, 40);
  const r = Float64Array.from(rows, (row) => row[0] - row[3] + 0.5 * g());
  const exact = exactPath(new RidgeXUpdate(D, 1, true));
  // At rank 14 the dropped directions (variance about 0.03 each) still count at penalty 0.01,
  // so the lower rank is compared where the ridge shrinks them away anyway.
  for (const [rank, tol, penalties] of [[40, 1e-9, [0.01, 1, 100]], [14, 0.02, [1, 100]]] as const) {
    const sketch = sketchedPath(D, rank);
    for (const penalty of penalties) {
      const a = exact.fit(r, penalty);
      const b = sketch.fit(r, penalty);
      const err = Math.sqrt(a.reduce((acc, v, i) => acc + (v - b[i]) ** 2, 0) / a.reduce((acc, v) => acc + v * v, 0));
      assert.ok(err <= tol, `rank ${rank}, penalty ${penalty}: relative error ${err}`);
      if (rank === 40) assert.ok(Math.abs(exact.df(penalty) - sketch.df(penalty)) <= 1e-9 * exact.df(penalty), `df ${sketch.df(penalty)} vs ${exact.df(penalty)}`);
    }
  }
});
