// The queries a private preparation asks of the data, each with its L2 sensitivity under the
// project's neighbouring relation (docs/privacy.md section 2: one row of the party replaced,
// which may change every column of the row at once, and may make a value go missing or come
// back). The proofs are in docs/privacy.md section 13; the test checks them on neighbours.
import { ConfigError } from '../errors.js';
import { type ColumnSpec } from './spec.js';
import { MISSING_CODE, type CategoricalColumn, type PrepareOptions, type RawColumn } from './types.js';

/** The kinds of query: per numeric column a histogram, a count, a sum and a sum of squares; per categorical column the counts of its categories. */
export const QUERY_KINDS = ['histogram', 'count', 'sum', 'squares', 'categories'] as const;
export type QueryKind = (typeof QUERY_KINDS)[number];

export interface PlannedQuery {
  column: string;
  query: QueryKind;
}

/**
 * L2 sensitivity of a query under replacement of one row; `range` is the clipping range of a
 * sum (fixed before the sum is asked: adaptive composition).
 * - histogram: the row leaves one bin and enters another (or none, going missing): sqrt 2.
 * - count of present values: 1.
 * - sum of clip(x) - c, c the range's midpoint: a present value moves by at most hi - lo, a
 *   value going missing by at most (hi - lo) / 2: hi - lo. (A sum of clip(x) itself would move
 *   by max(|lo|, |hi|) when a value goes missing, far more than hi - lo for a range such as
 *   [1e5, 1.1e5]: hence the centring.)
 * - sum of (clip(x) - c)^2: each term lies in [0, ((hi - lo) / 2)^2]: ((hi - lo) / 2)^2.
 * - category counts: one category loses the row, another gains it: sqrt 2 over the categories
 *   both tables hold; a category only one table holds is the thresholding's delta.
 */
export function sensitivity(query: QueryKind, range?: readonly [number, number]): number {
  switch (query) {
    case 'histogram':
    case 'categories':
      return Math.SQRT2;
    case 'count':
      return 1;
    case 'sum':
    case 'squares': {
      if (range === undefined) throw new ConfigError(`the ${query} query needs a range`);
      const w = range[1] - range[0];
      return query === 'sum' ? w : (w / 2) ** 2;
    }
  }
}

/** Number of present (non-NaN) values. */
export function presentCount(values: Float64Array): number {
  let n = 0;
  for (const x of values) if (!Number.isNaN(x)) n++;
  return n;
}

export const clip = (x: number, lo: number, hi: number): number => (x < lo ? lo : x > hi ? hi : x);

/** Sum of clip(x, lo, hi) - (lo + hi) / 2 over the present values. */
export function centredSum(values: Float64Array, lo: number, hi: number): number {
  const c = (lo + hi) / 2;
  let s = 0;
  for (const x of values) if (!Number.isNaN(x)) s += clip(x, lo, hi) - c;
  return s;
}

/** Sum of (clip(x, lo, hi) - (lo + hi) / 2)^2 over the present values. */
export function centredSquares(values: Float64Array, lo: number, hi: number): number {
  const c = (lo + hi) / 2;
  let s = 0;
  for (const x of values) if (!Number.isNaN(x)) s += (clip(x, lo, hi) - c) ** 2;
  return s;
}

/** Count of each category held by at least one row (missing values are not a category). */
export function categoryCounts(col: CategoricalColumn): Map<string, number> {
  const n = new Float64Array(col.dictionary.length);
  for (const k of col.codes) if (k !== MISSING_CODE) n[k]++;
  const out = new Map<string, number>();
  col.dictionary.forEach((c, k) => n[k] > 0 && out.set(c, n[k]));
  return out;
}

/** What the fit of a numeric column needs to estimate, given the options and its spec. */
export function numericNeeds(opts: PrepareOptions, spec: ColumnSpec | undefined) {
  const declaredRange = spec?.range ?? (spec?.mean !== undefined && spec.scale !== undefined ? ([spec.mean - 4 * spec.scale, spec.mean + 4 * spec.scale] as const) : undefined);
  const center = opts.scale && spec?.mean === undefined;
  const scale = opts.scale && spec?.scale === undefined;
  // The variance is estimated about the estimated mean (a declared mean need not be the data's).
  const mean = center || scale || (opts.missing === 'mean' && spec?.mean === undefined);
  const median = opts.missing === 'median';
  return { declaredRange, center, scale, mean, median, any: center || scale || mean || median };
}

/**
 * The queries of a private fit, in the order they are asked, decided by the options, the spec and
 * the kinds of the columns only (never by the data), so that the split of the budget is fixed
 * before any is asked. A numeric column with a declared range (or a declared mean and scale)
 * asks nothing; otherwise, when it needs a statistic, a histogram for its range, then a count of
 * its present values when missing values are allowed (otherwise every one of the N rows is
 * present, and N is public under replacement), a sum for its mean, a sum of squares for its
 * scale. A categorical column without declared categories asks for their counts.
 */
export function planQueries(opts: PrepareOptions, columns: readonly Pick<RawColumn, 'name' | 'kind'>[]): PlannedQuery[] {
  const out: PlannedQuery[] = [];
  for (const c of columns) {
    const spec = opts.spec?.columns[c.name];
    if (c.kind === 'categorical') {
      if (spec?.categories === undefined) out.push({ column: c.name, query: 'categories' });
      continue;
    }
    const need = numericNeeds(opts, spec);
    if (need.declaredRange !== undefined || !need.any) continue;
    out.push({ column: c.name, query: 'histogram' });
    if (opts.missing !== undefined && need.mean) out.push({ column: c.name, query: 'count' });
    if (need.mean) out.push({ column: c.name, query: 'sum' });
    if (need.scale) out.push({ column: c.name, query: 'squares' });
  }
  return out;
}

/** Number of queries a private fit asks (each gets mu / sqrt(count): GDP composition, mu^2 adds up). */
export function preparationQueries(opts: PrepareOptions, columns: readonly Pick<RawColumn, 'name' | 'kind'>[]): number {
  return planQueries(opts, columns).length;
}

/** The mu a private fit with budget `mu` spends: all of it if it asks anything, nothing if every statistic is declared. */
export function preparationMu(opts: PrepareOptions, columns: readonly Pick<RawColumn, 'name' | 'kind'>[], mu: number): number {
  return preparationQueries(opts, columns) > 0 ? mu : 0;
}

/**
 * A party's total mu split between the preparation and the release: GDP composes as
 * mu_total^2 = mu_prep^2 + mu_release^2 (Dong, Roth and Su 2019, Corollary 3.3), so `share` is
 * the preparation's share of mu_total^2.
 */
export function splitGdpMu(muTotal: number, share: number): { prep: number; release: number } {
  if (!(share >= 0 && share < 1)) throw new ConfigError(`the preparation's share of the budget must be in [0, 1), got ${share}`);
  return { prep: muTotal * Math.sqrt(share), release: muTotal * Math.sqrt(1 - share) };
}
