// What the package exports of prepare/: reading a raw table, fitting a preparation (exactly, or
// privately), applying it, and reading coefficients back in the original units.
export { DEFAULT_MISSING_TOKENS, MISSING_STRATEGIES, MISSING_CODE, PREPARE_FLAGS, type MissingStrategy, type PrepareOptions, type RawTable, type RawColumn, type NumericColumn, type CategoricalColumn, type DpPrepareBudget } from './types.js';
export { type PublicSpec, type ColumnSpec, publicSpecSchema, readPublicSpec } from './spec.js';
export { type Preparation, type NumericPrep, type CategoricalPrep, type PreparedColumn, type StatSource, STAT_SOURCES, preparationSchema, readOptionsOf } from './preparation.js';
export { type ReadRawOptions, readRawTable, rawTableFromFeatures } from './read.js';
export { type FitNotes, fitPreparation } from './fit.js';
export { type AskedQuery } from './fit-dp.js';
export { type PlannedQuery, type QueryKind, QUERY_KINDS, planQueries, preparationQueries, preparationMu, splitGdpMu } from './queries.js';
export { type Applied, applyPreparation } from './apply.js';
export { type OriginalUnits, originalUnits } from './units.js';
