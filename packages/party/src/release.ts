/**
 * The one-shot private training (docs/privacy.md, section 9), the party's side.
 *
 * A passive party fits x = argmin_{||x|| <= bx} kappa/2 ||x||^2 + 1/2 ||D x - t||^2 on its rows
 * (norm <= 1) with the centred labels t = y - mean(y) as the target, and releases once
 * clip(D x, -clip, clip) + N(0, sigma^2 I). Its L2 sensitivity (Theorem 3) is
 * sqrt((2 (bx + bw) / sqrt(kappa))^2 + (2 clip)^2), bw = max |t_i|.
 *
 * The active party (the label holder's own organisation) regresses each release on its own
 * features, keeps the residual's signal share (regression calibration, core's
 * denoiseRelease) and fits the combined model on [its features, the denoised columns, 1].
 */
import { type Csr, type Loss, csrWithColumns, denoiseRelease, fitCentral, predictScores } from '@admm-share/core';
import { RidgeXUpdate } from './xupdate.js';

/** The passive model's bounds: public constants, never read off the data (docs/privacy.md, 9.2). */
export interface ReleaseBounds {
  /** Ridge penalty of the passive fit; the sensitivity of the other rows falls as 1/sqrt(kappa). */
  kappa: number;
  /** ||x|| <= bx. */
  bx: number;
  /** Each released score is clipped to [-clip, clip]; one row's own score moves by at most 2 clip. */
  clip: number;
}

export const RELEASE_DEFAULTS: Readonly<ReleaseBounds> = { kappa: 100, bx: 2.5, clip: 0.6 };

/** The passive target: labels centred on their mean, and the bound bw = max |t_i| that enters the sensitivity. */
export function releaseTarget(y: Float64Array): { target: Float64Array; bw: number } {
  let mean = 0;
  for (let i = 0; i < y.length; i++) mean += y[i];
  mean /= y.length;
  const target = Float64Array.from(y, (v) => v - mean);
  let bw = 0;
  for (let i = 0; i < target.length; i++) bw = Math.max(bw, Math.abs(target[i]));
  return { target, bw };
}

/** Theorem 3 of docs/privacy.md: the L2 sensitivity of one release. */
export function releaseSensitivity(p: ReleaseBounds & { bw: number }): number {
  return Math.hypot((2 * (p.bx + p.bw)) / Math.sqrt(p.kappa), 2 * p.clip);
}

/** clip(v, -c, c) coordinate-wise, in place. */
export function clipInPlace(v: Float64Array, c: number): Float64Array {
  for (let i = 0; i < v.length; i++) v[i] = v[i] > c ? c : v[i] < -c ? -c : v[i];
  return v;
}

/**
 * The passive party's model: x from its rows D and the public target, and its clipped scores.
 * Deterministic: a restarted party fits the same x again (only the noise is drawn once).
 */
export class PassiveModel {
  readonly x: Float64Array;
  /** clip(D x): the release before its noise. */
  readonly scores: Float64Array;

  constructor(
    D: Csr,
    target: Float64Array,
    readonly bounds: ReleaseBounds,
  ) {
    const fit = new RidgeXUpdate(D, bounds.kappa, false);
    if (fit.form === 'cg') throw new RangeError(`the one-shot release needs a factorised fit; this block (${D.rows} rows x ${D.cols} features) is too large for one`);
    fit.solve(target.slice(), 1, bounds.bx);
    this.x = fit.x;
    this.scores = clipInPlace(fit.share.slice(), bounds.clip);
  }

  /** clip(X x) for other rows with the same columns (test rows, new rows). */
  scoresFor(X: Csr): Float64Array {
    return clipInPlace(predictScores(X, this.x), this.bounds.clip);
  }
}

/** Penalties the denoising ridge tries, 10^-3 .. 10^7 (chosen by generalised cross-validation). */
const GCV_GRID = Array.from({ length: 41 }, (_, k) => 10 ** (-3 + k / 4));

/** How one release was denoised, for the model file and the log. */
export interface DenoiseReport {
  party: string;
  sigma: number;
  /** The ridge penalty GCV chose for regressing the release on the active features. */
  penalty: number;
  shrink: number;
  signalVariance: number;
}

export interface ActiveFit {
  coefficients: Float64Array;
  intercept: number;
  /** One weight per passive party, in the order of the releases. */
  weights: Float64Array;
  objective: number;
  /** The active party's own model on its features alone: the comparison the job reports. */
  local: { coefficients: Float64Array; intercept: number; objective: number };
  denoising: DenoiseReport[];
}

/**
 * The active side's fit: denoise each release against [D, 1] (ridge with its penalty chosen
 * by generalised cross-validation, Golub, Heath and Wahba 1979), then fit `loss` with lambda
 * on [D, denoised columns, 1] and, for comparison, on [D, 1] alone.
 */
export function fitActive(
  D: Csr,
  y: Float64Array,
  releases: readonly { party: string; scores: Float64Array; sigma: number }[],
  loss: Loss,
  lambda: number,
): ActiveFit {
  const n = D.rows;
  const ridge = new RidgeXUpdate(D, 1, true);
  if (ridge.form === 'cg') throw new RangeError(`the active fit needs a factorised regression; this block (${D.rows} rows x ${D.cols} features) is too large for one`);
  const denoising: DenoiseReport[] = [];
  const columns = releases.map((rel) => {
    let best: { gcv: number; penalty: number; fitted: Float64Array; df: number } | undefined;
    for (const penalty of GCV_GRID) {
      // lambda = 1 and rho = 1/penalty: min penalty/2 ||x||^2 + 1/2 ||D x + b - r||^2.
      ridge.solve(rel.scores.slice(), 1 / penalty);
      const df = ridge.hatTrace(1 / penalty);
      let rss = 0;
      for (let i = 0; i < n; i++) rss += (rel.scores[i] - ridge.share[i]) ** 2;
      const gcv = rss / n / (1 - df / n) ** 2;
      if (!best || gcv < best.gcv) best = { gcv, penalty, fitted: ridge.share.slice(), df };
    }
    const d = denoiseRelease(rel.scores, best!.fitted, best!.df, rel.sigma);
    denoising.push({ party: rel.party, sigma: rel.sigma, penalty: best!.penalty, shrink: d.shrink, signalVariance: d.signalVariance });
    return d.column;
  });
  const joint = fitCentral(csrWithColumns(D, n, columns), y, loss, lambda, { intercept: true });
  const local = fitCentral(D, y, loss, lambda, { intercept: true });
  return {
    coefficients: joint.x.slice(0, D.cols),
    weights: joint.x.slice(D.cols),
    intercept: joint.intercept,
    objective: joint.objective,
    local: { coefficients: local.x, intercept: local.intercept, objective: local.objective },
    denoising,
  };
}
