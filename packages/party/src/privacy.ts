import {
  type Accountant,
  type Csr,
  type NoiseSource,
  ConfigError,
  accountEpsilon,
  calibrateSigma,
  osNoise,
  seededNoise,
  snapToGrid,
  writeFileAtomic,
} from '@admm-share/core';
import { existsSync, readFileSync } from 'node:fs';
import type { MechanismName, PrivacyInfo } from '@admm-share/protocol';
import type { RidgeXUpdate } from './xupdate.js';

/**
 * A party's privacy setting, its noise and its ledger. The party that owns the data
 * calibrates its own noise, keeps its own account and refuses a round that would overspend.
 * docs/privacy.md has the threat model, the neighbouring relation and the proofs.
 */
export interface PrivacyConfig {
  mechanism: MechanismName;
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
  const values = X.values.slice();
  let scaled = 0;
  for (let i = 0; i < X.rows; i++) {
    let sq = 0;
    for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) sq += values[k] * values[k];
    if (sq > 1) {
      const f = 1 / Math.sqrt(sq);
      for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) values[k] *= f;
      scaled++;
    }
  }
  return { X: { ...X, values }, scaled };
}

export function validatePrivacyConfig(c: PrivacyConfig, intercept: boolean): void {
  if (c.mechanism === 'none') {
    if (c.epsilon !== undefined) throw new ConfigError("--epsilon with --mechanism none: choose a budget or no noise, not both");
    return;
  }
  if (c.epsilon === undefined || !(c.epsilon > 0)) throw new ConfigError(`--mechanism ${c.mechanism} needs --epsilon > 0`);
  if (c.delta === undefined || !(c.delta > 0 && c.delta < 1)) throw new ConfigError(`--mechanism ${c.mechanism} needs --delta in (0, 1)`);
  if (intercept) throw new ConfigError('--intercept is not supported with privacy (the bounds assume no unpenalised column)');
  if (!(c.bx > 0) || (c.bw !== undefined && !(c.bw > 0))) throw new ConfigError('--bx and --bw must be positive');
  if (c.mechanism === 'paper' && !(c.b1! > 0 && c.c1! > 0)) throw new ConfigError('--mechanism paper needs --b1 and --c1 (Lemma 1 of the paper), both positive');
  if (c.rounds !== undefined && !(Number.isSafeInteger(c.rounds) && c.rounds >= 1)) throw new ConfigError('--privacy-rounds must be an integer >= 1');
}

export class Privacy {
  readonly noise: NoiseSource | undefined;
  private info: PrivacyInfo | undefined;
  private rho = 0;
  private lambda = 0;
  private bw = 0;
  private spentRounds = 0;
  /** The calibration and releases of this job restored from the ledger file after a restart. */
  private saved: { info: PrivacyInfo; rho: number; lambda: number; bw: number } | undefined;

  constructor(readonly cfg: PrivacyConfig) {
    this.noise = cfg.mechanism === 'none' ? undefined : cfg.seed !== undefined ? seededNoise(cfg.seed) : osNoise();
  }

  get enabled(): boolean {
    return this.cfg.mechanism !== 'none';
  }

  /**
   * Calibrate the noise for the job; the result goes to the coordinator in `ready`. The
   * calibration is made once per job: a later setup (after a rejoin) or a restart (from the
   * saved ledger) keeps it, and is refused if its lambda or rho would raise the sensitivity.
   * Otherwise a coordinator could announce more rounds on every rejoin and make past releases
   * look cheaper than they were.
   */
  calibrate(job: JobParameters): PrivacyInfo {
    const fixed = this.info ?? this.saved?.info;
    if (fixed && fixed.mechanism !== 'none') {
      const was = this.info ? { lambda: this.lambda, rho: this.rho } : this.saved!;
      if (job.rho > was.rho * (1 + 1e-12) || job.lambda < was.lambda * (1 - 1e-12))
        throw new ConfigError(`the job's lambda ${job.lambda} / rho ${job.rho} differ from the ${was.lambda} / ${was.rho} this party's noise was calibrated for`);
      if (fixed.epsilon !== this.cfg.epsilon || fixed.delta !== this.cfg.delta)
        throw new ConfigError(`this party's ledger for the job was calibrated for epsilon ${fixed.epsilon}, delta ${fixed.delta}; it was restarted with other values`);
      this.info = fixed;
      this.rho = was.rho;
      this.lambda = was.lambda;
      if (this.saved) this.bw = this.saved.bw;
      return fixed;
    }
    const { cfg } = this;
    this.lambda = job.lambda;
    const rounds = Math.min(job.rounds, cfg.rounds ?? job.rounds);
    this.rho = job.rho;
    if (cfg.mechanism === 'none') {
      this.info = { mechanism: 'none', epsilon: null, delta: null, rounds, sigma: 0, sensitivity: 0, accountant: null, seeded: false };
      return this.info;
    }
    if (!(job.lambda > 0)) throw new ConfigError('privacy needs lambda > 0: the sensitivity bound divides by it');
    const epsilon = cfg.epsilon!;
    const delta = cfg.delta!;
    let sensitivity: number;
    let accountant: Accountant;
    if (cfg.mechanism === 'gaussian-share') {
      this.bw = cfg.bw ?? defaultBw(cfg.bx, job.n, job.rho);
      sensitivity = gaussianShareSensitivity({ lambda: job.lambda, rho: job.rho, bx: cfg.bx, bw: this.bw });
      accountant = 'exact';
    } else {
      sensitivity = paperSensitivity({ ...job, b1: cfg.b1!, c1: cfg.c1! });
      accountant = 'advanced';
    }
    const sigma = calibrateSigma({ epsilon, delta, rounds, sensitivity, method: accountant });
    this.info = { mechanism: cfg.mechanism, epsilon, delta, rounds, sigma, sensitivity, accountant, seeded: this.noise!.seeded };
    return this.info;
  }

  /** Bounds the update must respect (gaussian-share only). */
  get bounds(): { clip: number; radius: number } | undefined {
    return this.cfg.mechanism === 'gaussian-share' ? { clip: this.bw, radius: this.cfg.bx } : undefined;
  }

  /** Epsilon spent after `rounds` releases. */
  spentAfter(rounds: number): number {
    const i = this.info!;
    if (i.mechanism === 'none') return 0;
    return accountEpsilon({ sigma: i.sigma, delta: i.delta!, rounds, sensitivity: i.sensitivity, method: i.accountant! });
  }

  get spent(): number {
    return this.spentAfter(this.spentRounds);
  }

  /** Releases made so far in this job. */
  get releases(): number {
    return this.spentRounds;
  }

  /** Keep the ledger on disk (atomically) so that a restarted party cannot forget what it spent. */
  saveLedger(path: string, jobId: string): void {
    const ledger = { format: 'admm-share-ledger/2', jobId, releases: this.spentRounds, epsilonSpent: this.spent, info: this.info, rho: this.rho, lambda: this.lambda, bw: this.bw };
    writeFileAtomic(path, JSON.stringify(ledger) + '\n', 0o600);
  }

  /** Restore the releases of this job from a ledger written before a restart. */
  restoreLedger(path: string, jobId: string): void {
    if (!existsSync(path)) return;
    const saved = JSON.parse(readFileSync(path, 'utf8')) as { jobId?: string; releases?: number; info?: PrivacyInfo; rho?: number; lambda?: number; bw?: number };
    if (saved.jobId !== jobId || !Number.isSafeInteger(saved.releases)) return;
    this.spentRounds = Math.max(this.spentRounds, saved.releases!);
    if (saved.info && saved.rho && saved.lambda) this.saved = { info: saved.info, rho: saved.rho, lambda: saved.lambda, bw: saved.bw ?? 0 };
  }

  /**
   * Whether round `round` may run: its rho must not exceed the one the noise was calibrated
   * for, and the ledger must stay within budget. The check is against the rounds actually
   * released, so a coordinator that asks for more than it announced is refused.
   */
  check(round: number, rho: number): { ok: true } | { ok: false; why: string } {
    const i = this.info!;
    if (i.mechanism === 'none') return { ok: true };
    if (rho > this.rho * (1 + 1e-12)) return { ok: false, why: `rho ${rho} exceeds the ${this.rho} the noise was calibrated for` };
    // The ledger counts releases, not round numbers: a round run again after a resume is
    // another release and is paid for again.
    const after = this.spentAfter(this.spentRounds + 1);
    if (after > i.epsilon! * (1 + 1e-9))
      return { ok: false, why: `round ${round} would spend epsilon ${after.toPrecision(4)} of a budget of ${i.epsilon} (rounds paid for: ${i.rounds})` };
    return { ok: true };
  }

  /** Turn the share the update left in x.released into what is sent, and book it. */
  release(x: RidgeXUpdate): void {
    const i = this.info!;
    if (i.mechanism === 'none') return;
    if (i.mechanism === 'gaussian-share') this.noise!.addNormal(x.released, i.sigma);
    else x.addModelNoise(i.sigma, (out, sigma) => this.noise!.addNormal(out, sigma));
    snapToGrid(x.released, i.sigma);
    this.spentRounds++;
  }

  /** The party's own privacy report, written next to its model. */
  report(party: string, jobId: string, normalisedRows: number): object {
    const i = this.info!;
    const guarantee =
      i.mechanism === 'none'
        ? 'none: shares were sent without noise'
        : i.mechanism === 'paper'
          ? 'NOT ESTABLISHED: the paper\'s mechanism (eq. 17, Theorem 3) releases shares confined to the column space of this party\'s data, and its sensitivity bound is not proven (docs/privacy.md); reported for reproduction only'
          : `(${i.epsilon}, ${i.delta})-differential privacy for the shares released, per row of this party's data (one row replaced), under the assumptions of docs/privacy.md`;
    return {
      format: 'admm-share-privacy-report/1',
      party,
      jobId,
      mechanism: i.mechanism,
      guarantee,
      epsilon: i.epsilon,
      delta: i.delta,
      epsilonSpent: this.spent,
      roundsReleased: this.spentRounds,
      roundsBudgeted: i.rounds,
      sigma: i.sigma,
      sensitivity: i.sensitivity,
      accountant: i.accountant,
      bounds: i.mechanism === 'gaussian-share' ? { bx: this.cfg.bx, bw: this.bw } : i.mechanism === 'paper' ? { b1: this.cfg.b1, c1: this.cfg.c1 } : null,
      rowsNormalised: i.mechanism === 'none' ? null : { rule: 'rows with norm > 1 scaled to norm 1', rowsScaled: normalisedRows },
      noise: i.mechanism === 'none' ? null : i.seeded ? 'SEEDED: predictable by anyone who knows the seed; for experiments only, no privacy' : 'operating system CSPRNG',
      createdAt: new Date().toISOString(),
    };
  }
}
