// A party's data as the model sees it: read as it is (LIBSVM, or a CSV of numeric columns), or
// prepared (columns chosen, missing values filled, categories one-hot, numeric columns
// standardised: core's prepare/). At a party with a privacy budget the preparation is part of
// the mechanism: its statistics are declared public values or differentially private estimates
// paid from the budget (docs/privacy.md, section 13), and once estimated they are kept next to
// the model and reused, never estimated again.
import { existsSync } from 'node:fs';
import type { Logger } from 'pino';
import {
  type BlockTable,
  type KeptTable,
  type MissingStrategy,
  type NoiseSource,
  type Preparation,
  type PrepareOptions,
  type RawTable,
  type ReadOptions,
  ConfigError,
  InternalError,
  applyPreparation,
  detectFormat,
  expectedValue,
  fitPreparation,
  gdpEpsilonFor,
  gdpMuFor,
  isDense,
  jsonDigest,
  planQueries,
  readOptionsOf,
  rawTableFromFeatures,
  readFeatureBlock,
  readKeptBlock,
  readFeatureFile,
  SpilledCsr,
  readJsonFile,
  readPublicSpec,
  readRawTable,
  preparationSchema,
  writeFileAtomic,
  z,
} from '@admm-share/core';
import type { PreparationSpend } from '../privacy/privacy.js';

/** The preparation flags of admm-party, as given. */
export interface PreparationFlags {
  /** undefined: on for CSV, off for LIBSVM (whose benchmark figures stay comparable with the literature). */
  prepare?: boolean;
  columns?: string[];
  exclude?: string[];
  categorical?: string[];
  missing?: MissingStrategy;
  missingTokens?: string[];
  indicators?: string[];
  /** A JSON file of declared public values (ranges, means and scales, categories). */
  spec?: string;
  /** Standardise numeric columns (default); false keeps them in their units. */
  scale?: boolean;
  /** At a party with a budget: the estimated statistics' share of it (of mu^2 in Gaussian DP; shareBudget). */
  share: number;
}

/** Default --prepare-share: a tenth of the budget for the statistics, the rest for the release. */
export const DEFAULT_PREPARE_SHARE = 0.1;

export interface LoadedData {
  /** Read as a party keeps it (readKeptBlock) without a budget; with one its rows are scaled in memory first. */
  table: BlockTable | KeptTable;
  preparation: Preparation | null;
  spend: PreparationSpend | null;
}

/** The budget a private party trains with: the preparation takes its share, the release the rest. */
export interface PartyBudget {
  epsilon: number;
  delta: number;
  /** The paper's mechanism is accounted by advanced composition, not in GDP: no estimates with it. */
  mechanism: string;
  /** Whether the noise is seeded (predictable): recorded with the statistics it draws. */
  seeded: boolean;
  noise: () => NoiseSource;
}

/** The noise of a private fit that asks nothing (every statistic declared): never drawn. */
const NO_NOISE: NoiseSource = {
  seeded: false,
  addNormal: () => {
    throw new InternalError('preparing declared statistics', 'noise was drawn for a fit that asks nothing');
  },
  uniforms: () => {
    throw new InternalError('preparing declared statistics', 'noise was drawn for a fit that asks nothing');
  },
};

/**
 * The preparation's share of the budget (docs/privacy.md, section 13): with delta_g = delta -
 * deltaThreshold and mu_total the GDP mu of (epsilon, delta_g), the preparation gets
 * sqrt(share) mu_total and the release sqrt(1 - share) mu_total, (releaseEpsilon, delta_g) as the
 * release's calibration sees it. Composed, mu_total-GDP plus the threshold's delta: (epsilon, delta).
 */
export function shareBudget(budget: Pick<PartyBudget, 'epsilon' | 'delta'>, share: number, categories: boolean): Omit<PreparationSpend, 'reused'> {
  const deltaThreshold = categories ? (share * budget.delta) / 2 : 0;
  const releaseDelta = budget.delta - deltaThreshold;
  const total = gdpMuFor(budget.epsilon, releaseDelta);
  const release = Math.sqrt(1 - share) * total;
  return { share, mu: Math.sqrt(share) * total, deltaThreshold, releaseEpsilon: gdpEpsilonFor(release, releaseDelta), releaseDelta };
}

/** Whether the data of `file` is prepared. */
export function preparing(file: string, read: ReadOptions, flags: PreparationFlags): boolean {
  return flags.prepare ?? detectFormat(file, read.format) === 'csv';
}

function prepareOptions(read: ReadOptions, flags: PreparationFlags): PrepareOptions {
  return {
    idColumn: read.idColumn ?? 'id',
    columns: flags.columns,
    exclude: flags.exclude,
    categorical: flags.categorical,
    missingTokens: flags.missingTokens,
    missing: flags.missing,
    indicators: flags.indicators,
    scale: flags.scale ?? true,
    spec: flags.spec === undefined ? undefined : readPublicSpec(flags.spec),
  };
}

/** The flags that only mean something with preparation on, given with it off. */
function unusedFlags(flags: PreparationFlags): string[] {
  const given: Array<[string, unknown]> = [
    ['--columns', flags.columns],
    ['--exclude-columns', flags.exclude],
    ['--categorical', flags.categorical],
    ['--missing', flags.missing],
    ['--missing-indicator', flags.indicators],
    ['--prepare-spec', flags.spec],
  ];
  return given.filter(([, v]) => v !== undefined).map(([n]) => n);
}

/** model-p1.json -> model-p1.preparation.json: a private party's estimated statistics, kept. */
export function preparationPath(model: string): string {
  return model.replace(/(\.json)?$/, '.preparation.json');
}

const PREPARATION_FORMAT = 'admm-share-preparation/1';
const keptFile = z.strictObject({
  format: z.literal(PREPARATION_FORMAT, { error: expectedValue(`'${PREPARATION_FORMAT}'`) }),
  /** The digest of the options it was estimated with: other options need new estimates. */
  options: z.string(),
  /** The budget they were paid from: another budget, share, mechanism or seed needs new estimates. */
  budget: z.strictObject({ epsilon: z.number(), delta: z.number(), share: z.number(), mechanism: z.string(), seeded: z.boolean() }),
  spend: z.strictObject({ share: z.number(), mu: z.number(), deltaThreshold: z.number(), releaseEpsilon: z.number(), releaseDelta: z.number() }),
  preparation: preparationSchema,
});

/**
 * Read and, if asked, prepare a training file. `budget` is the party's privacy budget (null
 * without noise): with it, statistics not declared are estimated under differential privacy
 * with `flags.share` of it, and kept at `kept` for a restart.
 */
export function loadTrainingData(file: string, read: ReadOptions, flags: PreparationFlags, budget: PartyBudget | null, kept: string, log: Logger): LoadedData {
  if (!preparing(file, read, flags)) {
    const extra = unusedFlags(flags);
    if (extra.length > 0) throw new ConfigError(`${extra.join(', ')} need the data prepared: drop --no-prepare${detectFormat(file, read.format) === 'libsvm' ? ', or add --prepare for a LIBSVM file' : ''}`);
    return { table: budget === null ? readKeptBlock(file, read) : readFeatureBlock(file, read), preparation: null, spend: null };
  }
  if (budget !== null && detectFormat(file, read.format) === 'libsvm' && read.features === undefined)
    // The columns fix the queries and their noise before any row is read; a LIBSVM file's width is its largest index, which one row can change.
    throw new ConfigError('--prepare on a LIBSVM file at a party with a budget needs --features D: the number of columns must not come from the data');
  const opts = prepareOptions(read, flags);
  const raw = readRaw(file, read, opts);
  let preparation: Preparation;
  let spend: PreparationSpend | null = null;
  if (budget === null) {
    const fit = fitPreparation(raw, opts);
    preparation = fit.preparation;
    for (const note of fit.notes.notes) log.info({ note }, 'preparation');
  } else {
    const queries = planQueries(opts, raw.columns);
    if (queries.length > 0 && budget.mechanism === 'paper')
      throw new ConfigError("--mechanism paper is accounted by advanced composition, which does not compose with the preparation's estimates: declare every statistic in --prepare-spec, or --no-prepare");
    if (queries.length === 0) {
      // Everything declared: the private fit takes every statistic from the spec (none from the rows), asks nothing, and refuses what a private party may not do.
      preparation = fitPreparation(raw, opts, { mu: 1, deltaThreshold: 0, noise: NO_NOISE }).preparation;
    } else {
      const options = jsonDigest({ file, opts: { ...opts, spec: opts.spec ?? null } });
      const paidWith = { epsilon: budget.epsilon, delta: budget.delta, share: flags.share, mechanism: budget.mechanism, seeded: budget.seeded };
      const old = existsSync(kept) ? readJsonFile(keptFile, kept, 'kept preparation') : undefined;
      if (old !== undefined && (old.options !== options || jsonDigest(old.budget) !== jsonDigest(paidWith)))
        throw new ConfigError(
          `${kept} holds the statistics this party estimated with other preparation flags, data or budget (--epsilon, --delta, --prepare-share, --mechanism, --seed); reusing them would be wrong, and estimating new ones spends that share of the budget again: move the file away to do that (in a new job)`,
        );
      if (old !== undefined) {
        preparation = old.preparation;
        spend = { ...old.spend, reused: true };
        log.info({ kept }, 'preparation: the statistics estimated before are reused (post-processing: no further spend)');
      } else {
        const shared = shareBudget(budget, flags.share, queries.some((q) => q.query === 'categories'));
        const fit = fitPreparation(raw, opts, { mu: shared.mu, deltaThreshold: shared.deltaThreshold, noise: budget.noise() });
        preparation = fit.preparation;
        spend = { ...shared, reused: false };
        writeFileAtomic(kept, JSON.stringify({ format: PREPARATION_FORMAT, options, budget: paidWith, spend: shared, preparation }) + '\n', 0o600);
        log.info({ mu: shared.mu, deltaThreshold: shared.deltaThreshold, queries: queries.length, kept }, 'preparation: statistics estimated with differential privacy (docs/privacy.md, section 13)');
        for (const note of fit.notes.notes) log.warn({ note }, 'preparation');
      }
    }
  }
  const applied = applyPreparation(preparation, raw, { file });
  log.info({ columns: applied.table.featureNames.length, dropped: applied.dropped, clipped: applied.clipped, private: budget !== null }, 'preparation applied');
  return { table: applied.table, preparation, spend };
}

/** A file's rows as the preparation reads them: a CSV file's columns, or a LIBSVM file's. */
function readRaw(file: string, read: ReadOptions, opts: PrepareOptions): RawTable {
  return detectFormat(file, read.format) === 'csv' ? readRawTable(file, { ...opts, encoding: read.encoding }) : rawTableFromFeatures(readFeatureFile(file, read));
}

/** A test or scoring file prepared as the training file was (no statistic is computed from it). */
export function loadPreparedLike(file: string, read: ReadOptions, preparation: Preparation, log: Logger): BlockTable {
  const opts = { ...readOptionsOf(preparation), idColumn: read.idColumn ?? preparation.idColumn };
  const raw = readRaw(file, read, opts);
  const applied = applyPreparation(preparation, raw, { file });
  const unseen = Object.entries(applied.unseen).filter(([, n]) => n > 0);
  if (unseen.length > 0) log.warn({ file, unseen: Object.fromEntries(unseen) }, 'categories not seen in training: scored as all zeros');
  if (applied.dropped > 0) log.warn({ file, dropped: applied.dropped }, 'rows with missing values dropped (--missing drop)');
  return applied.table;
}

/**
 * Columns whose scales differ by orders of magnitude at a private party without preparation:
 * every row is scaled to norm 1, so the largest column decides the row. The warning names them.
 */
export function scaleWarning(t: BlockTable | KeptTable): string | undefined {
  const X = t.X;
  if (X instanceof SpilledCsr) throw new InternalError('the scale warning', 'a matrix in a temporary file (read without privacy)');
  const d = X.cols;
  if (d < 2) return undefined;
  const sq = new Float64Array(d);
  if (isDense(X)) {
    for (let i = 0; i < X.rows; i++) for (let j = 0; j < d; j++) sq[j] += X.data[i * d + j] ** 2;
  } else for (let k = 0; k < X.indices.length; k++) sq[X.indices[k]] += X.values[k] ** 2;
  const rms = Array.from(sq, (s) => Math.sqrt(s / Math.max(1, X.rows)));
  let lo = -1;
  let hi = -1;
  rms.forEach((r, j) => {
    if (r > 0 && (lo < 0 || r < rms[lo])) lo = j;
    if (hi < 0 || r > rms[hi]) hi = j;
  });
  if (lo < 0 || rms[hi] < 1000 * rms[lo]) return undefined;
  const name = (j: number) => `${t.featureNames[j]} ~${rms[j].toPrecision(2)}`;
  return `columns' scales differ by orders of magnitude (${name(hi)}, ${name(lo)}): with privacy on every row is scaled to norm 1, so ${t.featureNames[hi]} decides every row. Prepare the data (--prepare, with --prepare-spec for declared ranges) or standardise the columns before training`;
}

