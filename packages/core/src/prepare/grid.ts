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

/**
 * The range and the median of a column from its noisy histogram `y` (post-processing only).
 * Bins below `cut` are set to zero and the range is the hull of the others; with none above the
 * cut, the range is the bin with the largest noisy count, marked unreliable. A bin of noise
 * alone that passes the cut anywhere among the GRID_BINS would be taken into the hull and make
 * the range useless (at 1e11, say), which is why the cut is high (HISTOGRAM_THRESHOLD_SIGMAS).
 * The median interpolates linearly within the bin where the surviving counts reach half their
 * total.
 */
export function rangeOfHistogram(y: Float64Array, cut: number): { range: [number, number]; median: number; reliable: boolean } {
  let best = 0;
  for (let b = 1; b < GRID_BINS; b++) if (y[b] > y[best]) best = b;
  const count = (b: number) => (y[b] >= cut || b === best ? Math.max(0, y[b]) : 0);
  let first = best;
  let last = best;
  let total = 0;
  for (let b = 0; b < GRID_BINS; b++) {
    if (y[b] < cut) continue;
    first = Math.min(first, b);
    last = Math.max(last, b);
  }
  for (let b = first; b <= last; b++) total += count(b);
  const range: [number, number] = [binInterval(first)[0], binInterval(last)[1]];
  const reliable = y[best] >= cut;
  let below = 0;
  for (let b = first; b <= last; b++) {
    const c = count(b);
    if (c > 0 && below + c >= total / 2) {
      const [a, z] = binInterval(b);
      return { range, median: a + ((total / 2 - below) / c) * (z - a), reliable };
    }
    below += c;
  }
  return { range, median: (range[0] + range[1]) / 2, reliable };
}
