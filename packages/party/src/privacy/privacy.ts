import {
  type Accountant,
  type Csr,
  type Dense,
  type NoiseSource,
  ConfigError,
  DataError,
  accountEpsilon,
  calibrateSigma,
  osNoise,
  seededNoise,
  snapToGrid,
  writeFileAtomic,
} from '@admm-share/core';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { type AlgorithmName, type MechanismName, type PrivacyInfo, NAME_RE, ProtocolError, validatePartyMessage } from '@admm-share/protocol';
import { type ReleaseBounds, RELEASE_DEFAULTS, releaseSensitivity } from './release.js';
import type { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';

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

/**
 * Relative tolerance of every comparison of epsilon spent with the budget. calibrateSigma and
 * accountEpsilon invert each other by bisection through erfc/exp/sqrt, so accounting the
 * calibrated number of rounds gives the budget back only up to rounding (1.0000000000000004
 * for a budget of 1; the reference vectors agree to 1e-12). 1e-9 is far above that and far
 * below a real overspend: one round more than budgeted costs about epsilon / (2 T), which is
 * more than 1e-9 epsilon for any T below 5e8 rounds.
 */
export const BUDGET_RTOL = 1e-9;

/** Whether `spent` is within `budget`, up to BUDGET_RTOL. */
export function withinBudget(spent: number, budget: number): boolean {
  return spent <= budget * (1 + BUDGET_RTOL);
}

/** What the ledger reports: an overshoot within BUDGET_RTOL is rounding, so it is the budget itself. */
export function reportedSpent(computed: number, budget: number): number {
  return computed > budget && withinBudget(computed, budget) ? budget : computed;
}

/** The ledger file's format tag; restoreLedger reads this version only. */
export const LEDGER_FORMAT = 'admm-share-ledger/3';

/** What restoreLedger keeps of a ledger file, validated field by field. */
export interface Ledger {
  jobId: string;
  releases: number;
  epsilonSpent: number;
  info: PrivacyInfo;
  rho: number;
  lambda: number;
  bw: number;
  /** score-release: the released vector's length and the SHA-256 of its file (kept next to the ledger). */
  release: { rows: number; sha256: string } | null;
}

/**
 * model-p1.ledger.json -> model-p1.release.bin: a one-shot release, kept next to its ledger so
 * that it is sent again rather than drawn again. The file holds n doubles of the party's own
 * row numbers (in its data file) and then the n released values, in the order sent.
 */
export function releaseVectorPath(ledger: string): string {
  return ledger.replace(/(\.ledger)?\.json$/, '') + '.release.bin';
}

/** One release: the party's own row numbers and the values released for them. */
interface Released {
  rows: Uint32Array;
  values: Float64Array;
}

/** The release file's contents: rows, then values, as doubles. */
function releaseFile(r: Released): Float64Array {
  const v = new Float64Array(2 * r.rows.length);
  v.set(r.rows);
  v.set(r.values, r.rows.length);
  return v;
}

/** SHA-256 of a vector's bytes, hex. */
function vectorDigest(v: Float64Array): string {
  return createHash('sha256').update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength)).digest('hex');
}

/**
 * Parse and validate a ledger read back from disk, like a message off the wire: exact keys,
 * types, ranges, and an epsilonSpent that agrees with the releases recorded. Anything else is
 * a DataError naming the file and what is wrong (a party must not guess what it has spent).
 */
export function parseLedger(path: string, text: string): Ledger {
  const bad = (detail: string): never => {
    throw new DataError(path, undefined, `privacy ledger: ${detail}`);
  };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    return bad(`not JSON (${(err as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad('expected a JSON object');
  const o = v as Record<string, unknown>;
  if (o.format !== LEDGER_FORMAT) bad(`format ${JSON.stringify(o.format)}, expected '${LEDGER_FORMAT}'`);
  const keys = ['format', 'jobId', 'releases', 'epsilonSpent', 'info', 'rho', 'lambda', 'bw', 'release'];
  for (const k of Object.keys(o)) if (!keys.includes(k)) bad(`unexpected field '${k}'`);
  for (const k of keys) if (!(k in o)) bad(`missing field '${k}'`);
  const num = (k: string, ok: (x: number) => boolean, what: string): number => {
    const x = o[k];
    if (typeof x !== 'number' || !Number.isFinite(x) || !ok(x)) return bad(`${k}: expected ${what}, got ${JSON.stringify(x)}`);
    return x;
  };
  const jobId = o.jobId;
  if (typeof jobId !== 'string' || !NAME_RE.test(jobId)) return bad(`jobId: expected a job id, got ${JSON.stringify(jobId)?.slice(0, 60)}`);
  const releases = num('releases', (x) => Number.isSafeInteger(x) && x >= 0, 'an integer >= 0');
  const epsilonSpent = num('epsilonSpent', (x) => x >= 0, 'a number >= 0');
  const rho = num('rho', (x) => x > 0, 'a positive number');
  const lambda = num('lambda', (x) => x > 0, 'a positive number');
  const bw = num('bw', (x) => x >= 0, 'a number >= 0');
  // The calibration is what a party sends in `ready`: the protocol's validator checks it.
  let ready;
  try {
    ready = validatePartyMessage({ type: 'ready', jobId, privacy: o.info });
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    const m = err.message.replace(/a map\b/g, 'a JSON object');
    return bad(m.startsWith('ready.privacy') ? `info${m.slice('ready.privacy'.length)}` : `info: ${m}`);
  }
  if (ready.type !== 'ready') return bad('info: not a calibration');
  const info = ready.privacy;
  if (info.mechanism === 'none') bad("info.mechanism is 'none': a ledger is only kept for training with noise");
  let computed: number;
  try {
    computed = accountEpsilon({ sigma: info.sigma, delta: info.delta!, rounds: releases, sensitivity: info.sensitivity, method: info.accountant! });
  } catch (err) {
    return bad(`info: cannot account ${releases} releases with it (${(err as Error).message})`);
  }
  const expected = reportedSpent(computed, info.epsilon!);
  if (Math.abs(epsilonSpent - expected) > BUDGET_RTOL * Math.max(expected, info.epsilon!))
    bad(`epsilonSpent ${epsilonSpent} does not match the ${releases} releases recorded (they spend ${expected})`);
  let release: Ledger['release'] = null;
  if (o.release !== null) {
    const r = o.release as Record<string, unknown>;
    if (typeof r !== 'object' || Array.isArray(r) || Object.keys(r).sort().join() !== 'rows,sha256' || !Number.isSafeInteger(r.rows) || (r.rows as number) < 1 || typeof r.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(r.sha256))
      return bad('release: expected null or {rows, sha256}');
    release = { rows: r.rows as number, sha256: r.sha256 };
  }
  if (info.mechanism === 'score-release' && (release === null) !== (releases === 0)) bad(`release: ${releases} releases recorded, but ${release ? 'a' : 'no'} released vector`);
  return { jobId, releases, epsilonSpent, info, rho, lambda, bw, release };
}

/**
 * The vector a restored ledger says was released, checked against its length and digest; a
 * missing or altered file leaves the release lost (undefined), which scoreRelease refuses.
 */
function readReleasedVector(path: string, expected: { rows: number; sha256: string }): Released | undefined {
  if (!existsSync(path)) return undefined;
  const bytes = readFileSync(path);
  const n = expected.rows;
  if (bytes.length !== 2 * n * 8) return undefined;
  const v = new Float64Array(2 * n);
  new Uint8Array(v.buffer).set(bytes);
  if (vectorDigest(v) !== expected.sha256) return undefined;
  return { rows: Uint32Array.from(v.subarray(0, n)), values: v.slice(n) };
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
  /** score-release: the release (paid for) in this job, sent again on a repeated request. */
  private released: Released | undefined;

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
      if (fixed.mechanism !== mechanismFor(this.cfg.mechanism, job.algorithm ?? 'admm') || fixed.epsilon !== this.cfg.epsilon || fixed.delta !== this.cfg.delta)
        throw new ConfigError(`this party's ledger for the job was calibrated for ${fixed.mechanism}, epsilon ${fixed.epsilon}, delta ${fixed.delta}; it was restarted with other values`);
      this.info = fixed;
      this.rho = was.rho;
      this.lambda = was.lambda;
      if (this.saved) this.bw = this.saved.bw;
      return fixed;
    }
    const { cfg } = this;
    const mechanism = mechanismFor(cfg.mechanism, job.algorithm ?? 'admm');
    this.lambda = job.lambda;
    // One release, whatever the coordinator plans.
    const rounds = mechanism === 'score-release' ? 1 : Math.min(job.rounds, cfg.rounds ?? job.rounds);
    this.rho = job.rho;
    if (mechanism === 'none') {
      this.info = { mechanism: 'none', epsilon: null, delta: null, rounds, sigma: 0, sensitivity: 0, accountant: null, seeded: false };
      return this.info;
    }
    const epsilon = cfg.epsilon!;
    const delta = cfg.delta!;
    let sensitivity: number;
    let accountant: Accountant = 'exact';
    if (mechanism === 'score-release') {
      if (job.bw === undefined) throw new Error('internal: a score release is calibrated with the bound of its target');
      this.bw = job.bw;
      sensitivity = releaseSensitivity({ ...this.releaseBounds, bw: job.bw });
    } else if (!(job.lambda > 0)) throw new ConfigError('privacy needs lambda > 0: the sensitivity bound divides by it');
    else if (mechanism === 'gaussian-share') {
      this.bw = cfg.bw ?? defaultBw(cfg.bx, job.n, job.rho);
      sensitivity = gaussianShareSensitivity({ lambda: job.lambda, rho: job.rho, bx: cfg.bx, bw: this.bw });
    } else {
      sensitivity = paperSensitivity({ ...job, b1: cfg.b1!, c1: cfg.c1! });
      accountant = 'advanced';
    }
    const sigma = calibrateSigma({ epsilon, delta, rounds, sensitivity, method: accountant });
    this.info = { mechanism, epsilon, delta, rounds, sigma, sensitivity, accountant, seeded: this.noise!.seeded };
    return this.info;
  }

  /** The passive model's bounds (score-release). */
  get releaseBounds(): ReleaseBounds {
    return this.cfg.release ?? RELEASE_DEFAULTS;
  }

  /** Bounds the update must respect (gaussian-share only). */
  get bounds(): { clip: number; radius: number } | undefined {
    return this.info?.mechanism === 'gaussian-share' ? { clip: this.bw, radius: this.cfg.bx } : undefined;
  }

  /** Epsilon spent after `rounds` releases (never above the budget by rounding: see reportedSpent). */
  spentAfter(rounds: number): number {
    const i = this.info!;
    if (i.mechanism === 'none') return 0;
    return reportedSpent(accountEpsilon({ sigma: i.sigma, delta: i.delta!, rounds, sensitivity: i.sensitivity, method: i.accountant! }), i.epsilon!);
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
    const r = this.released;
    const release = r ? { rows: r.rows.length, sha256: vectorDigest(releaseFile(r)) } : null;
    const ledger = { format: LEDGER_FORMAT, jobId, releases: this.spentRounds, epsilonSpent: this.spent, info: this.info, rho: this.rho, lambda: this.lambda, bw: this.bw, release };
    writeFileAtomic(path, JSON.stringify(ledger) + '\n', 0o600);
  }

  /**
   * score-release: the one noised release of this job, of `scores` for the party's own rows
   * `rows`. The first call draws the noise, keeps the release next to the ledger (the file
   * first, then the ledger, so a crash in between leaves a release that was never sent and is
   * drawn afresh) and books it. Every later call, in this process or after a restart, sends the
   * released values again for the rows asked, in the order asked, at no further cost: a
   * post-processing of the release. Rows it did not release are refused, as is a release
   * whose file is lost once the ledger has paid for it.
   */
  scoreRelease(scores: Float64Array, rows: Uint32Array, ledger: string, jobId: string): Float64Array {
    const i = this.info!;
    if (this.released) {
      const byRow = new Map<number, number>();
      this.released.rows.forEach((row, k) => byRow.set(row, this.released!.values[k]));
      const out = new Float64Array(rows.length);
      for (let k = 0; k < rows.length; k++) {
        const v = byRow.get(rows[k]);
        if (v === undefined)
          throw new ConfigError(`this party released its scores for job ${jobId} once, and is now asked for a row it did not release (row ${rows[k] + 1} of its data); it will not release again`);
        out[k] = v;
      }
      return out;
    }
    if (i.mechanism === 'none') return scores;
    if (this.spentRounds > 0) throw new ConfigError(`this party's ledger (${ledger}) records its release for job ${jobId}, but the released vector is lost; it will not release again`);
    const after = this.spentAfter(1);
    if (!withinBudget(after, i.epsilon!)) throw new ConfigError(`the release would spend epsilon ${after.toPrecision(4)} of a budget of ${i.epsilon}`);
    const values = scores.slice();
    this.noise!.addNormal(values, i.sigma);
    snapToGrid(values, i.sigma);
    const released = { rows: rows.slice(), values };
    const file = releaseFile(released);
    writeFileAtomic(releaseVectorPath(ledger), new Uint8Array(file.buffer), 0o600);
    this.released = released;
    this.spentRounds = 1;
    this.saveLedger(ledger, jobId);
    return values.slice();
  }

  /**
   * Restore the releases of this job from a ledger written before a restart. A valid ledger
   * of another job is not ours and is left alone; a malformed one is a DataError.
   */
  restoreLedger(path: string, jobId: string): void {
    if (!existsSync(path)) return;
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      throw new DataError(path, undefined, `privacy ledger: cannot read it (${e.code ?? e.message})`);
    }
    const saved = parseLedger(path, text);
    if (saved.jobId !== jobId) return;
    this.spentRounds = Math.max(this.spentRounds, saved.releases);
    this.saved = { info: saved.info, rho: saved.rho, lambda: saved.lambda, bw: saved.bw };
    if (saved.release) this.released = readReleasedVector(releaseVectorPath(path), saved.release);
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
    if (!withinBudget(after, i.epsilon!))
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
          : i.mechanism === 'score-release'
            ? `(${i.epsilon}, ${i.delta})-differential privacy for the one score vector released, per row of this party's data (one row replaced), under the assumptions of docs/privacy.md (Theorem 3)`
            : `(${i.epsilon}, ${i.delta})-differential privacy for the shares released, per row of this party's data (one row replaced), under the assumptions of docs/privacy.md; per-round noisy ADMM is a research mode`;
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
      bounds:
        i.mechanism === 'score-release'
          ? { ...this.releaseBounds, bw: this.bw }
          : i.mechanism === 'gaussian-share'
            ? { bx: this.cfg.bx, bw: this.bw }
            : i.mechanism === 'paper'
              ? { b1: this.cfg.b1, c1: this.cfg.c1 }
              : null,
      rowsNormalised: i.mechanism === 'none' ? null : { rule: 'rows with norm > 1 scaled to norm 1', rowsScaled: normalisedRows },
      noise: i.mechanism === 'none' ? null : i.seeded ? 'SEEDED: predictable by anyone who knows the seed; for experiments only, no privacy' : 'operating system CSPRNG',
      createdAt: new Date().toISOString(),
    };
  }
}
