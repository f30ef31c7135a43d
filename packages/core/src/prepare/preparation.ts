// A fitted preparation, as saved in the model file and applied again at scoring (fit on the
// training rows, then the same transformation for every later table: scikit-learn's habit).
import { z } from '../io/json-file.js';
import { MISSING_STRATEGIES, type PrepareOptions } from './types.js';

/**
 * Where a statistic comes from: the training rows exactly (no privacy), the user's spec,
 * a differentially private estimate, or a constant that looked at nothing (scaling off, a fill
 * of zero).
 */
export const STAT_SOURCES = ['exact', 'declared', 'dp', 'fixed'] as const;
export type StatSource = (typeof STAT_SOURCES)[number];

const finite = z.number().refine(Number.isFinite, 'expected a finite number');
const source = z.enum(STAT_SOURCES);

const numericPrepSchema = z.strictObject({
  name: z.string(),
  kind: z.literal('numeric'),
  /** The value a missing one is replaced by (null: `--missing drop` or unset). */
  fill: finite.nullable(),
  fillSource: source.nullable(),
  /** Values are clipped to it before standardising (null: no clipping). */
  range: z.tuple([finite, finite]).nullable(),
  rangeSource: source.nullable(),
  center: finite,
  centerSource: source,
  scale: finite.refine((s) => s > 0, 'expected a positive number'),
  scaleSource: source,
  indicator: z.boolean(),
});

const categoricalPrepSchema = z.strictObject({
  name: z.string(),
  kind: z.literal('categorical'),
  /** One output column a category, in this order; any other category at scoring is all zeros. */
  vocabulary: z.array(z.string()),
  vocabularySource: source,
  indicator: z.boolean(),
});

const outputSchema = z.strictObject({
  name: z.string(),
  /** The column of the data file it comes from. */
  source: z.string(),
  kind: z.enum(['numeric', 'indicator', 'category']),
});

export const preparationSchema = z.strictObject({
  version: z.literal(1),
  idColumn: z.string(),
  missingTokens: z.array(z.string()),
  missing: z.enum(MISSING_STRATEGIES).nullable(),
  scale: z.boolean(),
  /** The private fit's budget (null: fit without privacy). */
  privacy: z.strictObject({ mu: z.number().nonnegative(), deltaThreshold: z.number().nonnegative() }).nullable(),
  /** One entry a column read from the data file, in the order of the output columns. */
  inputs: z.array(z.discriminatedUnion('kind', [numericPrepSchema, categoricalPrepSchema])),
  outputs: z.array(outputSchema),
});

export type Preparation = z.output<typeof preparationSchema>;
export type NumericPrep = z.output<typeof numericPrepSchema>;
export type CategoricalPrep = z.output<typeof categoricalPrepSchema>;
export type PreparedColumn = z.output<typeof outputSchema>;

/** The name of a column's indicator of missing values. */
export const indicatorName = (name: string): string => `${name}_missing`;
/** The name of a category's one-hot column. */
export const categoryName = (name: string, category: string): string => `${name}=${category}`;

/** The output columns of `inputs`: a numeric column, then its indicator; a categorical column's categories, then its indicator. */
export function outputsOf(inputs: Preparation['inputs']): PreparedColumn[] {
  const out: PreparedColumn[] = [];
  for (const c of inputs) {
    if (c.kind === 'numeric') out.push({ name: c.name, source: c.name, kind: 'numeric' });
    else for (const v of c.vocabulary) out.push({ name: categoryName(c.name, v), source: c.name, kind: 'category' });
    if (c.indicator) out.push({ name: indicatorName(c.name), source: c.name, kind: 'indicator' });
  }
  return out;
}

/**
 * The options that read a new file (scoring) as the training file was read: the same columns by
 * name (others, such as the label, are ignored), the same categorical ones and missing tokens.
 */
export function readOptionsOf(p: Preparation): PrepareOptions {
  return {
    idColumn: p.idColumn,
    columns: p.inputs.map((c) => c.name),
    categorical: p.inputs.filter((c) => c.kind === 'categorical').map((c) => c.name),
    missingTokens: p.missingTokens,
    ...(p.missing === null ? {} : { missing: p.missing }),
    indicators: p.inputs.filter((c) => c.indicator).map((c) => c.name),
    scale: p.scale,
  };
}
