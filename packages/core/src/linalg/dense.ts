// Dense row-major matrices and the kernels a factored x-update needs: products that stream
// through the rows once, the Gram matrices A^T A and A A^T by packed panels with 4 x 2 register
// blocks, and a Cholesky factorisation with its triangular solves. Plain loops over
// Float64Array: V8 does not vectorise, so the speed comes from independent accumulators and
// from touching each cache line once (measured on a 2-core machine: about 1.5 G multiply-adds
// per second for the Gram matrix, 3 to 4 times the naive triple loop).
import { type Csr, assertLength } from './csr.js';
import { packedAt, packedLength } from './packed.js';

/** A dense matrix, row-major: element (i, j) is data[i * cols + j]. */
export interface Dense {
  rows: number;
  cols: number;
  data: Float64Array;
}

/** The share of stored entries at or above which a block is kept dense (8 bytes an entry instead of 12 a non-zero). */
export const DENSE_DENSITY = 0.5;

/** Whether `a` is better stored dense (its non-zeros at least DENSE_DENSITY of its entries). */
export function preferDense(a: Csr): boolean {
  return a.rows > 0 && a.cols > 0 && a.indices.length >= DENSE_DENSITY * a.rows * a.cols;
}

/**
 * A zeroed Float64Array in shared memory. Dense blocks live there: the x-update's threads
 * (DenseTeam) read the same memory instead of a copy. It costs nothing more than an
 * ordinary array: pages never written are not resident either.
 */
export function sharedFloat64(length: number): Float64Array {
  return sharedArray(Float64Array, length);
}

/** A typed array of `length` elements in a SharedArrayBuffer (worker threads read it where it is). */
export function sharedArray<T>(C: { new (b: SharedArrayBuffer): T; BYTES_PER_ELEMENT: number }, length: number): T {
  return new C(new SharedArrayBuffer(length * C.BYTES_PER_ELEMENT));
}

/** Rows `order[0], order[1], ...` of a CSR matrix as a dense matrix in shared memory (no CSR copy in between). */
export function csrSelectRowsDense(a: Csr, order: ArrayLike<number>): Dense {
  const { cols } = a;
  const data = sharedFloat64(order.length * cols);
  for (let r = 0; r < order.length; r++) {
    const i = order[r];
    if (!(i >= 0 && i < a.rows)) throw new RangeError(`row ${i} out of range [0, ${a.rows})`);
    const off = r * cols;
    for (let p = a.indptr[i]; p < a.indptr[i + 1]; p++) data[off + a.indices[p]] = a.values[p];
  }
  return { rows: order.length, cols, data };
}

/** The matrix dense, in shared memory. */
export function csrToDense(a: Csr): Dense {
  return csrSelectRowsDense(a, Uint32Array.from({ length: a.rows }, (_, i) => i));
}

/** Column means (length cols). */
export function denseColumnMeans(a: Dense): Float64Array {
  const { rows, cols, data } = a;
  const m = new Float64Array(cols);
  for (let i = 0; i < rows; i++) for (let j = 0, r = i * cols; j < cols; j++) m[j] += data[r + j];
  for (let j = 0; j < cols; j++) m[j] /= rows;
  return m;
}

/** Whether a matrix is dense (as opposed to CSR, or io's SpilledCsr). */
export function isDense<M extends object = Csr>(a: M | Dense): a is Dense {
  return 'data' in a;
}

/** out = A x (length rows). */
export function denseMatVec(out: Float64Array, a: Dense, x: Float64Array): Float64Array {
  denseMatVecRows(out, a, x, 0, a.rows);
  return out;
}

/** out[i] = (A x)[i] for rows i in [from, to). */
export function denseMatVecRows(out: Float64Array, a: Dense, x: Float64Array, from: number, to: number): void {
  const { cols, data } = a;
  for (let i = from; i < to; i++) {
    const r = i * cols;
    let s0 = 0;
    let s1 = 0;
    let j = 0;
    for (; j + 1 < cols; j += 2) {
      s0 += data[r + j] * x[j];
      s1 += data[r + j + 1] * x[j + 1];
    }
    if (j < cols) s0 += data[r + j] * x[j];
    out[i] = s0 + s1;
  }
}

/** out = A^T w (length cols), one pass over the rows. */
export function denseMatTVec(out: Float64Array, a: Dense, w: Float64Array): Float64Array {
  denseMatTVecRows(out, a, w, 0, a.rows);
  return out;
}

/** out = A[from:to]^T w[from:to] (length cols): rows [from, to)'s part of A^T w. */
export function denseMatTVecRows(out: Float64Array, a: Dense, w: Float64Array, from: number, to: number): void {
  const { cols, data } = a;
  out.fill(0, 0, cols);
  let i = from;
  // Two rows per pass: half the passes over `out`.
  for (; i + 1 < to; i += 2) {
    const w0 = w[i];
    const w1 = w[i + 1];
    const r0 = i * cols;
    const r1 = r0 + cols;
    for (let j = 0; j < cols; j++) out[j] += data[r0 + j] * w0 + data[r1 + j] * w1;
  }
  if (i < to) {
    const wi = w[i];
    const r = i * cols;
    for (let j = 0; j < cols; j++) out[j] += data[r + j] * wi;
  }
}

/** Rows of a panel: a block of rows, transposed, stays in the L2 cache while every pair of its columns is multiplied. */
export const PANEL_ROWS = 128;

/**
 * Adds rows [from, to) of A to A^T A, packed (packedLength(cols)), in `g`: its columns [c0, c1)
 * (c0 a multiple of 4), that is the elements (k, j) with j in [c0, c1) and k >= j, so that
 * threads can form disjoint parts of one matrix. The rows are taken in panels of PANEL_ROWS,
 * each copied transposed (a column of the panel is contiguous); every 4 x 2 block of the
 * triangle is then 8 dot products over the panel's rows. `panel` is scratch space
 * (gramPanel), for a caller that adds a range at a time.
 */
export function denseGramRows(a: Dense, g: Float64Array, from: number, to: number, panel = gramPanel(a.cols), c0 = 0, c1 = a.cols): void {
  const { cols: d, data } = a;
  assertLength('gram', g, packedLength(d));
  if (c0 >= c1) return;
  if (c0 % 4 !== 0) throw new RangeError(`denseGramRows: c0 (${c0}) must be a multiple of 4`);
  const dp = (d + 3) & ~3; // padded to whole 4 x 2 blocks (the padding columns are zero)
  assertLength('panel', panel, dp * PANEL_ROWS);
  for (let r0 = from; r0 < to; r0 += PANEL_ROWS) {
    const rb = Math.min(PANEL_ROWS, to - r0);
    if (rb < PANEL_ROWS) panel.fill(0);
    // Only the columns from c0 on are read (a block's partners k start at its own columns).
    for (let r = 0; r < rb; r++) {
      const off = (r0 + r) * d;
      for (let j = c0; j < d; j++) panel[j * rb + r] = data[off + j];
    }
    for (let j = c0; j < c1; j += 4) {
      const p0 = j * rb;
      const p1 = p0 + rb;
      const p2 = p1 + rb;
      const p3 = p2 + rb;
      for (let k = j & ~1; k < dp; k += 2) {
        const q0 = k * rb;
        const q1 = q0 + rb;
        let s00 = 0, s01 = 0, s10 = 0, s11 = 0, s20 = 0, s21 = 0, s30 = 0, s31 = 0; // prettier-ignore
        for (let r = 0; r < rb; r++) {
          const b0 = panel[q0 + r];
          const b1 = panel[q1 + r];
          const a0 = panel[p0 + r];
          const a1 = panel[p1 + r];
          const a2 = panel[p2 + r];
          const a3 = panel[p3 + r];
          s00 += a0 * b0;
          s01 += a0 * b1;
          s10 += a1 * b0;
          s11 += a1 * b1;
          s20 += a2 * b0;
          s21 += a2 * b1;
          s30 += a3 * b0;
          s31 += a3 * b1;
        }
        addPacked(g, d, j, k, s00, s01);
        addPacked(g, d, j + 1, k, s10, s11);
        addPacked(g, d, j + 2, k, s20, s21);
        addPacked(g, d, j + 3, k, s30, s31);
      }
    }
  }
}

/** denseGramRows's scratch space for a matrix of `cols` columns. */
export function gramPanel(cols: number): Float64Array {
  return new Float64Array(((cols + 3) & ~3) * PANEL_ROWS);
}

/** Element (i, k) and (i, k + 1) of the symmetric d x d matrix, packed in `g`, += s0 and s1, each where k >= i (so each pair once). */
function addPacked(g: Float64Array, d: number, i: number, k: number, s0: number, s1: number): void {
  if (i >= d) return;
  if (k >= i && k < d) g[packedAt(k) + i] += s0;
  if (k + 1 >= i && k + 1 < d) g[packedAt(k + 1) + i] += s1;
}

/**
 * Rows [from, to) of A A^T's upper triangle, packed (packedLength(rows)) in `k` (row i against
 * rows j >= i, 2 x 2 at a time: element (j, i) of the lower triangle). `from` is even, so the
 * pairs of rows line up.
 */
export function denseOuterGramRows(a: Dense, k: Float64Array, from: number, to: number): void {
  const { rows: n, cols, data } = a;
  assertLength('gram', k, packedLength(n));
  if (from >= to) return;
  if (from % 2 !== 0) throw new RangeError(`denseOuterGramRows: from (${from}) must be even`);
  for (let i = from; i < to; i += 2) {
    const i1 = Math.min(i + 1, n - 1);
    for (let j = i; j < n; j += 2) {
      const j1 = Math.min(j + 1, n - 1);
      const a0 = i * cols;
      const a1 = i1 * cols;
      const b0 = j * cols;
      const b1 = j1 * cols;
      let s00 = 0, s01 = 0, s10 = 0, s11 = 0; // prettier-ignore
      for (let c = 0; c < cols; c++) {
        const x0 = data[a0 + c];
        const x1 = data[a1 + c];
        const y0 = data[b0 + c];
        const y1 = data[b1 + c];
        s00 += x0 * y0;
        s01 += x0 * y1;
        s10 += x1 * y0;
        s11 += x1 * y1;
      }
      // (i, j1) and (i1, j) are the same element when j = i (then j1 = i1): the same sum twice.
      k[packedAt(j) + i] = s00;
      k[packedAt(j1) + i] = s01;
      k[packedAt(Math.max(i1, j)) + Math.min(i1, j)] = s10;
      k[packedAt(j1) + i1] = s11;
    }
  }
}

/**
 * The Cholesky factor of a symmetric positive definite n x n matrix given by its lower
 * triangle, packed (packedLength), in place: on return `a` holds L with A = L L^T, packed.
 * Row by row (the Cholesky-Crout order): L[i][j] is a dot product of the prefixes of rows i
 * and j, contiguous in memory. Returns false, with `a` partly overwritten, when a pivot is not
 * positive (A is not positive definite to working precision).
 */
export function choleskyInPlace(a: Float64Array, n: number): boolean {
  return choleskyRows(a, n, 0, n);
}

/**
 * Rows [from, to) of choleskyInPlace's factor, rows before `from` already factored (so a
 * factorisation can be done a range at a time). Returns false at a pivot that is not positive.
 * With [j0, j1), only those columns of each row, the columns before j0 already factored: the
 * columns before `from` of rows [from, to) need only the rows before `from`, so threads can
 * form them for different rows at once (DenseTeam.cholesky).
 */
export function choleskyRows(a: Float64Array, n: number, from: number, to: number, j0 = 0, j1 = n): boolean {
  assertLength('factor', a, packedLength(n));
  for (let i = from; i < to; i++) {
    const ri = packedAt(i);
    const end = Math.min(i, j1 - 1);
    for (let j = j0, rj = packedAt(j0); j <= end; rj += ++j) {
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let k = 0;
      for (; k + 3 < j; k += 4) {
        s0 += a[ri + k] * a[rj + k];
        s1 += a[ri + k + 1] * a[rj + k + 1];
        s2 += a[ri + k + 2] * a[rj + k + 2];
        s3 += a[ri + k + 3] * a[rj + k + 3];
      }
      for (; k < j; k++) s0 += a[ri + k] * a[rj + k];
      const v = a[ri + j] - (s0 + s1 + s2 + s3);
      if (j < i) a[ri + j] = v / a[rj + j];
      else {
        if (!(v > 0)) return false;
        a[ri + i] = Math.sqrt(v);
      }
    }
  }
  return true;
}

/** Solves L L^T x = b in place (b becomes x), L from choleskyInPlace (packed). */
export function choleskySolveInPlace(l: Float64Array, n: number, b: Float64Array): void {
  assertLength('factor', l, packedLength(n));
  assertLength('b', b, n);
  forwardSubstitute(l, n, b);
  backSubstitute(l, n, b);
}

/** L y = b in place, L packed: a dot product with each row of L. */
export function forwardSubstitute(l: Float64Array, n: number, b: Float64Array): void {
  for (let i = 0, r = 0; i < n; r += ++i) {
    let s0 = 0;
    let s1 = 0;
    let k = 0;
    for (; k + 1 < i; k += 2) {
      s0 += l[r + k] * b[k];
      s1 += l[r + k + 1] * b[k + 1];
    }
    if (k < i) s0 += l[r + k] * b[k];
    b[i] = (b[i] - s0 - s1) / l[r + i];
  }
}

/** L^T x = y in place, L packed: by rows of L from the last, each solved entry subtracted from those before it. */
export function backSubstitute(l: Float64Array, n: number, b: Float64Array): void {
  for (let i = n - 1; i >= 0; i--) {
    const r = packedAt(i);
    const xi = (b[i] /= l[r + i]);
    for (let k = 0; k < i; k++) b[k] -= l[r + k] * xi;
  }
}
