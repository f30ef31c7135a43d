/**
 * Points looked up in a PSI cache's table, the missing ones computed and added: the one way both
 * sides use a cache (a party's own ids, the coordinator's label ids and a party's points).
 */
import type { PointCache } from './point-cache.js';
import { POINT_BYTES } from './psi.js';

/** The points of some keys (absent when they went to a sink), how many of them were computed (not in the cache), and whether those could not join it (full). */
export interface CachedPoints {
  points: Uint8Array;
  computed: number;
  full: boolean;
}

/** Keys looked up at a time: keys made per slice (a party's digests) never exist all at once, and the event loop is served between slices. */
export const LOOKUP_SLICE = 1 << 16;

/** Keys given whole, or made a slice at a time (keys from..to-1, keyBytes each). */
export type CacheKeys = Uint8Array | { count: number; slice(from: number, to: number): Uint8Array };

/** Where points go instead of one array: the points of keys from..., at byte from*32 (a slice's, or one computed point's). */
export type PointSink = (from: number, points: Uint8Array) => void;

/** How cachedPoints runs: `keep` (default true) adds the computed points to the table; `sink` as there. */
export interface CachedPointsOptions {
  keep?: boolean;
  sink?: PointSink;
}

/**
 * Every key's point (keyBytes a key): cached ones from `table`, the others from `compute`
 * (given the indices of the keys that have none, it returns their points in that order),
 * which are then added to the table (unless `keep` is false). Keys are looked up LOOKUP_SLICE
 * at a time; of a slice's keys only the missing ones are kept. With a `sink`, the points go
 * there a slice at a time (a missing key's, garbage at first, then its computed one) and are
 * never all in memory; `points` is then empty.
 */
export async function cachedPoints(table: PointCache, keys: CacheKeys, keyBytes: number, compute: (missing: Uint32Array) => Promise<Uint8Array>, opts: CachedPointsOptions = {}): Promise<CachedPoints> {
  const { keep = true, sink } = opts;
  const n = keys instanceof Uint8Array ? keys.length / keyBytes : keys.count;
  const sliceOf = keys instanceof Uint8Array ? (a: number, b: number) => keys.subarray(a * keyBytes, b * keyBytes) : (a: number, b: number) => keys.slice(a, b);
  const points = new Uint8Array((sink ? Math.min(n, LOOKUP_SLICE) : n) * POINT_BYTES);
  const missing: number[] = [];
  const missingKeys: Uint8Array[] = [];
  for (let from = 0; from < n; from += LOOKUP_SLICE) {
    const to = Math.min(n, from + LOOKUP_SLICE);
    const slice = sliceOf(from, to);
    const out = sink ? points.subarray(0, (to - from) * POINT_BYTES) : points.subarray(from * POINT_BYTES, to * POINT_BYTES);
    const miss = table.lookup(slice, out);
    sink?.(from, out);
    for (const m of miss) missing.push(from + m);
    if (miss.length > 0) missingKeys.push(pickRows(slice, keyBytes, miss));
    if (to < n) await new Promise((resolve) => setImmediate(resolve));
  }
  const none = new Uint8Array(0);
  if (missing.length === 0) return { points: sink ? none : points, computed: 0, full: false };
  const fresh = await compute(Uint32Array.from(missing));
  let full = false;
  if (keep) {
    const added = new Uint8Array(missing.length * keyBytes);
    let at = 0;
    for (const k of missingKeys) {
      added.set(k, at);
      at += k.length;
    }
    full = !table.add(added, fresh);
  }
  // None cached (a first intersection): the computed points are all of them, in order.
  if (missing.length === n) {
    sink?.(0, fresh);
    return { points: sink ? none : fresh, computed: n, full };
  }
  for (let j = 0; j < missing.length; j++) {
    const point = fresh.subarray(j * POINT_BYTES, (j + 1) * POINT_BYTES);
    if (sink) sink(missing[j], point);
    else points.set(point, missing[j] * POINT_BYTES);
  }
  return { points: sink ? none : points, computed: missing.length, full };
}

/** The rows `which` of `bytes` (width bytes each), in that order (a byte loop: no view made per row). */
export function pickRows(bytes: Uint8Array, width: number, which: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(which.length * width);
  for (let j = 0; j < which.length; j++) {
    const from = which[j] * width;
    const to = j * width;
    for (let b = 0; b < width; b++) out[to + b] = bytes[from + b];
  }
  return out;
}
