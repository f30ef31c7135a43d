// The public grid of the private histogram of a numeric column: fixed in advance and the same
// for every column and every party, so the set of bins says nothing about the data.
import { MAX_ABS_VALUE } from '../io/numbers.js';

/** Bins per decade of magnitude. */
export const BINS_PER_DECADE = 4;
/** Smallest magnitude with bins of its own: |x| below it falls into the zero bin. */
export const GRID_LOW = 1e-6;
/** Largest magnitude with bins of its own: |x| at or above it falls into an overflow bin (up to MAX_ABS_VALUE). */
export const GRID_HIGH = 1e12;
/** Bins of one sign between GRID_LOW and GRID_HIGH. */
const PER_SIGN = Math.round(Math.log10(GRID_HIGH / GRID_LOW) * BINS_PER_DECADE);
/**
 * Bins, in the order of the values they hold: the negative overflow bin, the negative bins from
 * the largest magnitude down, the zero bin, the positive bins up, the positive overflow bin.
 */
export const GRID_BINS = 2 * PER_SIGN + 3;
const ZERO_BIN = PER_SIGN + 1;

/** Lower edge of magnitude bin k (0 <= k <= PER_SIGN): GRID_LOW 10^(k / BINS_PER_DECADE). */
function edge(k: number): number {
  return GRID_LOW * 10 ** (k / BINS_PER_DECADE);
}

/** The magnitude bin of m, GRID_LOW <= m < GRID_HIGH: the k with edge(k) <= m < edge(k + 1). */
function magnitudeBin(m: number): number {
  let k = Math.min(PER_SIGN - 1, Math.max(0, Math.floor(Math.log10(m / GRID_LOW) * BINS_PER_DECADE)));
  // log10 may round across an edge; the edges themselves decide.
  while (k > 0 && m < edge(k)) k--;
  while (k < PER_SIGN - 1 && m >= edge(k + 1)) k++;
  return k;
}

/** The bin of a finite value. */
export function binOf(x: number): number {
  const m = Math.abs(x);
  if (m < GRID_LOW) return ZERO_BIN;
  if (m >= GRID_HIGH) return x > 0 ? GRID_BINS - 1 : 0;
  const k = magnitudeBin(m);
  return x > 0 ? ZERO_BIN + 1 + k : ZERO_BIN - 1 - k;
}

/** The interval [lo, hi] a bin covers. */
export function binInterval(b: number): [number, number] {
  if (b === ZERO_BIN) return [-GRID_LOW, GRID_LOW];
  if (b === GRID_BINS - 1) return [GRID_HIGH, MAX_ABS_VALUE];
  if (b === 0) return [-MAX_ABS_VALUE, -GRID_HIGH];
  if (b > ZERO_BIN) {
    const k = b - ZERO_BIN - 1;
    return [edge(k), edge(k + 1)];
  }
  const k = ZERO_BIN - 1 - b;
  return [-edge(k + 1), -edge(k)];
}

/** Count of the present (non-NaN) values in each bin. */
export function histogram(values: Float64Array): Float64Array {
  const h = new Float64Array(GRID_BINS);
  for (const x of values) if (!Number.isNaN(x)) h[binOf(x)]++;
  return h;
}
