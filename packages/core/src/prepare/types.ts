// What the preparation of a party's raw table takes and keeps: the options (one a flag of the
// party), the raw table as read, and the privacy budget of a private fit.
import type { PackedIds } from '../io/packed-ids.js';
import type { NoiseSource } from '../privacy/noise.js';
import type { PublicSpec } from './spec.js';

/** Field values read as a missing value unless --missing-values says otherwise. */
export const DEFAULT_MISSING_TOKENS: readonly string[] = ['', 'NA', '?'];

/** What to do with a missing value (--missing); unset, a missing value is an error. */
export const MISSING_STRATEGIES = ['mean', 'median', 'zero', 'drop'] as const;
export type MissingStrategy = (typeof MISSING_STRATEGIES)[number];

/** The flags that fix each kind of mistake, named in the error messages (the lead's CLI uses these names). */
export const PREPARE_FLAGS = {
  idColumn: '--id-column',
  columns: '--columns',
  exclude: '--exclude-columns',
  categorical: '--categorical',
  missingTokens: '--missing-values',
  missing: '--missing',
  indicators: '--missing-indicator',
  spec: '--prepare-spec',
} as const;

export interface PrepareOptions {
  idColumn: string;
  /** Keep only these columns (besides the id), by name. */
  columns?: readonly string[];
  /** Drop these columns (e.g. the label column held in the same file). */
  exclude?: readonly string[];
  /** One-hot these columns. */
  categorical?: readonly string[];
  /** Field values read as missing (default DEFAULT_MISSING_TOKENS). */
  missingTokens?: readonly string[];
  /** Unset: a missing value is a DataError. */
  missing?: MissingStrategy;
  /** Columns that get an extra 0/1 column `<name>_missing`. */
  indicators?: readonly string[];
  /** Standardise numeric columns. */
  scale: boolean;
  /** Public values declared by the user (readPublicSpec). */
  spec?: PublicSpec;
}

/** The code of a missing value in a categorical column. */
export const MISSING_CODE = 0xffffffff;

export interface NumericColumn {
  name: string;
  kind: 'numeric';
  /** One value a row, NaN where the value is missing. */
  values: Float64Array;
}

export interface CategoricalColumn {
  name: string;
  kind: 'categorical';
  /** One code a row into `dictionary`, MISSING_CODE where the value is missing. */
  codes: Uint32Array;
  /** The categories seen in this file, in the order first seen. */
  dictionary: string[];
}

export type RawColumn = NumericColumn | CategoricalColumn;

/** A data file's rows as read for preparation: ids, the kept columns by kind, and lines for errors. */
export interface RawTable {
  file: string;
  /** Line of the header (1 for a CSV file; undefined for a LIBSVM file, which has none). */
  headerLine: number | undefined;
  /** Every column of the header, kept or not (for error messages). */
  header: readonly string[];
  rows: number;
  ids: PackedIds;
  /** Physical line of each row. */
  lines: Int32Array;
  /** The kept columns, in the order of the header. */
  columns: RawColumn[];
}

/**
 * The share of a party's budget a private preparation spends, in Gaussian differential privacy
 * (Dong, Roth and Su 2019): the whole preparation is `mu`-GDP. `deltaThreshold` is the delta
 * added by keeping only the categories whose noisy count passes a threshold (docs/privacy.md
 * section 13). `noise`: the operating system's CSPRNG, or a seeded source for experiments.
 */
export interface DpPrepareBudget {
  mu: number;
  deltaThreshold: number;
  noise: NoiseSource;
}
