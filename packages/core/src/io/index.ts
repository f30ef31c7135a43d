// What the package exports of io/: readers of data files, the ids and labels they hold, and
// writers that a reader never sees half-done. Helpers shared by the readers stay inside io/.
export { type IdMode, ID_MODES, LABEL_ID_MODES, refuseDuplicates, requestIdsProblem } from './ids.js';
export { type PackedIds, packIds, selectIds, sliceIds } from './packed-ids.js';
export { type BlockTable, type FeatureTable, type FileFormat, type ReadOptions, FILE_FORMATS, detectFormat } from './table.js';
export { ID_ENCODING_OPTION, READ_CHUNK_BYTES, TEXT_ENCODINGS, type TextEncoding, readChunks } from './lines.js';
export { MAX_ABS_VALUE, parseDataNumber } from './numbers.js';
export { type KeptTable, readFeatureBlock, readFeatureFile, readKeptBlock } from './features.js';
export { MAX_FEATURES, readLibsvm } from './libsvm.js';
export { type LibsvmView, formatLibsvmViews, formatLibsvmWithIds } from './libsvm-format.js';
export { csvField, readCsv, readCsvFeatures } from './csv.js';
export { type LabelTable, binaryLabels, formatLabelsCsv, labelKey, numericLabels, readIdFile, readLabelFile } from './labels.js';
export { type ClassWeightSpec, CLASS_WEIGHT_SYNTAX, describeClassWeights, parseClassWeight, resolveClassWeights } from './class-weights.js';
export { writeFileAtomic, writeFileAtomicAsync } from './atomic-write.js';
export { KEY_BYTES, existingKeyFile, keyFile, keyedDigest, sameDigest } from './key-file.js';
export { readSignedJson, signedJson } from './signed-json.js';
export * from './json-file.js';
export * from './spill.js';
