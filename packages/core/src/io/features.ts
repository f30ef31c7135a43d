// A data file of features, LIBSVM or CSV by its name (detectFormat).
import { csvFeatures, readCsvFeatures } from './csv.js';
import { PackedIdList } from './ids.js';
import { readLibsvm, scanLibsvm } from './libsvm.js';
import { type Dense } from '../linalg/dense.js';
import { SpilledCsr, SpillingCsrBuilder } from './spill.js';
import { type BlockTable, type FeatureTable, type ReadOptions, detectFormat } from './table.js';

export function readFeatureFile(path: string, opts: ReadOptions = {}): FeatureTable {
  return detectFormat(path, opts.format) === 'csv' ? readCsvFeatures(path, opts) : readLibsvm(path, opts);
}

/**
 * readFeatureFile, with the matrix stored dense when the file is (at least DENSE_DENSITY of
 * its entries non-zero; decided on its first rows, see BlockBuilder), sparse otherwise. A dense
 * file is then never held as CSR: what a party keeps of its training file for the rounds.
 */
export function readFeatureBlock(path: string, opts: ReadOptions = {}): BlockTable {
  const ids = new PackedIdList(path);
  const t = detectFormat(path, opts.format) === 'csv' ? csvFeatures(path, opts, true, ids) : scanLibsvm(path, opts, true, true, ids);
  return { file: path, ids: ids.done(), X: t.X, featureNames: t.featureNames };
}

/** What a party keeps of its data file (readKeptBlock): a dense matrix, or a sparse one in a temporary file. */
export interface KeptTable extends Omit<BlockTable, 'X'> {
  X: Dense | SpilledCsr;
}

/**
 * readFeatureBlock, with a sparse matrix spilled to a temporary file as it is read
 * (SpillingCsrBuilder): the same matrix, ids and errors, but its entries are never all in memory.
 */
export function readKeptBlock(path: string, opts: ReadOptions = {}): KeptTable {
  const ids = new PackedIdList(path);
  const spill = () => new SpillingCsrBuilder(opts.features ?? 0);
  const t = detectFormat(path, opts.format) === 'csv' ? csvFeatures(path, opts, true, ids, spill) : scanLibsvm(path, opts, true, true, ids, spill);
  // A file of fewer rows than the probe's is built in memory (as CSR unless dense).
  const X = t.X instanceof SpilledCsr || 'data' in t.X ? t.X : new SpilledCsr(t.X);
  return { file: path, ids: ids.done(), X, featureNames: t.featureNames };
}
