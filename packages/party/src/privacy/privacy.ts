// The party's privacy at run time: the noise calibrated for the job, the ledger of what it
// has spent (ledger.ts), and the release of each round's share or of a one-shot score vector.
import { type Accountant, type NoiseSource, ConfigError, accountEpsilon, calibrateSigma, osNoise, seededNoise, snapToGrid } from '@admm-share/core';
import type { PrivacyInfo } from '@admm-share/protocol';
import type { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { reportedSpent, withinBudget } from './budget.js';
import { type Released, LedgerBook, readReleasedVector, releaseRecord, releaseVectorPath, writeReleasedVector } from './ledger.js';
import { type JobParameters, type PrivacyConfig, defaultBw, gaussianShareSensitivity, mechanismFor, paperSensitivity } from './mechanism.js';
import { type ReleaseBounds, RELEASE_DEFAULTS, releaseSensitivity } from './release.js';

/**
 * How a private party's budget is shared between its data preparation's statistics and the
 * release (docs/privacy.md, section 13): both are Gaussian mechanisms, composed in Gaussian
 * differential privacy (Dong, Roth and Su 2019: mu^2 adds up), so that mu_total, at
 * delta - deltaThreshold, is the party's (epsilon, delta); the release is calibrated for
 * (releaseEpsilon, releaseDelta), which is exactly mu_release-GDP.
 */
export interface PreparationSpend {
  /** The preparation's share of mu_total^2 (--prepare-share). */
  share: number;
  /** mu of the preparation's queries, all together. */
  mu: number;
  /** The categories' threshold: the chance that a category held by one row is kept (0 without categories to estimate). */
  deltaThreshold: number;
  /** What the release is calibrated for: mu_release-GDP at releaseDelta. */
  releaseEpsilon: number;
  releaseDelta: number;
  /** Whether this run estimated the statistics, or reused those kept from an earlier run (no new spend). */
  reused: boolean;
}

/**
 * The privacy of one party's job: its noise, calibrated by the party itself (calibrate), its
 * ledger, and the refusal of a round that would overspend (check).
 */
export class Privacy {
  readonly noise: NoiseSource | undefined;
  private info: PrivacyInfo | undefined;
  private rho = 0;
  private lambda = 0;
  private bw = 0;
  private spentRounds = 0;
  /** The calibration and releases of this job restored from the ledger file after a restart. */
  private saved: { info: PrivacyInfo; rho: number; lambda: number; bw: number } | undefined;
  /** score-release: the release (paid for) in this job, sent again on a repeated request, and where it is in the release file. */
  private released: Released | undefined;
  private releasedAt = 0;
  /** The ledger of every job, read (and checked) once per process. */
  private book: LedgerBook | undefined;

  constructor(
    readonly cfg: PrivacyConfig,
    readonly preparation: PreparationSpend | null = null,
    /** The party's whole budget when the preparation took part of it (cfg then holds the release's). */
    readonly total: { epsilon: number; delta: number } | null = null,
  ) {
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
    const prep = this.preparation;
    this.info = { mechanism, epsilon, delta, rounds, sigma, sensitivity, accountant, seeded: this.noise!.seeded, ...(prep ? { preparation: { mu: prep.mu, deltaThreshold: prep.deltaThreshold } } : {}) };
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

  /** The party's ledger at `path`, opened (and checked) on first use. */
  private ledger(path: string): LedgerBook {
    if (this.book?.path !== path) this.book = LedgerBook.open(path);
    return this.book;
  }

  /** Book this job's state in the ledger (a new entry, written atomically) so that a restarted party cannot forget what it spent. */
  saveLedger(path: string, jobId: string): void {
    const release = this.released ? { offset: this.releasedAt, ...releaseRecord(this.released) } : null;
    const preparation = this.preparation ? { mu: this.preparation.mu, deltaThreshold: this.preparation.deltaThreshold } : null;
    this.ledger(path).append({ jobId, releases: this.spentRounds, epsilonSpent: this.spent, info: this.info!, rho: this.rho, lambda: this.lambda, bw: this.bw, release, preparation });
  }

  /**
   * score-release: the one noised release of this job, of `scores` for the party's own rows
   * `rows`. The first call draws the noise, books it in the ledger and then keeps it in the
   * release file (in that order: a crash in between leaves a release booked and lost, refused
   * below, never a release on disk that the ledger forgot, which LedgerBook refuses as a rewind). Every later call, in this process or after a restart, sends the
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
    this.released = released;
    this.releasedAt = this.ledger(ledger).releaseEnd;
    this.spentRounds = 1;
    this.saveLedger(ledger, jobId);
    writeReleasedVector(ledger, this.releasedAt, released);
    return values.slice();
  }

  /**
   * Restore the releases of this job from the ledger, which keeps every job's history: a job
   * run again finds its own. A malformed, edited or rewound ledger is a DataError (LedgerBook).
   */
  restoreLedger(path: string, jobId: string): void {
    const saved = this.ledger(path).job(jobId);
    if (!saved) return;
    // The job's statistics were paid for once: a run of the same job must reuse them (the kept
    // file), never estimate them again, which would spend their share twice.
    const paid = saved.preparation ?? null;
    const mine = this.preparation;
    if (paid !== null && !(mine?.reused === true && mine.mu === paid.mu && mine.deltaThreshold === paid.deltaThreshold))
      throw new ConfigError(
        `this party's ledger (${path}) records that job ${jobId} paid for its preparation's statistics (mu ${paid.mu}), but this run ${mine ? 'estimated them again' : 'has none'}: restore the kept statistics file (model-ID.preparation.json) to rejoin, or start a new job`,
      );
    if (paid === null && mine !== null && !mine.reused && saved.releases > 0)
      throw new ConfigError(`this party's ledger (${path}) records releases of job ${jobId} made without preparation statistics; this run estimated some: run it as it was, or start a new job`);
    this.spentRounds = Math.max(this.spentRounds, saved.releases);
    this.saved = { info: saved.info, rho: saved.rho, lambda: saved.lambda, bw: saved.bw };
    if (saved.release) {
      this.released = readReleasedVector(releaseVectorPath(path), saved.release);
      this.releasedAt = saved.release.offset;
    }
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
    const prep = this.preparation;
    const total = prep && i.mechanism !== 'none' ? this.total! : null;
    return {
      format: 'admm-share-privacy-report/1',
      party,
      jobId,
      mechanism: i.mechanism,
      guarantee: total
        ? `(${total.epsilon}, ${total.delta})-differential privacy in all, per row of this party's data (one row replaced): the preparation's statistics (mu ${prep!.mu.toPrecision(4)}, docs/privacy.md section 13) and the release (${guarantee}), composed in Gaussian differential privacy`
        : guarantee,
      total,
      preparation: prep,
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
