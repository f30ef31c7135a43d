// The private fit: every statistic is declared (no look at the data) or estimated by the
// Gaussian mechanism, with the budget split evenly over the queries planned in advance
// (queries.ts), so that the whole preparation is mu-GDP (docs/privacy.md section 13).
import { ConfigError } from '../errors.js';
import { normalCdf } from '../privacy/accounting.js';
import { GRID_BITS, snapToGrid } from '../privacy/noise.js';
import { histogram, rangeOfHistogram } from './grid.js';
import type { CategoricalPrep, NumericPrep, StatSource } from './preparation.js';
import { type PlannedQuery, type QueryKind, categoryCounts, centredSquares, centredSum, clip, numericNeeds, planQueries, presentCount, sensitivity } from './queries.js';
import { PREPARE_FLAGS, type CategoricalColumn, type DpPrepareBudget, type NumericColumn, type PrepareOptions, type RawTable } from './types.js';

/**
 * A noisy bin of the histogram survives when its count is at least this many of its noise's
 * standard deviations. The range is the hull of the surviving bins, so one bin of noise alone
 * passing anywhere among the GRID_BINS (147) ruins it: that happens in a column with
 * probability about 147 P(N(0, 1) > z), 20 % at z = 3, 0.5 % at 4 (seen: a range from -3e5
 * for values within +-20, once in 800 columns), 4e-5 at 5. At 5 a bin needs a few more rows
 * to count (146 instead of 117 at mu 0.2 over 17 queries).
 */
export const HISTOGRAM_THRESHOLD_SIGMAS = 5;

/** One query as asked: what it was, its sensitivity and its noise (for the output and summary). */
export interface AskedQuery extends PlannedQuery {
  sensitivity: number;
  sigma: number;
  /** Categories: the noisy count a category needs to be kept. */
  threshold?: number;
}

/** x with Gaussian noise of standard deviation sigma, rounded to sigma's grid like every released value (privacy/noise.ts). */
function noisy(dp: DpPrepareBudget, x: Float64Array, sigma: number): Float64Array {
  const out = Float64Array.from(x);
  dp.noise.addNormal(out, sigma);
  snapToGrid(out, sigma);
  return out;
}

/** z with P(N(0, 1) > z) = p, by bisection on the normal CDF (0 < p < 1/2). */
export function upperQuantile(p: number): number {
  let lo = 0;
  let hi = 40;
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (normalCdf(-mid) > p) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** The state of a private fit: the budget per query, and the record of what was asked. */
export class DpFit {
  readonly asked: AskedQuery[] = [];
  readonly notes: string[] = [];
  private readonly muPerQuery: number;
  /** Categorical columns whose categories are estimated: the threshold's delta is split over them. */
  private readonly thresholded: number;
  constructor(
    private readonly dp: DpPrepareBudget,
    private readonly opts: PrepareOptions,
    t: RawTable,
  ) {
    if (!(dp.mu > 0 && Number.isFinite(dp.mu))) throw new ConfigError(`the preparation's mu must be a positive number, got ${dp.mu}`);
    if (opts.missing === 'drop')
      throw new ConfigError(
        "--missing drop at a party with a privacy budget: which rows are dropped would show in the alignment, outside the guarantee; use --missing mean|median|zero (with --missing-indicator to keep the information)",
      );
    const plan = planQueries(opts, t.columns);
    this.muPerQuery = dp.mu / Math.sqrt(Math.max(1, plan.length));
    this.thresholded = plan.filter((q) => q.query === 'categories').length;
    if (this.thresholded > 0 && !(dp.deltaThreshold > 0 && dp.deltaThreshold < 1))
      throw new ConfigError(`the preparation's deltaThreshold must be in (0, 1), got ${dp.deltaThreshold}`);
  }

  /** Ask one query: its exact answer `x` with noise of sigma = sensitivity / (mu per query). */
  private ask(column: string, query: QueryKind, x: Float64Array, range?: readonly [number, number]): { y: Float64Array; sigma: number } {
    const s = sensitivity(query, range);
    const sigma = s / this.muPerQuery;
    this.asked.push({ column, query, sensitivity: s, sigma });
    return { y: noisy(this.dp, x, sigma), sigma };
  }

  numeric(col: NumericColumn, indicator: boolean, rows: number): NumericPrep {
    const { opts } = this;
    const spec = opts.spec?.columns[col.name];
    const need = numericNeeds(opts, spec);
    const fixedScale = { center: 0, centerSource: 'fixed', scale: 1, scaleSource: 'fixed' } as const;
    const fillZero = opts.missing === 'zero' ? ({ fill: 0, fillSource: 'fixed' } as const) : ({ fill: null, fillSource: null } as const);
    const base = { name: col.name, kind: 'numeric', indicator } as const;
    if (need.declaredRange !== undefined) {
      const [lo, hi] = need.declaredRange;
      const center = spec?.mean ?? (lo + hi) / 2;
      if (opts.missing === 'median') this.notes.push(`column '${col.name}': --missing median fills with the declared mean or the midpoint of the declared range (no data looked at)`);
      return {
        ...base,
        range: [lo, hi],
        rangeSource: 'declared',
        ...(opts.scale ? { center, centerSource: 'declared', scale: spec?.scale ?? (hi - lo) / 2, scaleSource: 'declared' } : fixedScale),
        ...(opts.missing === 'mean' || opts.missing === 'median' ? { fill: center, fillSource: 'declared' } : fillZero),
      };
    }
    if (!need.any) return { ...base, range: null, rangeSource: null, ...fixedScale, ...fillZero };
    const { range, median } = this.range(col);
    const [lo, hi] = range;
    const c = (lo + hi) / 2;
    const n = opts.missing !== undefined && need.mean ? Math.max(1, this.ask(col.name, 'count', Float64Array.of(presentCount(col.values))).y[0]) : rows;
    const estimated = need.mean ? clip(c + this.ask(col.name, 'sum', Float64Array.of(centredSum(col.values, lo, hi)), range).y[0] / n, lo, hi) : c;
    const mean = spec?.mean ?? estimated;
    let scale = spec?.scale ?? 1;
    if (need.scale) {
      const squares = this.ask(col.name, 'squares', Float64Array.of(centredSquares(col.values, lo, hi)), range).y[0];
      // The standard deviation of values in [lo, hi] is at most (hi - lo) / 2; the floor keeps a
      // noisy estimate at or below zero from dividing by nothing.
      scale = clip(Math.sqrt(Math.max(0, squares / n - (estimated - c) ** 2)), 1e-3 * (hi - lo), (hi - lo) / 2);
    }
    const src = (declared: boolean): StatSource => (declared ? 'declared' : 'dp');
    const fill =
      opts.missing === 'mean'
        ? { fill: mean, fillSource: src(spec?.mean !== undefined) }
        : opts.missing === 'median'
          ? { fill: clip(median, lo, hi), fillSource: 'dp' as const }
          : fillZero;
    if (opts.missing === 'median') this.notes.push(`column '${col.name}': the median fill ${fmt(median)} is read off the private histogram (approximate: within its bin)`);
    return {
      ...base,
      range: [lo, hi],
      rangeSource: 'dp',
      ...(opts.scale ? { center: mean, centerSource: src(spec?.mean !== undefined), scale, scaleSource: src(spec?.scale !== undefined) } : fixedScale),
      ...fill,
    };
  }

  /** The range of a column, and its median, from its noisy histogram over the public grid (grid.ts, rangeOfHistogram). */
  private range(col: NumericColumn): { range: [number, number]; median: number } {
    const { y, sigma } = this.ask(col.name, 'histogram', histogram(col.values));
    const r = rangeOfHistogram(y, HISTOGRAM_THRESHOLD_SIGMAS * sigma);
    if (!r.reliable)
      this.notes.push(
        `column '${col.name}': no bin of the private histogram passed its threshold at this budget, so its range [${r.range.map(fmt).join(', ')}] is the bin with the largest noisy count and is unreliable: declare the column's range in the spec (${PREPARE_FLAGS.spec})`,
      );
    return r;
  }

  /**
   * The categories of a column from their noisy counts, kept above tau = 1 + sigma z with
   * P(N(0, 1) > z) = deltaThreshold / (number of such columns): a category that one row alone
   * holds (count 1) is then kept with at most that probability (set-union thresholding).
   */
  categorical(col: CategoricalColumn, indicator: boolean): CategoricalPrep {
    const base = { name: col.name, kind: 'categorical', indicator } as const;
    const declared = this.opts.spec?.columns[col.name]?.categories;
    if (declared !== undefined) return { ...base, vocabulary: [...declared], vocabularySource: 'declared' };
    const counts = categoryCounts(col);
    const names = [...counts.keys()];
    const { y, sigma } = this.ask(col.name, 'categories', Float64Array.from(names, (c) => counts.get(c)!));
    const tau = 1 + sigma * upperQuantile(this.dp.deltaThreshold / this.thresholded);
    this.asked[this.asked.length - 1].threshold = tau;
    // The counts were rounded to sigma's grid (privacy/noise.ts), by at most half a step: a
    // count kept above tau plus that half step was above tau before the rounding, so the
    // threshold's delta is the one stated.
    const halfStep = 2 ** Math.floor(Math.log2(sigma)) / 2 ** GRID_BITS / 2;
    const vocabulary = names.filter((_, k) => y[k] > tau + halfStep).sort(byCodeUnits);
    this.notes.push(`column '${col.name}': ${vocabulary.length} categories kept (noisy count above ${fmt(tau)}); a rarer category is all zeros`);
    return { ...base, vocabulary, vocabularySource: 'dp' };
  }
}

export const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export const fmt = (x: number): string => Number(x.toPrecision(4)).toString();
