// Scoring new rows with a trained model (admm-party predict): the model file read back and
// checked against the new data (feature count and names), the rows preprocessed as in
// training, and, when the party scores with a budget, each request's scores clipped and noised
// with the Gaussian mechanism, booked in a ledger before they are sent (docs/privacy.md, 12).
import {
  type Csr,
  type FeatureTable,
  ConfigError,
  accountEpsilon,
  calibrateSigma,
  csrSelectRows,
  osNoise,
  predictScores,
  seededNoise,
  snapToGrid,
} from '@admm-share/core';
import type { NoiseSource, PackedIds } from '@admm-share/core';
import type { PartyModel } from './model-file.js';
import { reportedSpent, withinBudget } from '../privacy/budget.js';
import { ScoringLedger } from '../privacy/scoring-ledger.js';
import { normaliseRows } from '../privacy/mechanism.js';
import { clipInPlace } from '../privacy/release.js';

/** Clip of a noised score when the model has none of its own (a logit of 4 is a probability of 0.982). */
export const DEFAULT_SCORE_CLIP = 4;
/** Requests a party's budget is spread over by default: one, a batch job (online scoring must say how many). */
export const DEFAULT_PRIVACY_REQUESTS = 1;

export interface ScoringPrivacyConfig {
  epsilon: number;
  delta: number;
  /** Requests the budget pays for (a batch prediction job is one). */
  requests: number;
  /** Each score is clipped to [-clip, clip] before the noise (default: the model's own clip, or DEFAULT_SCORE_CLIP). */
  clip?: number;
  /** Seeded noise: predictable, for experiments only. */
  seed?: string;
}

/** model-p1.json -> model-p1.scoring-ledger.json */
export function scoringLedgerPath(model: string): string {
  return model.replace(/(\.json)?$/, '.scoring-ledger.json');
}

/** The new rows to score: their ids, and their features as the model was trained on them. */
export interface ScoringRows extends Pick<FeatureTable, 'file' | 'X' | 'featureNames'> {
  ids: PackedIds;
}

/** The new rows and the model, checked against each other: what `score` applies. */
export class Scorer {
  private readonly X: Csr;
  private readonly x: Float64Array;
  readonly clip: number | null;

  constructor(
    readonly model: PartyModel,
    data: Pick<ScoringRows, 'file' | 'X' | 'featureNames'>,
    readonly privacy: ScoringPrivacy | undefined,
  ) {
    const names = data.featureNames;
    if (data.X.cols !== model.features)
      throw new ConfigError(`--data ${data.file} has ${data.X.cols} feature columns, but party ${model.partyId}'s model (job ${model.jobId}) was trained on ${model.features}`);
    const differ = names.findIndex((n, j) => n !== model.featureNames[j]);
    if (differ >= 0)
      throw new ConfigError(`${data.file}: feature column ${differ + 1} is '${names[differ]}', the model of job ${model.jobId} has '${model.featureNames[differ]}' there (the columns must be the ones the model was trained on, in the same order)`);
    this.X = model.preprocessing.rowScaling ? normaliseRows(data.X).X : data.X;
    this.x = Float64Array.from(model.coefficients);
    this.clip = privacy ? privacy.clip : model.scoreClip;
  }

  /** This party's part of the scores of its file rows `rows`: x . row (+ intercept), clipped as the model says, noised with a budget. */
  score(rows: Uint32Array, ledger: string, jobId: string): Float64Array {
    const out = predictScores(csrSelectRows(this.X, rows), this.x, this.model.intercept ?? 0);
    if (this.clip !== null) clipInPlace(out, this.clip);
    if (this.privacy) this.privacy.release(out, ledger, jobId);
    return out;
  }
}

/**
 * The Gaussian mechanism on a party's scores of new rows. Neighbouring data sets differ in the
 * features of one row (its id unchanged): one score moves by at most 2 clip, so the L2
 * sensitivity of one request is 2 clip (a row appears once per request). The noise is
 * calibrated for `requests` releases with the exact (Gaussian DP) accountant, as training's.
 */
export class ScoringPrivacy {
  readonly sigma: number;
  readonly sensitivity: number;
  private readonly noise: NoiseSource;
  private releases = 0;
  /** The job whose releases `releases` counts (the ledger is per prediction job). */
  private jobId: string | undefined;

  constructor(
    readonly cfg: ScoringPrivacyConfig,
    readonly clip: number,
  ) {
    this.sensitivity = 2 * clip;
    this.sigma = calibrateSigma({ epsilon: cfg.epsilon, delta: cfg.delta, rounds: cfg.requests, sensitivity: this.sensitivity, method: 'exact' });
    this.noise = cfg.seed !== undefined ? seededNoise(cfg.seed) : osNoise();
  }

  get seeded(): boolean {
    return this.noise.seeded;
  }

  spentAfter(releases: number): number {
    return reportedSpent(accountEpsilon({ sigma: this.sigma, delta: this.cfg.delta, rounds: releases, sensitivity: this.sensitivity, method: 'exact' }), this.cfg.epsilon);
  }

  get spent(): number {
    return this.spentAfter(this.releases);
  }

  /** Restore what this job has spent from the ledger (which keeps every prediction job's releases). */
  restore(path: string, jobId: string): void {
    this.jobId = jobId;
    this.releases = 0;
    const l = ScoringLedger.open(path).job(jobId);
    if (!l) return;
    if (l.sigma !== this.sigma || l.epsilon !== this.cfg.epsilon || l.delta !== this.cfg.delta)
      throw new ConfigError(`the scoring ledger ${path} of job ${jobId} was calibrated for epsilon ${l.epsilon}, delta ${l.delta}, sigma ${l.sigma}; this party was restarted with other values`);
    this.releases = l.releases;
  }

  /** Noise `scores` in place, booking the release in the ledger first (refused beyond the budget). */
  release(scores: Float64Array, path: string, jobId: string): void {
    if (this.jobId !== jobId) this.restore(path, jobId);
    // Read again before each booking: another process may have booked requests since (of this
    // job or another), and the ledger, not this process's count, is what has been spent.
    const ledger = ScoringLedger.open(path);
    this.releases = Math.max(this.releases, ledger.job(jobId)?.releases ?? 0);
    const after = this.spentAfter(this.releases + 1);
    if (!withinBudget(after, this.cfg.epsilon))
      throw new ConfigError(`scoring budget spent: another request would spend epsilon ${after.toPrecision(4)} of ${this.cfg.epsilon} (${this.releases} of ${this.cfg.requests} requests made; --privacy-requests)`);
    this.releases++;
    ledger.append({ jobId, epsilon: this.cfg.epsilon, delta: this.cfg.delta, sigma: this.sigma, sensitivity: this.sensitivity, requests: this.cfg.requests, releases: this.releases, epsilonSpent: this.spent });
    this.noise.addNormal(scores, this.sigma);
    snapToGrid(scores, this.sigma);
  }
}
