/**
 * The job: what every phase after alignment works on (its samples and labels in row order,
 * the setup the parties get, whether it evaluates), built by one function for a new job
 * (from the alignment) and for a resumed one (from the checkpoint); and what the parties'
 * ready messages add to it (privacy settings, the rounds their budgets pay for).
 */
import type { Logger } from 'pino';
import { ConfigError, PeerError, resolveClassWeights } from '@admm-share/core';
import type { AlgorithmName, PrivacyInfo, SampleSet, Setup } from '@admm-share/protocol';
import { type AlignedSet, AlignmentError, alignSet } from '../alignment/alignment.js';
import { type SelectionReport, chooseTestRows, splitAligned, testSelectionOf } from '../alignment/test-rows.js';
import type { Matched, Parties } from '../connections/parties.js';
import type { Variant } from '../numerics/admm-step.js';
import type { CoordinatorConfig } from '../config.js';
import type { Labels } from './labels.js';
import { type LabelFlips, type LabelPrivacyReport, flippedAmong } from './label-flips.js';
import type { PartyConnection } from '../connections/party-connection.js';
import { checkCredentials } from '../connections/party-port.js';

/**
 * Default rho, scaled to the data: the loss is an average over N samples, so its
 * curvature per sample is O(1/N) and rho is 0.01/N (exact form; 0.3/N for the paper's
 * form, which needs a larger rho to stay stable). See docs/rho.md for the measurements.
 */
export function defaultRho(variant: Variant, n: number): number {
  return (variant === 'exact' ? 0.01 : 0.3) / n;
}

/** The configuration's own consistency (and every party's credential), checked before anything is read or opened. */
export function checkConfig(config: CoordinatorConfig, log: Logger): void {
  if (config.parties.length === 0) throw new ConfigError('no parties configured');
  if (config.activeParty !== undefined && !config.parties.includes(config.activeParty))
    throw new ConfigError(`--active-party ${config.activeParty} is not one of --parties ${config.parties.join(', ')}`);
  if (new Set(config.parties).size !== config.parties.length) throw new ConfigError(`party ids must be distinct: ${config.parties.join(', ')}`);
  checkCredentials(config.parties, config.credentials, log);
  // cli.ts builds testSelection through testSelectionOf; a configuration built otherwise is checked the same way.
  const sel = config.testSelection;
  if (sel) testSelectionOf({ ...(sel.method === 'holdout' ? { holdout: sel.fraction, holdoutSeed: sel.seed } : { testIds: sel.file }), testLabels: config.testLabels });
  if (config.labelPrivacy) {
    const { epsilon } = config.labelPrivacy;
    if (!(Number.isFinite(epsilon) && epsilon > 0)) throw new ConfigError(`--label-epsilon must be a positive number, got ${epsilon}`);
    if (config.loss !== 'logistic') throw new ConfigError(`--label-epsilon needs --loss logistic (randomized response flips two classes, and only the logistic loss has the correction for flipped labels), not ${config.loss}`);
    if (!(config.lambda > 0)) throw new ConfigError('--label-epsilon needs --lambda > 0: the loss corrected for flipped labels is unbounded below without the ridge term');
  }
  if (config.classWeight && config.loss !== 'logistic') throw new ConfigError(`--class-weight needs --loss logistic (class weights weigh the two classes of the logistic loss), not ${config.loss}`);
}

/** What every party's setup shares (including the label flip probability); its rows, its role and (one-shot) the labels are added per party. */
export type SetupParams = Omit<Setup, 'trainRows' | 'testRows' | 'testFrom' | 'role' | 'labels'>;

/**
 * The algorithm of a new job: as configured, or with `auto` the one-shot private training
 * when any party adds noise (its hello says so) and ADMM otherwise. The one-shot training
 * is for classification (logistic loss) and needs a passive party to learn from.
 */
export function resolveAlgorithm(cfg: CoordinatorConfig, parties: readonly { id: string; noise: boolean }[], log: Logger): AlgorithmName {
  const noisy = parties.filter((p) => p.noise).map((p) => p.id);
  const algorithm = cfg.algorithm === 'auto' ? (noisy.length > 0 ? 'one-shot' : 'admm') : cfg.algorithm;
  if (algorithm === 'one-shot') {
    if (cfg.loss !== 'logistic') throw new ConfigError(`the one-shot private training is for --loss logistic, not ${cfg.loss}${cfg.algorithm === 'auto' ? ` (chosen because ${noisy.join(', ')} add noise; --algorithm admm runs the per-round noisy ADMM, a research mode)` : ''}`);
    if (parties.every((p) => p.id === cfg.activeParty)) throw new ConfigError('the one-shot training needs at least one passive party besides the active one');
  }
  if (algorithm === 'admm' && noisy.length > 0) log.warn({ parties: noisy }, `per-round noisy ADMM: parties ${noisy.join(', ')} add noise every round. RESEARCH MODE: known to be worse than going alone at realistic N (docs/privacy.md, section 8)`);
  return algorithm;
}

/** Which samples the job has: rows of the label files (test: empty when the job does not evaluate), and how many label rows were dropped. */
export interface Samples {
  labelRows: { train: Uint32Array; test: Uint32Array };
  dropped: { train: number; test: number };
  /**
   * 'train': the test rows are rows of the training label file held out of training (--holdout,
   * --test-ids), matched against each party's training ids; absent: rows of --test-labels.
   */
  testFrom?: 'train';
}

export interface Job extends Samples {
  jobId: string;
  setup: SetupParams;
  n: number;
  nTest: number;
  /** Training labels in row order: with label privacy the flipped ones, the only ones training uses. */
  y: Float64Array;
  /** Test labels in row order, when the job evaluates: never flipped, and never sent to a party. */
  yTest: Float64Array | undefined;
  /** Label privacy (randomized response on the training labels), or null. */
  labelPrivacy: LabelPrivacyReport | null;
  /** Why a job with test labels does not evaluate. */
  evaluationSkipped: string | undefined;
  /** How the test rows were chosen among the aligned ids (--holdout, --test-ids), for the log and summary. */
  testSelection?: SelectionReport;
}

/**
 * One builder for both kinds of job. `setup` is undefined for a new job (it is made from the
 * configuration) and the checkpoint's for a resumed one. `labels` are the training labels the
 * job trains on: with label privacy, the flipped ones (`flips` says which rows were flipped).
 */
export function buildJob(
  cfg: CoordinatorConfig,
  labels: Labels,
  testLabels: Labels | undefined,
  samples: Samples,
  evaluationSkipped: string | undefined,
  setup: SetupParams | undefined,
  algorithm: AlgorithmName = setup?.algorithm ?? 'admm',
  flips?: LabelFlips,
): Job {
  const n = samples.labelRows.train.length;
  const y = Float64Array.from(samples.labelRows.train, (r) => labels.y[r]);
  // Balanced weights count the classes among the aligned training rows (with label privacy, of
  // the flipped labels: the only ones training sees).
  const classWeights = cfg.classWeight && labels.classes ? resolveClassWeights(cfg.classWeight, y, labels.classes) : undefined;
  const evaluates = testLabels !== undefined && evaluationSkipped === undefined && samples.labelRows.test.length > 0;
  return {
    ...samples,
    jobId: cfg.jobId,
    n,
    nTest: evaluates ? samples.labelRows.test.length : 0,
    y,
    yTest: evaluates ? Float64Array.from(samples.labelRows.test, (r) => testLabels.y[r]) : undefined,
    labelPrivacy: flips ? { epsilon: flips.epsilon, flipProbability: flips.flipProbability, flipped: flippedAmong(flips, samples.labelRows.train), seeded: flips.seeded } : null,
    evaluationSkipped,
    setup: setup ?? {
      type: 'setup',
      jobId: cfg.jobId,
      lambda: cfg.lambda,
      loss: cfg.loss,
      rounds: cfg.maxRounds,
      rho: cfg.rho ?? defaultRho(cfg.variant, n),
      parties: cfg.parties.length,
      algorithm,
      labelFlip: flips?.flipProbability ?? 0,
      ...(classWeights ? { classWeights } : {}),
    },
  };
}

/**
 * Why a job with test labels cannot evaluate: a party without a test set (or that does not
 * release test scores) cannot be scored with the others. The job trains anyway and says why
 * it has no test metrics.
 */
export function evaluationSkipReason(testLabels: Labels | undefined, parties: readonly PartyConnection[]): { reason: string; parties: string[] } | undefined {
  const missing = testLabels ? parties.filter((p) => p.fileRows.test === 0).map((p) => p.id) : [];
  if (missing.length === 0) return undefined;
  const who = missing.length === 1 ? `party ${missing[0]} has` : `parties ${missing.join(', ')} have`;
  return { reason: `${who} no test set: no test metrics for this job; give every party --test (with privacy also --release-test-scores) to evaluate`, parties: missing };
}

/** The setup message for one party: its rows, its role, and in a one-shot job the training labels (its target, or what it fits). */
export function setupFor(job: Job, party: string, activeParty: string | undefined, rows: { train: Uint32Array; test: Uint32Array }): Setup {
  // The class weights go only to whoever fits the loss on the labels: the active party of a one-shot job.
  const { classWeights, ...shared } = job.setup;
  const fits = classWeights && party === activeParty && job.setup.algorithm === 'one-shot';
  return {
    ...shared,
    ...(fits ? { classWeights } : {}),
    trainRows: rows.train,
    testRows: job.yTest ? rows.test : new Uint32Array(0),
    testFrom: job.testFrom ?? 'test',
    role: party === activeParty ? 'active' : 'passive',
    labels: job.setup.algorithm === 'one-shot' ? job.y : new Float64Array(0),
  };
}

export type PartyPrivacy = PrivacyInfo & { party: string };

/** What the parties' ready messages add: their privacy settings and the rounds the job may run. */
export interface Participation {
  privacy: PartyPrivacy[];
  /** The smallest of --rounds and what each party's budget pays for. */
  maxRounds: number;
  /** Whether any party adds noise. */
  noisy: boolean;
}

export function participation(cfg: CoordinatorConfig, parties: readonly PartyConnection[], log: Logger): Participation {
  const privacy = parties.map((p) => {
    if (!p.privacy) throw new Error(`internal: party ${p.id} has not reported its privacy setting`);
    return { party: p.id, ...p.privacy };
  });
  const maxRounds = Math.min(cfg.maxRounds, ...privacy.map((q) => q.rounds));
  if (maxRounds < cfg.maxRounds) log.warn({ maxRounds, requested: cfg.maxRounds }, "rounds capped by a party's privacy budget");
  for (const q of privacy) log.info(q, `party ${q.party} privacy: ${q.mechanism}${q.seeded ? ' (SEEDED noise: predictable)' : ''}`);
  return { privacy, maxRounds, noisy: privacy.some((q) => q.mechanism !== 'none') };
}

/** Align one set; a party at fault is named and closed, and the job fails. */
export function alignOrBlame(set: SampleSet, labels: Labels, parties: Parties, matched: Matched[]): AlignedSet {
  try {
    return alignSet(set, labels.ids.length, parties.list.map((p, m) => ({ id: p.id, positions: matched[m][set] ?? new Int32Array(0) })));
  } catch (err) {
    if (!(err instanceof AlignmentError)) throw err;
    const culprit = err.party === undefined ? undefined : parties.byId(err.party);
    for (const p of culprit ? [culprit] : parties.list) p.close('alignment', err.message);
    throw new PeerError(culprit ? `party ${culprit.id}: ${err.message}` : err.message);
  }
}

/** The job's samples from the intersection, and each party's positions for them (job order). */
export interface AlignedSamples {
  samples: Samples;
  partyRows: { train: Uint32Array[]; test: Uint32Array[] };
  selection: SelectionReport | undefined;
}

/**
 * The job's training and test rows: test rows of --test-labels (their own intersection), or,
 * with --holdout / --test-ids, chosen among the aligned training ids and held out of training.
 * `labels` are the true labels (their ids are the flipped labels' ids); `listed`: the ids of --test-ids.
 */
export function alignSamples(cfg: CoordinatorConfig, labels: Labels, testLabels: Labels | undefined, skipped: string | undefined, parties: Parties, matched: Matched[], listed: readonly string[] | undefined): AlignedSamples {
  const train = alignOrBlame('train', labels, parties, matched);
  if (cfg.testSelection) {
    const { test, report } = chooseTestRows(cfg.testSelection, Array.from(train.labelRows, (r) => labels.ids[r]), listed);
    const split = splitAligned(train, test);
    return {
      samples: { labelRows: { train: split.train.labelRows, test: split.test.labelRows }, dropped: { train: train.dropped, test: 0 }, testFrom: 'train' },
      partyRows: { train: split.train.partyRows, test: split.test.partyRows },
      selection: report,
    };
  }
  const test = testLabels && !skipped ? alignOrBlame('test', testLabels, parties, matched) : undefined;
  const empty = new Uint32Array(0);
  return {
    samples: { labelRows: { train: train.labelRows, test: test?.labelRows ?? empty }, dropped: { train: train.dropped, test: test?.dropped ?? 0 } },
    partyRows: { train: train.partyRows, test: test?.partyRows ?? train.partyRows.map(() => empty) },
    selection: undefined,
  };
}

/**
 * A resumed job's held-out test rows, chosen again from the flags it is resumed with among the
 * same aligned ids (its training and test rows): the flags must choose the rows the job held
 * out, or its test metrics would be of rows it trained on.
 */
export function reselect(cfg: CoordinatorConfig, samples: Samples, labels: Labels, listed: readonly string[] | undefined): SelectionReport {
  const sel = cfg.testSelection;
  if (!sel) throw new ConfigError('--resume: the checkpointed job held out test rows (--holdout or --test-ids): resume it with the same flag');
  const { train, test } = samples.labelRows;
  const rows = new Uint32Array(train.length + test.length);
  rows.set(train);
  rows.set(test, train.length);
  rows.sort();
  const { test: mask, report } = chooseTestRows(sel, Array.from(rows, (r) => labels.ids[r]), listed);
  const held = new Set(test);
  if (rows.some((r, i) => (mask[i] === 1) !== held.has(r)))
    throw new ConfigError(`--resume: ${sel.method === 'holdout' ? `--holdout ${sel.fraction} --holdout-seed ${sel.seed}` : `--test-ids ${sel.file}`} choose other test rows than the checkpointed job held out: resume it with the flags it was started with`);
  return report;
}
