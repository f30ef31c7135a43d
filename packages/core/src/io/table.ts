// What the feature readers take and return: the file formats, the options, the tables.
import { type Csr } from '../linalg/csr.js';
import { type Dense } from '../linalg/dense.js';
import { InternalError } from '../errors.js';
import type { IdList, IdMode } from './ids.js';
import type { TextEncoding } from './lines.js';
import type { PackedIds } from './packed-ids.js';

/** Input file formats; `auto` is CSV for a `.csv` name, LIBSVM otherwise. */
export const FILE_FORMATS = ['auto', 'libsvm', 'csv'] as const;
export type FileFormat = (typeof FILE_FORMATS)[number];

export interface ReadOptions {
  format?: FileFormat;
  ids?: IdMode;
  /** CSV: the name of the id column (default `id`). */
  idColumn?: string;
  /** Number of feature columns; an index beyond it is an error. Default: the largest index seen. */
  features?: number;
  /** Bytes read from the file at a time (default READ_CHUNK_BYTES); tests set it small. */
  chunkBytes?: number;
  /** The file's text encoding (--id-encoding, default utf8). */
  encoding?: TextEncoding;
}

export interface FeatureTable {
  file: string;
  ids: string[];
  X: Csr;
  featureNames: string[];
  /** First token of each LIBSVM line when it is a label (`row`/`qid` id modes). */
  firstTokens?: string[];
  /** Physical line number of each row, for error messages. */
  lines: number[];
}

/**
 * A data file as a party keeps it (readFeatureBlock): its matrix dense when the file is, and its
 * ids packed as they are read: with a million short ids as strings, and packed only afterwards,
 * a party's reading peaked 45 MiB higher (docs/scaling.md).
 */
export interface BlockTable extends Pick<FeatureTable, 'file' | 'featureNames'> {
  ids: PackedIds;
  X: Csr | Dense;
}

/**
 * What a reader of features returns; its ids went to the IdSink it was given (scanLibsvm,
 * csvFeatures). S: what the sparse rows were built into when the reader was given a sink for them
 * (BlockBuilder's `spill`).
 */
export interface Scanned<S = never> {
  X: Csr | Dense | S;
  featureNames: string[];
  firstTokens: string[] | undefined;
}

export function detectFormat(path: string, format: FileFormat = 'auto'): Exclude<FileFormat, 'auto'> {
  if (format !== 'auto') return format;
  return /\.csv$/i.test(path) ? 'csv' : 'libsvm';
}

/** A table read with the dense form not allowed (its matrix is CSR), its ids as strings. */
export function sparse(path: string, t: Scanned, ids: IdList): FeatureTable {
  if ('data' in t.X) throw new InternalError('reading a data file', 'a dense matrix where only CSR was allowed');
  return { file: path, ids: ids.ids, X: t.X, featureNames: t.featureNames, firstTokens: t.firstTokens, lines: ids.lines };
}
