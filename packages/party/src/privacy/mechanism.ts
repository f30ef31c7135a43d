// A party's privacy setting and the mechanisms' sensitivity bounds: what the calibration
// needs, checked before the party starts. docs/privacy.md has the proofs.
import { type Csr, type Dense, ConfigError } from '@admm-share/core';
import type { AlgorithmName, MechanismName } from '@admm-share/protocol';
import type { ReleaseBounds } from './release.js';

/**
 * A party's privacy setting, its noise and its ledger. The party that owns the data
 * calibrates its own noise, keeps its own account and refuses a round that would overspend.
 * docs/privacy.md has the threat model, the neighbouring relation and the proofs.
 */
export interface PrivacyConfig {
  /** 'auto' (with a budget): score-release in a one-shot job, gaussian-share in an ADMM job. */
  mechanism: MechanismName | 'auto';
  /** Total budget for the whole training (required unless mechanism is 'none'). */
  epsilon?: number;
  delta?: number;
  /** Seeded (predictable!) noise for reproducible experiments; default: the OS CSPRNG. */
  seed?: string;
  /** gaussian-share: the model is kept in ||x_m|| <= bx. */
  bx: number;
  /** gaussian-share: each coordinate of the public target is clipped to [-bw, bw] (default: defaultBw). */
  bw?: number;
  /** paper: Lemma 1's bounds on ||x||, ||y||, ||z|| (b1) and on R'' (c1), given by the user. */
  b1?: number;
  c1?: number;
  /** Calibrate for at most this many rounds (default: the rounds the coordinator plans). */
  rounds?: number;
  /** score-release: the passive model's public bounds (default RELEASE_DEFAULTS). */
  release?: ReleaseBounds;
}

/** What the job fixes before the first round (from the coordinator's setup message). */
export interface JobParameters {
  lambda: number;
  rho: number;
  rounds: number;
  parties: number;
  /** The party's feature count d_m. */
  features: number;
  /** Aligned training rows N. */
  n: number;
  /** Default 'admm'. */
  algorithm?: AlgorithmName;
  /** one-shot: max |target_i| of the passive target (from the labels, public to this party). */
  bw?: number;
}

/** The mechanism a configuration means in a job of this algorithm, or why it does not fit. */
export function mechanismFor(configured: PrivacyConfig['mechanism'], algorithm: AlgorithmName): MechanismName {
  if (configured === 'none') return 'none';
  const fits = algorithm === 'one-shot' ? ['score-release'] : algorithm === 'admm' ? ['gaussian-share', 'paper'] : [];
  if (configured === 'auto') {
    if (fits.length === 0) throw new ConfigError(`privacy is not available with --algorithm ${algorithm} (its releases are not analysed); use --mechanism none`);
    return fits[0] as MechanismName;
  }
  if (!fits.includes(configured))
    throw new ConfigError(`--mechanism ${configured} does not fit a ${algorithm} job (${fits.length ? `it takes ${fits.join(' or ')}` : 'no mechanism is analysed for it'}); leave --mechanism out to use the one that fits`);
  return configured;
}

/**
 * Default bound on ||x_m||. On rows of norm <= 1 a score is at most ||x_m||; the central
 * a9a model on normalised rows has block norms 10.0 and 5.4 (docs/privacy.md), so 20 rarely binds.
 */
export const DEFAULT_BX = 20;

/**
 * Default clip of the target w = released - c: at the ADMM fixed point |w_i| <= |s_i| +
 * |mean_i| + |zbar_i| + |u_i| <= 3 bx + 1/(N rho), since the scaled dual is the loss gradient
 * (at most 1/N per sample for the averaged logistic loss) over rho.
 */
export function defaultBw(bx: number, n: number, rho: number): number {
  return 3 * bx + 1 / (n * rho);
}

/**
 * L2 sensitivity of one gaussian-share release (docs/privacy.md, Theorem 1): for rows of
 * norm <= 1, a public target clipped to [-bw, bw] and ||x|| <= bx, replacing row i changes
 * the other coordinates of the share by at most 2 sqrt(rho/lambda) (bx + bw) in L2 norm and
 * coordinate i by at most 2 bx, so the share moves by at most the root of their squares.
 */
export function gaussianShareSensitivity(p: { lambda: number; rho: number; bx: number; bw: number }): number {
  const others = 2 * Math.sqrt(p.rho / p.lambda) * (p.bx + p.bw);
  const own = 2 * p.bx;
  return Math.hypot(others, own);
}

/** Lemma 1 of the paper: C = 3 / (d_m rho) (lambda c1 + (1 + M rho) b1). Not a proven bound (docs/privacy.md). */
export function paperSensitivity(p: { lambda: number; rho: number; parties: number; features: number; b1: number; c1: number }): number {
  return (3 / (p.features * p.rho)) * (p.lambda * p.c1 + (1 + p.parties * p.rho) * p.b1);
}

/** Scale every row with norm > 1 to norm 1 (a per-row map, so neighbours stay neighbours). */
export function normaliseRows(X: Csr): { X: Csr; scaled: number } {
  const copy = { ...X, values: X.values.slice() };
  return { X: copy, scaled: normaliseCsrRows(copy) };
}

/** normaliseRows in place; the number of rows scaled. */
export function normaliseCsrRows(X: Csr): number {
  let scaled = 0;
  for (let i = 0; i < X.rows; i++) if (intoUnitBall(X.values, X.indptr[i], X.indptr[i + 1])) scaled++;
  return scaled;
}

/** normaliseRows for a dense matrix, in place; the number of rows scaled. */
export function normaliseDenseRows(a: Dense): number {
  let scaled = 0;
  for (let i = 0; i < a.rows; i++) if (intoUnitBall(a.data, i * a.cols, (i + 1) * a.cols)) scaled++;
  return scaled;
}

/** values[start..end), one row, scaled to norm 1 if its norm is above 1; whether it was. */
function intoUnitBall(values: Float64Array, start: number, end: number): boolean {
  let sq = 0;
  for (let k = start; k < end; k++) sq += values[k] * values[k];
  if (!(sq > 1)) return false;
  const f = 1 / Math.sqrt(sq);
  for (let k = start; k < end; k++) values[k] *= f;
  return true;
}

export function validatePrivacyConfig(c: PrivacyConfig, intercept: boolean): void {
  if (c.release) {
    const r = c.release;
    if (!(r.kappa > 0 && r.bx > 0 && r.clip > 0) || ![r.kappa, r.bx, r.clip].every(Number.isFinite))
      throw new ConfigError('--release-kappa, --release-bx and --release-clip must be positive numbers');
  }
  if (c.mechanism === 'none') {
    if (c.epsilon !== undefined) throw new ConfigError("--epsilon with --mechanism none: choose a budget or no noise, not both");
    return;
  }
  if (c.epsilon === undefined || !(c.epsilon > 0)) throw new ConfigError(`--mechanism ${c.mechanism} needs --epsilon > 0`);
  if (c.delta === undefined || !(c.delta > 0 && c.delta < 1)) throw new ConfigError(`--mechanism ${c.mechanism} needs --delta in (0, 1)`);
  if (intercept) throw new ConfigError('--intercept is not supported at a party with a privacy budget (the bounds assume no unpenalised column); the intercept lives at the active party');
  if (!(c.bx > 0) || (c.bw !== undefined && !(c.bw > 0))) throw new ConfigError('--bx and --bw must be positive');
  if (c.mechanism === 'paper' && !(c.b1! > 0 && c.c1! > 0)) throw new ConfigError('--mechanism paper needs --b1 and --c1 (Lemma 1 of the paper), both positive');
  if (c.rounds !== undefined && !(Number.isSafeInteger(c.rounds) && c.rounds >= 1)) throw new ConfigError('--privacy-rounds must be an integer >= 1');
}
