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
import { Worker } from 'node:worker_threads';
import { type ClassWeights, type Csr, type Dense, type Loss, type LossName, csrColumnMeans, csrMatTVec, csrMatVec, csrWithColumns, denoiseRelease, dot, fitCentral, predictScores, rangeFinder, ritzPairs, seededNoise } from '@admm-share/core';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { oneAnswer } from './one-answer.js';

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
  /** Conjugate gradient iterations of the fit (0 when the block was factorised). */
  readonly iterations: number;

  constructor(
    D: Csr,
    target: Float64Array,
    readonly bounds: ReleaseBounds,
  ) {
    // A block above the eigendecomposition limit is solved by conjugate gradients to 1e-12: for
    // one solve they cost less than forming and factoring (so no Cholesky form).
    const fit = new RidgeXUpdate(D, bounds.kappa, false, { choleskyLimit: 0 });
    fit.solve(target.slice(), 1, bounds.bx);
    this.x = fit.x;
    this.iterations = fit.lastIterations;
    this.scores = clipInPlace(fit.share.slice(), bounds.clip);
  }

  /** clip(X x) for other rows with the same columns (test rows, new rows). */
  scoresFor(X: Csr | Dense): Float64Array {
    return clipInPlace(predictScores(X, this.x), this.bounds.clip);
  }
}

/** Penalties the denoising ridge tries, 10^-3 .. 10^7 (chosen by generalised cross-validation). */
const GCV_GRID = Array.from({ length: 41 }, (_, k) => 10 ** (-3 + k / 4));

/** Rank of the sketch the denoising ridge uses on an active block too large to factor. */
export const SKETCH_RANK = 100;

/** Ridge regression of a vector on [D, 1] at any penalty, and the trace of its hat matrix. */
interface RidgePath {
  /** Fitted values of the ridge fit of r with this penalty (on the coefficients of D; the intercept is free). */
  fit(r: Float64Array, penalty: number): Float64Array;
  df(penalty: number): number;
  /** 'exact', or the rank of the sketch. */
  basis: string;
}

/** The exact path from RidgeXUpdate's eigendecomposition (blocks it factors). */
export function exactPath(ridge: RidgeXUpdate): RidgePath {
  return {
    // lambda = 1 and rho = 1/penalty: min penalty/2 ||x||^2 + 1/2 ||D x + b - r||^2.
    fit: (r, penalty) => {
      ridge.solve(r.slice(), 1 / penalty);
      return ridge.share.slice();
    },
    df: (penalty) => ridge.hatTrace(1 / penalty),
    basis: 'exact',
  };
}

/**
 * Ridge on the top `rank` principal directions of the centred block D~ = D - 1 mu^T, found by
 * a randomised range finder with one power iteration (Halko, Martinsson and Tropp 2011):
 * D~ ~ P diag(s) V^T with orthonormal P (N x l), so the fit is mean(r) + P diag(s^2 / (s^2 +
 * penalty)) P^T (r - mean(r)) and the trace 1 + sum s^2 / (s^2 + penalty). For a block too
 * large to factor; the denoising only needs E[release | D], and the directions it drops
 * carry the least of D. The sketch's random matrix is seeded (it is not a privacy noise: the
 * active party sends no noise), so the fit is reproducible.
 */
export function sketchedPath(D: Csr, rank: number): RidgePath {
  const { rows: n, cols: d } = D;
  const l = Math.min(rank + 10, d, n - 1);
  const mu = csrColumnMeans(D);
  const centred = (out: Float64Array, v: Float64Array) => {
    csrMatVec(out, D, v);
    const c = dot(mu, v);
    for (let i = 0; i < n; i++) out[i] -= c;
    return out;
  };
  const centredT = (out: Float64Array, u: Float64Array) => {
    csrMatTVec(out, D, u);
    let c = 0;
    for (let i = 0; i < n; i++) c += u[i];
    for (let j = 0; j < d; j++) out[j] -= mu[j] * c;
    return out;
  };
  const noise = seededNoise('admm-share active denoising sketch');
  const omega = Array.from({ length: l }, () => {
    const w = new Float64Array(d);
    noise.addNormal(w, 1);
    return w;
  });
  const Q = rangeFinder(
    omega.map((w) => centred(new Float64Array(n), w)),
    (q) => centred(new Float64Array(n), centredT(new Float64Array(d), q)),
    1,
  );
  const k = Q.length;
  const Bt = Q.map((q) => centredT(new Float64Array(d), q));
  const C = new Float64Array(k * k);
  for (let a = 0; a < k; a++) for (let b = a; b < k; b++) C[a * k + b] = C[b * k + a] = dot(Bt[a], Bt[b]);
  // Q^T D~ D~^T Q = Bt^T Bt: its eigenvalues are the squared singular values of D~ on the basis.
  const { values, vectors: P } = ritzPairs(Q, C);
  const s2 = values.map((v) => Math.max(v, 0));
  return {
    fit: (r, penalty) => {
      let mean = 0;
      for (let i = 0; i < n; i++) mean += r[i];
      mean /= n;
      const out = new Float64Array(n).fill(mean);
      for (let j = 0; j < k; j++) {
        if (s2[j] === 0) continue;
        const c = ((dot(P[j], r) - mean * sum(P[j])) * s2[j]) / (s2[j] + penalty);
        const p = P[j];
        for (let i = 0; i < n; i++) out[i] += c * p[i];
      }
      return out;
    },
    df: (penalty) => 1 + s2.reduce((a, v) => a + v / (v + penalty), 0),
    basis: `sketch of rank ${k}`,
  };
}

const sum = (v: Float64Array) => v.reduce((a, x) => a + x, 0);

/** How one release was denoised, for the model file and the log. */
export interface DenoiseReport {
  party: string;
  sigma: number;
  /** The ridge penalty GCV chose for regressing the release on the active features. */
  penalty: number;
  shrink: number;
  signalVariance: number;
  /** The regression's basis: 'exact', or a sketch of the block (too large to factor). */
  basis: string;
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
 * by generalised cross-validation, Golub, Heath and Wahba 1979; the signal's share read off the
 * residual's covariance with the labels'), then fit `loss` with lambda
 * on [D, denoised columns, 1] and, for comparison, on [D, 1] alone. With flipped labels
 * (label privacy) `loss` is the one corrected for the flips (core's trainingLoss), for both; with
 * class weights, the weighted one, for both.
 */
export function fitActive(
  D: Csr,
  y: Float64Array,
  releases: readonly { party: string; scores: Float64Array; sigma: number }[],
  loss: Loss,
  lambda: number,
  /** The labels' flip probability (label privacy), 0 without. */
  labelFlip = 0,
): ActiveFit {
  const n = D.rows;
  // A penalty path: many values of rho, which the eigendecomposition serves and Cholesky does not.
  const ridge = new RidgeXUpdate(D, 1, true, { choleskyLimit: 0, deflationRank: 0 }); // cg: only its form is used (the sketched path)
  const path = ridge.form === 'cg' ? sketchedPath(D, SKETCH_RANK) : exactPath(ridge);
  const denoising: DenoiseReport[] = [];
  // The labels' residual on the basis each release is denoised on (core's denoiseRelease says
  // why tau^2 is read off the covariance with it); flipped labels covary 1 - 2p times less.
  let meanY = 0;
  for (let i = 0; i < n; i++) meanY += y[i] / n;
  const centred = Float64Array.from(y, (v) => (v - meanY) / (1 - 2 * labelFlip));
  const columns = releases.map((rel) => {
    let best: { gcv: number; penalty: number; fitted: Float64Array; df: number } | undefined;
    for (const penalty of GCV_GRID) {
      const fitted = path.fit(rel.scores, penalty);
      const df = path.df(penalty);
      let rss = 0;
      for (let i = 0; i < n; i++) rss += (rel.scores[i] - fitted[i]) ** 2;
      const gcv = rss / n / (1 - df / n) ** 2;
      if (!best || gcv < best.gcv) best = { gcv, penalty, fitted, df };
    }
    const target = path.fit(centred, best!.penalty);
    for (let i = 0; i < n; i++) target[i] = centred[i] - target[i];
    const d = denoiseRelease(rel.scores, best!.fitted, best!.df, rel.sigma, target);
    denoising.push({ party: rel.party, sigma: rel.sigma, penalty: best!.penalty, shrink: d.shrink, signalVariance: d.signalVariance, basis: path.basis });
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

/** What fitActive needs, as it crosses to a worker thread. */
export interface FitInput {
  D: Csr;
  y: Float64Array;
  releases: { party: string; scores: Float64Array; sigma: number }[];
  loss: LossName;
  /** The flip probability of the labels (label privacy at the coordinator), 0 without: the fit uses the corrected loss. */
  labelFlip: number;
  /** The class weights of the loss (admm-coordinator --class-weight), none: unweighted; they multiply the corrected loss. */
  classWeights: ClassWeights | undefined;
  lambda: number;
}

/**
 * fitActive in a worker thread, so that a long fit (tens of seconds on a block too large to
 * factor) does not stop the party from answering heartbeats. Deterministic like fitActive.
 */
export async function fitInThread(input: FitInput): Promise<ActiveFit> {
  const { message, code } = await oneAnswer<ActiveFit>(new Worker(new URL('./fit-thread.js', import.meta.url), { workerData: input }));
  if (!message) throw new Error(`the fit's worker thread exited with code ${code} without a result`);
  return message;
}
