/**
 * Points looked up in a PSI cache's table, the missing ones computed and added: the one way both
 * sides use a cache (a party's own ids, the coordinator's label ids and a party's points).
 */
import type { PointCache } from './psi-cache.js';
import { POINT_BYTES } from './psi.js';

/** The points of some keys, how many of them were computed (not in the cache), and whether those could not join it (full). */
export interface CachedPoints {
  points: Uint8Array;
  computed: number;
  full: boolean;
}

/**
 * Every key's point (keyBytes a key): cached ones from `table`, the others from `compute`
 * (given the indices of the keys that have none, it returns their points in that order),
 * which are then added to the table (unless `keep` is false).
 */
export async function cachedPoints(table: PointCache, keys: Uint8Array, keyBytes: number, compute: (missing: Uint32Array) => Promise<Uint8Array>, keep = true): Promise<CachedPoints> {
  const points = new Uint8Array((keys.length / keyBytes) * POINT_BYTES);
  const missing = table.lookup(keys, points);
  if (missing.length === 0) return { points, computed: 0, full: false };
  const fresh = await compute(missing);
  const full = keep && !table.add(keys, fresh, missing);
  // None cached (a first intersection): the computed points are all of them, in order.
  if (missing.length === points.length / POINT_BYTES) return { points: fresh, computed: missing.length, full };
  for (let j = 0; j < missing.length; j++) points.set(fresh.subarray(j * POINT_BYTES, (j + 1) * POINT_BYTES), missing[j] * POINT_BYTES);
  return { points, computed: missing.length, full };
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
