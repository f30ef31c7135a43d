/**
 * Compressed sparse row matrices over Float64Array. A party's feature block
 * stays in this form from file to model: nothing here densifies N x d.
 */
import { packedAt, packedLength } from './packed.js';

export interface Csr {
  readonly rows: number;
  readonly cols: number;
  /** rows + 1 offsets into `indices` / `values`. */
  readonly indptr: Int32Array;
  /** 0-based column of each stored entry, increasing within a row. */
  readonly indices: Int32Array;
  readonly values: Float64Array;
}

export function assertLength(name: string, v: ArrayLike<number>, n: number): void {
  if (v.length !== n) throw new RangeError(`${name} has length ${v.length}, expected ${n}`);
}

/**
 * Entries per block of a growing CSR array. A builder fills blocks of this size and copies them
 * once into exact-size arrays in `build()`, so loading needs about twice the final arrays at
 * the peak (the blocks and the result), never the 1.5x-growth copies of one big array (or the
 * 8 bytes per index of a plain `number[]`). 64 Ki entries are 0.5 MiB of doubles.
 *
 * With a capacity (an upper bound on the entries, e.g. from a file's size) the entries go into
 * one array of that length instead and `build()` returns a view of its filled part: no copy and
 * no second set of arrays. A large typed array is zero pages until written (calloc, then mmap),
 * so the unused tail costs address space, not memory. Such a view must not be structured-cloned
 * (workerData, postMessage) or written by its `.buffer`: that would copy the whole array. The
 * party only ever hands a worker thread rows it selected into new arrays (csrSelectRows).
 */
const BLOCK = 1 << 16;
/** Largest number of stored entries: `indptr` is an Int32Array. */
export const MAX_NNZ = 2 ** 31 - 1;
/** Largest capacity taken up front (12 bytes of address space each); beyond it, blocks. */
export const MAX_CSR_CAPACITY = 2 ** 27;

/** An append-only typed array kept in blocks (the first one grows from small up to BLOCK), or in one array of a given capacity. */
class Appender<A extends Int32Array | Float64Array> {
  private full: A[] = [];
  private fullLength = 0;
  private cur: A;
  private pos = 0;
  constructor(
    private readonly make: (n: number) => A,
    capacity = 0,
  ) {
    const size = Math.max(16, Math.min(capacity, MAX_CSR_CAPACITY));
    try {
      this.cur = make(size);
    } catch {
      // Address space refused (a ulimit -v, a 32-bit build): blocks, as without a capacity.
      this.cur = make(16);
    }
  }

  get length(): number {
    return this.fullLength + this.pos;
  }

  push(v: number): void {
    if (this.pos === this.cur.length) {
      if (this.cur.length < BLOCK) {
        const bigger = this.make(Math.min(BLOCK, this.cur.length * 4));
        bigger.set(this.cur);
        this.cur = bigger;
      } else {
        this.full.push(this.cur);
        this.fullLength += this.cur.length;
        this.cur = this.make(BLOCK);
        this.pos = 0;
      }
    }
    this.cur[this.pos++] = v;
  }

  /** The values as one array: a view when they fit in the first array, else an exact-size copy (the blocks let go as they are copied). */
  take(): A {
    if (this.full.length === 0) {
      const out = this.cur.subarray(0, this.pos) as A;
      this.cur = this.make(0);
      this.pos = 0;
      return out;
    }
    const out = this.make(this.length);
    let o = 0;
    for (let i = 0; i < this.full.length; i++) {
      (out as Float64Array).set(this.full[i], o);
      o += this.full[i].length;
      (this.full as (A | undefined)[])[i] = undefined;
    }
    (out as Float64Array).set(this.cur.subarray(0, this.pos), o);
    this.full = [];
    this.fullLength = 0;
    this.cur = this.make(0);
    this.pos = 0;
    return out;
  }
}

/**
 * Incremental builder: push the entries of one row, then `endRow()`; `build()` once at the end.
 * `capacity`: an upper bound on the entries (see BLOCK); a wrong one costs only a copy.
 */
export class CsrBuilder {
  private readonly indptr = new Appender((n) => new Int32Array(n));
  private readonly indices: Appender<Int32Array>;
  private readonly values: Appender<Float64Array>;
  private nnz = 0;
  private built = false;
  constructor(
    private cols = 0,
    capacity = 0,
  ) {
    this.indices = new Appender((n) => new Int32Array(n), capacity);
    this.values = new Appender((n) => new Float64Array(n), capacity);
    this.indptr.push(0);
  }

  push(col: number, value: number): void {
    if (value === 0) return;
    if (this.nnz === MAX_NNZ) throw new RangeError(`more than ${MAX_NNZ} stored entries`);
    this.indices.push(col);
    this.values.push(value);
    this.nnz++;
    if (col + 1 > this.cols) this.cols = col + 1;
  }

  endRow(): void {
    this.indptr.push(this.nnz);
  }

  /** The entries stored so far. */
  get entries(): number {
    return this.nnz;
  }

  /** The columns so far: the declared number, or one past the largest index pushed. */
  get columns(): number {
    return this.cols;
  }

  build(cols?: number): Csr {
    if (this.built) throw new Error('CsrBuilder.build() called twice');
    const c = cols ?? this.cols;
    if (c < this.cols) throw new RangeError(`matrix has a column ${this.cols - 1}, more than the ${c} declared`);
    const rows = this.indptr.length - 1;
    this.built = true;
    return { rows, cols: c, indptr: this.indptr.take(), indices: this.indices.take(), values: this.values.take() };
  }
}

/** out = A x */
export function csrMatVec(out: Float64Array, a: Csr, x: Float64Array): Float64Array {
  assertLength('x', x, a.cols);
  assertLength('out', out, a.rows);
  const { indptr, indices, values } = a;
  for (let i = 0; i < a.rows; i++) {
    let acc = 0;
    for (let k = indptr[i]; k < indptr[i + 1]; k++) acc += values[k] * x[indices[k]];
    out[i] = acc;
  }
  return out;
}

/** out = A^T w */
export function csrMatTVec(out: Float64Array, a: Csr, w: Float64Array): Float64Array {
  assertLength('w', w, a.rows);
  assertLength('out', out, a.cols);
  out.fill(0);
  const { indptr, indices, values } = a;
  for (let i = 0; i < a.rows; i++) {
    const wi = w[i];
    if (wi === 0) continue;
    for (let k = indptr[i]; k < indptr[i + 1]; k++) out[indices[k]] += values[k] * wi;
  }
  return out;
}

/** out = A^T A v in one pass over the rows (each row's dot product with v, then added back scaled). */
export function csrGramVec(out: Float64Array, a: Csr, v: Float64Array): Float64Array {
  assertLength('v', v, a.cols);
  assertLength('out', out, a.cols);
  out.fill(0);
  const { indptr, indices, values } = a;
  for (let i = 0; i < a.rows; i++) {
    const s = indptr[i];
    const e = indptr[i + 1];
    let acc = 0;
    for (let k = s; k < e; k++) acc += values[k] * v[indices[k]];
    if (acc === 0) continue;
    for (let k = s; k < e; k++) out[indices[k]] += values[k] * acc;
  }
  return out;
}

/** Compressed sparse columns: the same matrix stored by column, for fast A^T w. */
export interface Csc {
  readonly rows: number;
  readonly cols: number;
  readonly colptr: Int32Array;
  readonly rowIndices: Int32Array;
  readonly values: Float64Array;
}

export function csrToCsc(a: Csr): Csc {
  const colptr = new Int32Array(a.cols + 1);
  for (let k = 0; k < a.indices.length; k++) colptr[a.indices[k] + 1]++;
  for (let j = 0; j < a.cols; j++) colptr[j + 1] += colptr[j];
  const next = colptr.slice(0, a.cols);
  const rowIndices = new Int32Array(a.indices.length);
  const values = new Float64Array(a.indices.length);
  for (let i = 0; i < a.rows; i++) {
    for (let k = a.indptr[i]; k < a.indptr[i + 1]; k++) {
      const p = next[a.indices[k]]++;
      rowIndices[p] = i;
      values[p] = a.values[k];
    }
  }
  return { rows: a.rows, cols: a.cols, colptr, rowIndices, values };
}

/**
 * out = A^T w from the column form: one gather and a register sum per column, about
 * twice as fast as scattering from the row form.
 */
export function cscMatTVec(out: Float64Array, a: Csc, w: Float64Array): Float64Array {
  assertLength('w', w, a.rows);
  assertLength('out', out, a.cols);
  const { colptr, rowIndices, values } = a;
  for (let j = 0; j < a.cols; j++) {
    let acc = 0;
    for (let k = colptr[j]; k < colptr[j + 1]; k++) acc += values[k] * w[rowIndices[k]];
    out[j] = acc;
  }
  return out;
}

/** Rows of `a` in the order given (row i of the result is row `order[i]` of `a`). */
export function csrSelectRows(a: Csr, order: ArrayLike<number>): Csr {
  const nnz = csrSelectedEntries(a, order);
  const out = { rows: order.length, cols: a.cols, indptr: new Int32Array(order.length + 1), indices: new Int32Array(nnz), values: new Float64Array(nnz) };
  csrSelectRowsInto(out, a, order);
  return out;
}

/** The stored entries of the rows `order` of `a`; throws on a row out of range. */
export function csrSelectedEntries(a: Pick<Csr, 'rows' | 'indptr'>, order: ArrayLike<number>): number {
  let nnz = 0;
  for (let i = 0; i < order.length; i++) {
    const r = order[i];
    if (!(r >= 0 && r < a.rows)) throw new RangeError(`row ${r} out of range 0..${a.rows - 1}`);
    nnz += a.indptr[r + 1] - a.indptr[r];
  }
  return nnz;
}

/** csrSelectRows into arrays of the right lengths (order.length + 1, and csrSelectedEntries). */
export function csrSelectRowsInto(out: Csr, a: Csr, order: ArrayLike<number>): void {
  const { indptr, indices, values } = out;
  indptr[0] = 0;
  let k = 0;
  for (let i = 0; i < order.length; i++) {
    const r = order[i];
    const start = a.indptr[r];
    const end = a.indptr[r + 1];
    indices.set(a.indices.subarray(start, end), k);
    values.set(a.values.subarray(start, end), k);
    k += end - start;
    indptr[i + 1] = k;
  }
}

/** Columns [start, end) of `a`, renumbered from 0. */
export function csrSliceColumns(a: Csr, start: number, end: number): Csr {
  const b = new CsrBuilder(end - start);
  for (let i = 0; i < a.rows; i++) {
    for (let k = a.indptr[i]; k < a.indptr[i + 1]; k++) {
      const j = a.indices[k];
      if (j >= start && j < end) b.push(j - start, a.values[k]);
    }
    b.endRow();
  }
  return b.build(end - start);
}

/** Side-by-side concatenation [A | B | ...] of matrices with the same rows. */
export function csrHStack(blocks: readonly Csr[]): Csr {
  const rows = blocks[0].rows;
  const b = new CsrBuilder();
  let cols = 0;
  for (const m of blocks) {
    if (m.rows !== rows) throw new RangeError(`hstack: ${m.rows} rows, expected ${rows}`);
    cols += m.cols;
  }
  for (let i = 0; i < rows; i++) {
    let offset = 0;
    for (const m of blocks) {
      for (let k = m.indptr[i]; k < m.indptr[i + 1]; k++) b.push(offset + m.indices[k], m.values[k]);
      offset += m.cols;
    }
    b.endRow();
  }
  return b.build(cols);
}

/** The same matrix with a constant column of ones appended. */
export function csrAppendOnes(a: Csr): Csr {
  const ones = new CsrBuilder(1);
  for (let i = 0; i < a.rows; i++) {
    ones.push(0, 1);
    ones.endRow();
  }
  return csrHStack([a, ones.build(1)]);
}

/** Column means (length cols). */
export function csrColumnMeans(a: Csr): Float64Array {
  const m = new Float64Array(a.cols);
  for (let k = 0; k < a.indices.length; k++) m[a.indices[k]] += a.values[k];
  for (let j = 0; j < a.cols; j++) m[j] /= a.rows;
  return m;
}

/** Adds rows [from, to) of A to A^T A, packed (packedLength(cols)), in `g`. */
export function csrGramRows(a: Csr, g: Float64Array, from: number, to: number): void {
  assertLength('gram', g, packedLength(a.cols));
  const { indptr, indices, values } = a;
  for (let i = from; i < to; i++) {
    const s = indptr[i];
    const e = indptr[i + 1];
    for (let p = s; p < e; p++) {
      const jp = indices[p];
      const at = packedAt(jp);
      const vp = values[p];
      // Indices increase within a row: entries q <= p are the row's pairs in the lower triangle.
      for (let q = s; q <= p; q++) g[at + indices[q]] += vp * values[q];
    }
  }
}

/**
 * Rows [from, to) of A A^T's upper triangle, packed (packedLength(rows)) in `k` (row i against
 * rows j >= i: element (j, i) of the lower triangle). `dense` is scratch space (cols zeros,
 * left zero), for a caller that forms a range at a time.
 */
export function csrOuterGramRows(a: Csr, k: Float64Array, from: number, to: number, dense = new Float64Array(a.cols)): void {
  const n = a.rows;
  assertLength('gram', k, packedLength(n));
  assertLength('scratch', dense, a.cols);
  for (let i = from; i < to; i++) {
    for (let p = a.indptr[i]; p < a.indptr[i + 1]; p++) dense[a.indices[p]] = a.values[p];
    for (let j = i; j < n; j++) {
      let acc = 0;
      for (let p = a.indptr[j]; p < a.indptr[j + 1]; p++) acc += a.values[p] * dense[a.indices[p]];
      k[packedAt(j) + i] = acc;
    }
    for (let p = a.indptr[i]; p < a.indptr[i + 1]; p++) dense[a.indices[p]] = 0;
  }
}

export function csrFromDense(rows: readonly (readonly number[])[], cols?: number): Csr {
  const b = new CsrBuilder(cols ?? rows[0]?.length ?? 0);
  for (const r of rows) {
    r.forEach((v, j) => b.push(j, v));
    b.endRow();
  }
  return b.build(cols ?? rows[0]?.length ?? 0);
}
