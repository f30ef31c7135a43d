// The data a simulation runs on: which data set (a built-in one, or the user's LIBSVM files),
// generating or reading it, and writing it out the way the organisations would hold it, one
// feature block per party plus the label files for the coordinator (split.ts formats them).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { DatasetName } from './names.js';
import {
  type Csr,
  type LabelledSet,
  type TextEncoding,
  BANK_TELECOM_DEFAULTS,
  EXIT,
  bankTelecomDataset,
  binaryLabels,
  gisetteLikeDataset,
  readLibsvm,
  syntheticDataset,
  writeFileAtomic,
} from '@admm-share/core';
import { SimulationError } from './errors.js';
import { spamDataset } from './spam.js';
import { type SplitFiles, parseSplit, writeVerticalSplit } from './split.js';

/** The flags of `simulate` that choose the data set and its blocks. */
export interface DataOptions {
  /** A built-in data set, used when `data` is not given. */
  dataset?: DatasetName;
  /** spam: use only this many messages (a seeded subsample); gisette: training rows (test: a sixth). */
  rows?: number;
  data?: string;
  test?: string;
  /** Block sizes, e.g. "66,57"; default: the synthetic set's own blocks, or two halves. */
  split?: string;
  features?: number;
  /** Seed of the synthetic data set. */
  dataSeed: string;
  /** The text encoding of --data and --test (--id-encoding; default utf8). */
  idEncoding?: TextEncoding;
}

/** A data set in memory, its feature blocks (one per party) and a description for the first output line. */
export interface SimulationData {
  train: LabelledSet;
  test?: LabelledSet;
  blocks: number[];
  source: string;
}

function loadLibsvmSet(path: string, features: number | undefined, encoding: TextEncoding | undefined): LabelledSet {
  const t = readLibsvm(path, { ids: 'auto', features, encoding });
  const { y } = binaryLabels({ file: path, ids: t.ids, raw: t.firstTokens!, lines: t.lines });
  return { ids: t.ids, X: t.X, y };
}

function withCols(X: Csr, cols: number): Csr {
  return { ...X, cols };
}

/** The data set and its blocks: the user's LIBSVM files, or a built-in set (synthetic, spam, gisette-shaped). */
export function loadData(opts: DataOptions): SimulationData {
  if (!opts.data) {
    if (opts.test) throw new SimulationError('--test needs --data', EXIT.config);
    if (opts.dataset === 'spam') {
      if (opts.split) throw new SimulationError('--split does not apply to --dataset spam: its blocks are headers | body | links', EXIT.config);
      const s = spamDataset({ seed: opts.dataSeed === 'admm-share' ? 'spam' : opts.dataSeed, limit: opts.rows });
      return { train: s.train, test: s.test, blocks: s.blocks, source: `SpamAssassin corpus (${s.names.map((n, k) => `${n} ${s.blocks[k]}`).join(' | ')} hashed features)` };
    }
    if (opts.dataset === 'gisette') {
      const g = gisetteLikeDataset({
        seed: opts.dataSeed === 'admm-share' ? 'gisette' : opts.dataSeed,
        ...(opts.rows ? { trainRows: opts.rows, testRows: Math.max(1, Math.round(opts.rows / 6)) } : {}),
      });
      return { train: g.train, test: g.test, blocks: opts.split ? parseSplit(opts.split, 5000) : g.blocks, source: 'synthetic gisette-shaped set (5000 dense features)' };
    }
    const s = syntheticDataset({ seed: opts.dataSeed });
    const d = s.train.X.cols;
    return { train: s.train, test: s.test, blocks: opts.split ? parseSplit(opts.split, d) : s.blocks, source: `synthetic (seed '${opts.dataSeed}')` };
  }
  const train = loadLibsvmSet(opts.data, opts.features, opts.idEncoding);
  const test = opts.test ? loadLibsvmSet(opts.test, opts.features, opts.idEncoding) : undefined;
  const d = Math.max(train.X.cols, test?.X.cols ?? 0);
  train.X = withCols(train.X, d);
  if (test) test.X = withCols(test.X, d);
  const half = Math.ceil(d / 2);
  return { train, test, blocks: parseSplit(opts.split ?? `${half},${d - half}`, d), source: opts.data };
}

/** Each party's block (train and test) and the coordinator's label files, in `dataDir`. */
export function writePartyFiles(dataDir: string, data: SimulationData): SplitFiles {
  return writeVerticalSplit(dataDir, data.blocks, data.train, data.test);
}

/** The data sets `admm-share generate --dataset` writes. */
export const GENERATED = ['synthetic', 'bank-telecom'] as const;
export type GeneratedName = (typeof GENERATED)[number];

/**
 * The bank-telecom pair of CSV files (core's bankTelecomDataset documents the model) in `dir`:
 * bank.csv, telecom.csv, the new customers to score and their outcomes. Returns the paths by name.
 */
export function writeBankTelecom(dir: string, opts: { seed?: string; rows?: number }): Record<string, string> {
  mkdirSync(dir, { recursive: true });
  const files = bankTelecomDataset({ seed: opts.seed ?? BANK_TELECOM_DEFAULTS.seed, rows: opts.rows ?? BANK_TELECOM_DEFAULTS.rows });
  const written: Record<string, string> = {};
  for (const [name, text] of Object.entries(files)) {
    const path = join(dir, name);
    writeFileAtomic(path, text);
    written[name] = path;
  }
  return written;
}
