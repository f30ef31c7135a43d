// A data file of features, LIBSVM or CSV by its name (detectFormat).
import { csvFeatures, readCsvFeatures } from './csv.js';
import { PackedIdList } from './ids.js';
import { readLibsvm, scanLibsvm } from './libsvm.js';
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
