// Fitting a preparation on the training rows: the checks every fit makes (declared ranges and
// categories, missing values), then the statistics, exact (no privacy) or private (fit-dp.ts).
import { DataError, InternalError } from '../errors.js';
import { type AskedQuery, DpFit, byCodeUnits, fmt } from './fit-dp.js';
import { type CategoricalPrep, type NumericPrep, type Preparation, outputsOf } from './preparation.js';
import { planQueries } from './queries.js';
import { checkSpecAgainst } from './spec.js';
import { DEFAULT_MISSING_TOKENS, MISSING_CODE, PREPARE_FLAGS, type CategoricalColumn, type DpPrepareBudget, type NumericColumn, type PrepareOptions, type RawColumn, type RawTable } from './types.js';

/** What a fit says about itself: notes for the output and summary, and the queries a private fit asked. */
export interface FitNotes {
  notes: string[];
  /** The mu the fit spent (0 without privacy, or when every statistic was declared). */
  mu: number;
  queries: AskedQuery[];
}

/** Whether row i of a column is missing. */
export const isMissing = (c: RawColumn, i: number): boolean => (c.kind === 'numeric' ? Number.isNaN(c.values[i]) : c.codes[i] === MISSING_CODE);

/** The error for a missing value when --missing is unset. */
export function missingError(file: string, line: number, column: string): DataError {
  return new DataError(file, line, `column '${column}': a missing value; say what to do with missing values: ${PREPARE_FLAGS.missing} mean|median|zero|drop`);
}

/** Values outside a declared range, categories outside a declared vocabulary, missing values with --missing unset: errors naming the row's line. */
function checkRows(t: RawTable, opts: PrepareOptions): void {
  const specFile = opts.spec?.file;
  for (const c of t.columns) {
    const spec = opts.spec?.columns[c.name];
    if (opts.missing === undefined) for (let i = 0; i < t.rows; i++) if (isMissing(c, i)) throw missingError(t.file, t.lines[i], c.name);
    if (c.kind === 'numeric' && spec?.range !== undefined) {
      const [lo, hi] = spec.range;
      for (let i = 0; i < t.rows; i++) {
        const x = c.values[i];
        if (x < lo || x > hi)
          throw new DataError(t.file, t.lines[i], `column '${c.name}': ${x} is outside the range [${lo}, ${hi}] declared in ${specFile}: widen the range in the spec, or remove it from the spec`);
      }
    }
    if (c.kind === 'categorical' && spec?.categories !== undefined) {
      const known = new Set(spec.categories);
      for (let i = 0; i < t.rows; i++) {
        const k = c.codes[i];
        if (k !== MISSING_CODE && !known.has(c.dictionary[k]))
          throw new DataError(t.file, t.lines[i], `column '${c.name}': category '${c.dictionary[k]}' is not among the categories declared in ${specFile} (${spec.categories.join(', ')}): add it to the spec`);
      }
    }
  }
}

/** The rows the exact statistics are computed on: all, or with --missing drop those with no missing value. */
function keptRows(t: RawTable, opts: PrepareOptions): Uint8Array {
  const keep = new Uint8Array(t.rows).fill(1);
  if (opts.missing === 'drop') for (const c of t.columns) for (let i = 0; i < t.rows; i++) if (isMissing(c, i)) keep[i] = 0;
  return keep;
}

/** The present values of the kept rows. */
function presentValues(c: NumericColumn, keep: Uint8Array): Float64Array {
  const out: number[] = [];
  for (let i = 0; i < c.values.length; i++) if (keep[i] && !Number.isNaN(c.values[i])) out.push(c.values[i]);
  return Float64Array.from(out);
}

/** Mean, population standard deviation (two passes) and median of v (NaN when empty). */
export function exactStatistics(v: Float64Array): { mean: number; std: number; median: number } {
  const n = v.length;
  let s = 0;
  for (const x of v) s += x;
  const mean = s / n;
  let q = 0;
  for (const x of v) q += (x - mean) ** 2;
  const sorted = Float64Array.from(v).sort();
  const median = n % 2 === 1 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  return { mean, std: Math.sqrt(q / n), median };
}

function exactNumeric(c: NumericColumn, keep: Uint8Array, opts: PrepareOptions, indicator: boolean, notes: string[]): NumericPrep {
  const spec = opts.spec?.columns[c.name];
  const present = presentValues(c, keep);
  let { mean, std, median } = exactStatistics(present);
  if (present.length === 0) {
    notes.push(`column '${c.name}': no value in the training rows; centre 0, scale 1, fill 0`);
    mean = median = 0;
    std = 1;
  }
  let scale = spec?.scale ?? std;
  if (opts.scale && scale === 0) {
    notes.push(`column '${c.name}': constant (${fmt(mean)}) in the training rows; scale 1`);
    scale = 1;
  }
  const fill =
    opts.missing === 'mean'
      ? { fill: spec?.mean ?? mean, fillSource: spec?.mean !== undefined ? 'declared' : 'exact' }
      : opts.missing === 'median'
        ? { fill: median, fillSource: 'exact' }
        : opts.missing === 'zero'
          ? { fill: 0, fillSource: 'fixed' }
          : { fill: null, fillSource: null };
  return {
    name: c.name,
    kind: 'numeric',
    range: spec?.range ?? null,
    rangeSource: spec?.range !== undefined ? 'declared' : null,
    ...(opts.scale
      ? { center: spec?.mean ?? mean, centerSource: spec?.mean !== undefined ? 'declared' : 'exact', scale, scaleSource: spec?.scale !== undefined ? 'declared' : 'exact' }
      : ({ center: 0, centerSource: 'fixed', scale: 1, scaleSource: 'fixed' } as const)),
    ...(fill as Pick<NumericPrep, 'fill' | 'fillSource'>),
    indicator,
  };
}

function exactCategorical(c: CategoricalColumn, keep: Uint8Array, opts: PrepareOptions, indicator: boolean): CategoricalPrep {
  const declared = opts.spec?.columns[c.name]?.categories;
  if (declared !== undefined) return { name: c.name, kind: 'categorical', vocabulary: [...declared], vocabularySource: 'declared', indicator };
  const seen = new Set<string>();
  for (let i = 0; i < c.codes.length; i++) if (keep[i] && c.codes[i] !== MISSING_CODE) seen.add(c.dictionary[c.codes[i]]);
  return { name: c.name, kind: 'categorical', vocabulary: [...seen].sort(byCodeUnits), vocabularySource: 'exact', indicator };
}

/**
 * Fit a preparation on the training rows `t`. Without `dp`, exact statistics of the rows (the
 * mean, the population standard deviation, the median), a declared value where the spec gives
 * one, and no clipping unless a range is declared. With `dp`, every statistic is declared or
 * estimated privately so that the whole fit is `dp.mu`-GDP (fit-dp.ts, docs/privacy.md
 * section 13); `--missing drop` is then refused.
 */
export function fitPreparation(t: RawTable, opts: PrepareOptions, dp?: DpPrepareBudget): { preparation: Preparation; notes: FitNotes } {
  const dpFit = dp === undefined ? undefined : new DpFit(dp, opts, t);
  if (opts.spec !== undefined) checkSpecAgainst(opts.spec, t);
  checkRows(t, opts);
  const indicators = new Set(opts.indicators ?? []);
  for (const n of indicators) if (!t.columns.some((c) => c.name === n)) throw new DataError(t.file, t.headerLine, `${PREPARE_FLAGS.indicators} names '${n}', which is not a column read from this file`);
  const notes: string[] = [];
  const keep = keptRows(t, opts);
  const inputs = t.columns.map((c) => {
    const ind = indicators.has(c.name);
    if (dpFit !== undefined) return c.kind === 'numeric' ? dpFit.numeric(c, ind, t.rows) : dpFit.categorical(c, ind);
    return c.kind === 'numeric' ? exactNumeric(c, keep, opts, ind, notes) : exactCategorical(c, keep, opts, ind);
  });
  const queries = dpFit?.asked ?? [];
  // The budget was split over the planned queries: asking more would spend more than mu.
  if (dpFit !== undefined && queries.length !== planQueries(opts, t.columns).length)
    throw new InternalError('fitting a private preparation', `${queries.length} queries asked, ${planQueries(opts, t.columns).length} planned`);
  const mu = queries.length > 0 && dp !== undefined ? dp.mu : 0;
  if (dpFit !== undefined) {
    notes.push(...dpFit.notes);
    if (dp?.noise.seeded && queries.length > 0) notes.push('the preparation\'s noise is seeded: predictable by anyone who knows the seed, for experiments only');
    notes.push(
      queries.length > 0
        ? `preparation at a private party: mu = ${fmt(mu)} spent over ${queries.length} queries of the data (mu ${fmt(mu / Math.sqrt(queries.length))} each, composed in GDP); the other statistics are declared or fixed`
        : 'preparation at a private party: every statistic declared, nothing spent',
    );
  }
  const preparation: Preparation = {
    version: 1,
    idColumn: opts.idColumn,
    missingTokens: [...(opts.missingTokens ?? DEFAULT_MISSING_TOKENS)],
    missing: opts.missing ?? null,
    scale: opts.scale,
    privacy: dp === undefined ? null : { mu, deltaThreshold: queries.some((q) => q.query === 'categories') ? dp.deltaThreshold : 0 },
    inputs,
    outputs: outputsOf(inputs),
  };
  return { preparation, notes: { notes, mu, queries } };
}
