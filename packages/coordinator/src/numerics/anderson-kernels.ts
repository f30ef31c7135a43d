/*
 * The vector kernels of Anderson acceleration (anderson.ts), each over a range [from, to) of
 * the state, so that two threads can share one call chunk by chunk (anderson-team.ts).
 *
 * V8 compiles a sum into one chain of dependent additions, so a plain dot product waits on
 * the adder every element; these go two vectors per pass, each with two sums (four chains in
 * flight), and read the shared vector once. With pass 1 computing the new difference's own
 * square and the copies done by memcpy (set), one call of `next` on a9a's state (130k
 * elements, memory 5) went from about 4.7 ms to about 2 ms; the copies now ride along with
 * the first pair of the combination (nextPoint), and the differences are single precision.
 *
 * With `k`, the kernels of core's kernels.wat (aa*) do the loops, two elements at a time: every
 * array is then a view of k's memory. The sums here keep the even elements' and the odd
 * elements' apart, as the WebAssembly's two lanes do, so that both give the same bits.
 */
import type { VectorKernels } from '@admm-share/core/team';

/** Where firstPass puts its sums: ||g||^2, dG_new . g, dG_new . dG_new, then dG_new . dG_kept[r]. */
export const NORM_SQ = 0;
export const NEW_RHS = 1;
export const NEW_SQ = 2;
export const ROW = 3;

/**
 * Pass 1 of `next` over [from, to): g = f - point and its squared norm; with a slot for the new
 * differences, dF_new = f - prevF, dG_new = g - prevG (rounded to single precision, as
 * stored), dG_new . g, dG_new . dG_new and dG_new . dG_kept[r]. The sums go to `out` (above).
 */
export function firstPass(
  f: Float64Array,
  point: Float64Array,
  prevF: Float64Array,
  prevG: Float64Array,
  dFs: Float32Array | undefined,
  dGs: Float32Array | undefined,
  kept: readonly Float32Array[],
  from: number,
  to: number,
  out: Float64Array,
  k?: VectorKernels,
): void {
  out.fill(0, 0, ROW + kept.length);
  if (k) {
    if (dFs && dGs) k.aaFirst(from, to, f.byteOffset, point.byteOffset, prevF.byteOffset, prevG.byteOffset, dFs.byteOffset, dGs.byteOffset, out.byteOffset);
    else k.aaNorm(from, to, f.byteOffset, point.byteOffset, out.byteOffset);
  } else {
    // The sums of the even elements (lane 0) and of the odd ones (lane 1), as the kernels' two lanes.
    const lanes = new Float64Array(6); // ||g||^2, dG . g, dG . dG for lane 0, then for lane 1
    for (let i = from; i < to; i++) {
      const o = ((i - from) & 1) * 3;
      const fi = f[i];
      const gi = fi - point[i];
      lanes[o] += gi * gi;
      if (dFs && dGs) {
        dFs[i] = fi - prevF[i];
        // The stored (single-precision) difference, so that the Gram matrix is that of the stored vectors.
        const dg = Math.fround(gi - prevG[i]);
        dGs[i] = dg;
        lanes[o + 1] += dg * gi;
        lanes[o + 2] += dg * dg;
      }
    }
    out[NORM_SQ] = lanes[0] + lanes[3];
    out[NEW_RHS] = lanes[1] + lanes[4];
    out[NEW_SQ] = lanes[2] + lanes[5];
  }
  if (dGs) addDots(out, ROW, dGs, kept, from, to, k);
}

/** out[at + r] += a . b_r over [from, to), two vectors at a time. */
function addDots(out: Float64Array, at: number, a: Float32Array, bs: readonly Float32Array[], from: number, to: number, k: VectorKernels | undefined): void {
  const end = to - ((to - from) & 1);
  let r = 0;
  for (; r + 1 < bs.length; r += 2) {
    const b = bs[r];
    const c = bs[r + 1];
    if (k) {
      k.aaDots2(from, to, a.byteOffset, b.byteOffset, c.byteOffset, out.byteOffset + 8 * (at + r));
      continue;
    }
    let b0 = 0;
    let b1 = 0;
    let c0 = 0;
    let c1 = 0;
    for (let i = from; i < end; i += 2) {
      const x0 = a[i];
      const x1 = a[i + 1];
      b0 += x0 * b[i];
      b1 += x1 * b[i + 1];
      c0 += x0 * c[i];
      c1 += x1 * c[i + 1];
    }
    if (end < to) {
      b0 += a[end] * b[end];
      c0 += a[end] * c[end];
    }
    out[at + r] += b0 + b1;
    out[at + r + 1] += c0 + c1;
  }
  if (r < bs.length && k) k.aaDot1(from, to, a.byteOffset, bs[r].byteOffset, out.byteOffset + 8 * (at + r));
  else if (r < bs.length) {
    const b = bs[r];
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    let i = from;
    for (; i + 3 < to; i += 4) {
      s0 += a[i] * b[i];
      s1 += a[i + 1] * b[i + 1];
      s2 += a[i + 2] * b[i + 2];
      s3 += a[i + 3] * b[i + 3];
    }
    for (; i < to; i++) s0 += a[i] * b[i];
    out[at + r] += s0 + s1 + (s2 + s3);
  }
}

/**
 * Pass 2 of `next` over [from, to): prevG = f - point, prevF = f and point = f - sum_r
 * gamma_r d_r in one pass with the first two differences, then two more per pass (the same
 * arithmetic, in the same order, as copying f and subtracting pair by pair; a last odd
 * difference goes in a pair with itself, weighed 0). Without gamma, the plain step: point = f.
 */
export function nextPoint(
  point: Float64Array,
  prevF: Float64Array,
  prevG: Float64Array,
  f: Float64Array,
  ds: readonly Float32Array[],
  gamma: Float64Array | undefined,
  from: number,
  to: number,
  k?: VectorKernels,
): void {
  if (!gamma || ds.length === 0) {
    for (let i = from; i < to; i++) prevG[i] = f[i] - point[i];
    const part = f.subarray(from, to);
    prevF.set(part, from);
    point.set(part, from);
    return;
  }
  // A term weighed 0 adds an exact zero.
  for (let r = 0; r < ds.length; r += 2) {
    const c = ds[r];
    const gc = gamma[r];
    const d = r + 1 < ds.length ? ds[r + 1] : c;
    const gd = r + 1 < ds.length ? gamma[r + 1] : 0;
    if (k && r === 0) k.aaNextFirst(from, to, point.byteOffset, prevF.byteOffset, prevG.byteOffset, f.byteOffset, c.byteOffset, d.byteOffset, gc, gd);
    else if (k) k.aaNextPair(from, to, point.byteOffset, c.byteOffset, d.byteOffset, gc, gd);
    else if (r === 0)
      for (let i = from; i < to; i++) {
        const fi = f[i];
        prevG[i] = fi - point[i];
        prevF[i] = fi;
        point[i] = fi - (gc * c[i] + gd * d[i]);
      }
    else for (let i = from; i < to; i++) point[i] -= gc * c[i] + gd * d[i];
  }
}
