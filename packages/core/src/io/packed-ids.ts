// Sample ids packed into one byte array (what a party keeps, and what crosses to a PSI thread).

/**
 * Sample ids packed: their UTF-8 bytes one after the other, id i from offsets[i] to
 * offsets[i + 1]. A million ids of a few characters take about 10 MB so, against about 35 MB
 * as strings (each with a header and a slot in its array); a plain object, it crosses to a
 * worker thread as two arrays. A party keeps its ids so.
 */
export interface PackedIds {
  readonly length: number;
  readonly bytes: Uint8Array;
  readonly offsets: Uint32Array;
}

/** `ids` packed. */
export function packIds(ids: readonly string[]): PackedIds {
  const n = ids.length;
  const offsets = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i] + Buffer.byteLength(ids[i], 'utf8');
  const buf = Buffer.allocUnsafeSlow(offsets[n]);
  for (let i = 0; i < n; i++) buf.write(ids[i], offsets[i], 'utf8');
  return { length: n, bytes: new Uint8Array(buf.buffer, buf.byteOffset, buf.length), offsets };
}

/** The ids order[0], order[1], ... of `p`, packed anew (a copy). */
export function selectIds(p: PackedIds, order: ArrayLike<number>): PackedIds {
  const offsets = new Uint32Array(order.length + 1);
  for (let i = 0; i < order.length; i++) {
    const r = order[i];
    if (!(r >= 0 && r < p.length)) throw new RangeError(`id ${r} out of range 0..${p.length - 1}`);
    offsets[i + 1] = offsets[i] + p.offsets[r + 1] - p.offsets[r];
  }
  const bytes = new Uint8Array(offsets[order.length]);
  for (let i = 0; i < order.length; i++) bytes.set(p.bytes.subarray(p.offsets[order[i]], p.offsets[order[i] + 1]), offsets[i]);
  return { length: order.length, bytes, offsets };
}

/** The ids from..to-1 of `p`, packed anew (a copy: a view would take the whole array to a worker thread). */
export function sliceIds(p: PackedIds, from: number, to: number): PackedIds {
  const base = p.offsets[from];
  return { length: to - from, bytes: p.bytes.slice(base, p.offsets[to]), offsets: p.offsets.slice(from, to + 1).map((o) => o - base) };
}
