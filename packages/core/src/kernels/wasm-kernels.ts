/**
 * Per-round products in WebAssembly (kernels/kernels.wat). On this code's blocks they run 2-4
 * times faster there than the same loops in TypeScript, whose speed V8 varies from one process
 * to the next. Each kernel does its twin's operations in the same order, so the results are the
 * same to the bit.
 *
 * The data is copied once into an instance's own memory and viewed there, so a holder keeps
 * one copy. That memory never grows afterwards (growing would detach the views). Data too
 * large for it (2 GiB, or memory refused) gets no instance: `from` returns undefined and the
 * caller uses the TypeScript loops. The memory is shared (a SharedArrayBuffer), so the
 * x-update's threads (DenseTeam) form a factor where the solves read it (WasmCholesky.zeros),
 * not copied there; a sparse block's (WasmCsr) is not, as only its own thread uses it and
 * vectors are decoded into it and encoded from it (instantiate).
 */
import { type Csr, assertLength, csrSelectRowsInto, csrSelectedEntries } from '../linalg/csr.js';
import { packedLength } from '../linalg/packed.js';
import { KERNELS_WASM, KERNELS_WASM_UNSHARED } from './wasm-kernels-bytes.js';

interface Kernels {
  matVec(rows: number, indptr: number, indices: number, values: number, x: number, out: number): void;
  matTVec(rows: number, cols: number, indptr: number, indices: number, values: number, w: number, out: number): void;
  matTVecDiff(rows: number, cols: number, indptr: number, indices: number, values: number, a: number, b: number, out: number): void;
  gramVec(rows: number, cols: number, indptr: number, indices: number, values: number, v: number, out: number): void;
  panelDots(cols: number, len: number, u: number, r: number, coef: number): void;
  panelAdd(cols: number, len: number, u: number, coef: number, z: number): void;
  forward(n: number, l: number, b: number): void;
  back(n: number, l: number, b: number): void;
}

/**
 * The kernels on vectors in a vectorMemory: Anderson acceleration's passes (kernels.wat, aa*;
 * their TypeScript twins are the coordinator's anderson-kernels.ts) and the coordinator step's
 * logistic loss and prox (twins in model/losses.ts). Element ranges [from, to), byte offsets of f64
 * and f32 vectors and of the doubles the sums go to.
 */
export interface VectorKernels {
  aaNorm(from: number, to: number, f: number, point: number, out: number): void;
  aaFirst(from: number, to: number, f: number, point: number, prevF: number, prevG: number, dF: number, dG: number, out: number): void;
  aaDots2(from: number, to: number, a: number, b: number, c: number, out: number): void;
  aaDot1(from: number, to: number, a: number, b: number, out: number): void;
  aaNextFirst(from: number, to: number, point: number, prevF: number, prevG: number, f: number, a: number, b: number, ga: number, gb: number): void;
  aaNextPair(from: number, to: number, point: number, c: number, d: number, gc: number, gd: number): void;
  /**
   * The coordinator step's logistic prox over samples [from, to) (logisticProxInto; its constants
   * are logisticProxParams': R, shift and errScale for the samples of class -1, Rp, shiftP and
   * errP for those of class +1, equal without class weights); returns its exponentials.
   */
  logisticProx(from: number, to: number, t: number, slope: number, curvature: number, y: number, a: number, R: number, shift: number, errScale: number, Rp: number, shiftP: number, errP: number): number;
  /** out[i] = the logistic loss at y[i] sum[i] less c y[i] sum[i], over [from, to) (log1pExpNeg, and the flip-corrected loss's value). */
  logisticLoss(from: number, to: number, y: number, sum: number, c: number, out: number): void;
  /** The coordinator step's passes for the exact form over samples [from, to) (twin: the coordinator's stepRange): pass 0 for the first party, then for each other party. */
  stepFirst(from: number, to: number, s: number, sum: number, gap: number, z: number, invM: number): void;
  stepAdd(from: number, to: number, s: number, sum: number): void;
  /** Pass 1, the prox points. */
  stepPoints(from: number, to: number, sum: number, dual: number, z: number, a: number, t: number, slope: number, curvature: number, M: number, alpha: number, beta: number, invM: number): void;
  /** Pass 2: z, u, c, offset, gap, F(v)'s zbar and u (pack 1); the sums to out[0] and out[4]. */
  stepUpdate(from: number, to: number, sum: number, t: number, a: number, z: number, dual: number, c: number, offset: number, gap: number, pz: number, pu: number, pack: number, invM: number, out: number): void;
  /** Pass 3 for one party: its sums added to out[1..3], old = s, F(v)'s w_m (pack 1). */
  stepParty(from: number, to: number, s: number, old: number, gap: number, offset: number, c: number, w: number, pack: number, out: number): void;
}

/** Byte offsets are i32 in the kernels. */
const MAX_BYTES = 2 ** 31 - 1;
const PAGE = 65536;

/** The module compiled once, for shared memory and for memory that is not. */
const compiled: { shared?: WebAssembly.Module; unshared?: WebAssembly.Module } = {};

/**
 * A new instance with `bytes` of zeroed memory, or undefined when that is too much. Shared
 * unless `shared` is false: only one thread then uses it, and bytes are copied in and out of
 * it at any alignment at full speed. V8 copies between a SharedArrayBuffer and bytes of another
 * alignment one byte at a time (2.3 ms for 8 MB against 0.33 ms), and a vector's values start
 * wherever its message puts them.
 */
function instantiate(bytes: number, shared = true): { kernels: Kernels & VectorKernels; buffer: ArrayBufferLike; memory: WebAssembly.Memory } | undefined {
  // Node run with --jitless has no WebAssembly.
  if (bytes > MAX_BYTES || typeof WebAssembly === 'undefined') return undefined;
  let memory: WebAssembly.Memory;
  try {
    const pages = Math.max(1, Math.ceil(bytes / PAGE));
    memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared });
  } catch (err) {
    // Memory refused (address space, a ulimit): the TypeScript loops do the same.
    if (err instanceof RangeError) return undefined;
    throw err;
  }
  return { kernels: kernelsOn(memory, shared), buffer: memory.buffer, memory };
}

function kernelsOn(memory: WebAssembly.Memory, shared = true): Kernels & VectorKernels {
  const module = shared ? (compiled.shared ??= new WebAssembly.Module(Buffer.from(KERNELS_WASM, 'base64'))) : (compiled.unshared ??= new WebAssembly.Module(Buffer.from(KERNELS_WASM_UNSHARED, 'base64')));
  return new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as Kernels & VectorKernels;
}

/** A shared WebAssembly memory (a WebAssembly.Memory, which a worker thread can be given). */
export interface VectorMemory {
  readonly buffer: SharedArrayBuffer;
}

/**
 * `bytes` of zeroed shared memory for the caller's vectors (Float64Array and Float32Array views
 * of `memory.buffer`, laid out by the caller, 16-byte aligned for the two-element loads) and
 * the kernels on it; undefined without WebAssembly, above 2 GiB, or when the memory is
 * refused. Another thread gets its own kernels on the same memory with vectorKernels.
 */
export function vectorMemory(bytes: number): { memory: VectorMemory; kernels: VectorKernels } | undefined {
  const inst = instantiate(bytes);
  return inst && { memory: inst.memory as VectorMemory, kernels: inst.kernels };
}

/** The kernels on a memory that vectorMemory made (in another thread). */
export function vectorKernels(memory: VectorMemory): VectorKernels {
  return kernelsOn(memory as WebAssembly.Memory);
}

/** Byte offsets of consecutive arrays of the given byte lengths, each `align`-byte aligned, and the total. */
function layoutAligned(align: number, lengths: readonly number[]): { at: number[]; bytes: number } {
  const at: number[] = [];
  let end = 0;
  for (const len of lengths) {
    at.push(end);
    end = Math.ceil((end + len) / align) * align;
  }
  return { at, bytes: end };
}

/** layoutAligned for the kernels' doubles: 8-byte aligned. */
function layout(...lengths: number[]): { at: number[]; bytes: number } {
  return layoutAligned(8, lengths);
}

/** Byte offsets of a vectorMemory's consecutive arrays of the given byte lengths, each 16-byte aligned (the two-element loads), and the total. */
export function vectorLayout(lengths: readonly number[]): { at: number[]; bytes: number } {
  return layoutAligned(16, lengths);
}

/** A CSR matrix (D x, D^T w and D^T D v as csrMatVec, csrMatTVec and csrGramVec). */
export class WasmCsr {
  /** The matrix, its arrays viewing the instance's memory (read-only by contract). */
  readonly csr: Csr;
  private readonly kernels: Kernels;
  /**
   * Byte offsets: indptr, indices, values, then a long vector (max(rows, cols) doubles) and a
   * short one (cols doubles). A product reads one and writes the other: D x from the short to
   * the long, D^T w and D^T D v from the long to the short. One vector of N doubles, not two:
   * 8 MB less for a million rows.
   */
  private readonly at: number[];
  private readonly long: Float64Array;
  private readonly short: Float64Array;
  /**
   * Two vectors of `rows` doubles for the instance's holder (the x-update: the round's vector
   * it is sent, and its share D x), in this memory, so that matVec writes one in place and
   * matTVecDiff reads both where they are. At a million rows the copies into and out of the
   * long vector, and the difference formed before D^T w, were three passes over 8 MB vectors
   * a round, a fifth of the x-update.
   */
  readonly rowVectors: readonly [Float64Array, Float64Array];

  private constructor(rows: number, cols: number, nnz: number, kernels: Kernels, buffer: ArrayBufferLike, at: number[]) {
    this.kernels = kernels;
    this.at = at;
    this.csr = { rows, cols, indptr: new Int32Array(buffer, at[0], rows + 1), indices: new Int32Array(buffer, at[1], nnz), values: new Float64Array(buffer, at[2], nnz) };
    this.long = new Float64Array(buffer, at[3], Math.max(rows, cols));
    this.short = new Float64Array(buffer, at[4], cols);
    this.rowVectors = [new Float64Array(buffer, at[5], rows), new Float64Array(buffer, at[6], rows)];
  }

  /** Whether v is one of rowVectors (a product reads or writes it in place). */
  private isRowVector(v: Float64Array): boolean {
    return v === this.rowVectors[0] || v === this.rowVectors[1];
  }

  /**
   * An instance for a rows x cols matrix of nnz entries, its arrays zero for the caller to fill
   * (a row selection: fromRows, SpilledCsr.selectInto), or undefined when it does not fit.
   */
  static empty(rows: number, cols: number, nnz: number): WasmCsr | undefined {
    const { at, bytes } = layout(4 * (rows + 1), 4 * nnz, 8 * nnz, 8 * Math.max(rows, cols), 8 * cols, 8 * rows, 8 * rows);
    // Not shared: the row vectors are decoded into and encoded from at any alignment (instantiate).
    const inst = instantiate(bytes, false);
    return inst && new WasmCsr(rows, cols, nnz, inst.kernels, inst.buffer, at);
  }

  /** `a` copied into WebAssembly memory; undefined when it does not fit there. */
  static from(a: Csr): WasmCsr | undefined {
    const first = a.indptr[0];
    const nnz = a.indptr[a.rows] - first;
    const w = WasmCsr.empty(a.rows, a.cols, nnz);
    if (w) {
      const { indptr, indices, values } = w.csr;
      for (let i = 0; i <= a.rows; i++) indptr[i] = a.indptr[i] - first;
      indices.set(a.indices.subarray(first, first + nnz));
      values.set(a.values.subarray(first, first + nnz));
    }
    return w;
  }

  /**
   * The rows `order` of `a` (csrSelectRows) selected straight into WebAssembly memory, with no
   * intermediate copy; undefined when they do not fit there. Throws on a row out of range.
   */
  static fromRows(a: Csr, order: ArrayLike<number>): WasmCsr | undefined {
    const w = WasmCsr.empty(order.length, a.cols, csrSelectedEntries(a, order));
    if (w) csrSelectRowsInto(w.csr, a, order);
    return w;
  }

  /** out = A x (csrMatVec): written in place when out is one of rowVectors. */
  matVec(out: Float64Array, x: Float64Array): Float64Array {
    const { rows, cols } = this.csr;
    assertLength('x', x, cols);
    assertLength('out', out, rows);
    this.short.set(x);
    const [indptr, indices, values, long, short] = this.at;
    if (this.isRowVector(out)) {
      this.kernels.matVec(rows, indptr, indices, values, short, out.byteOffset);
      return out;
    }
    this.kernels.matVec(rows, indptr, indices, values, short, long);
    out.set(this.long.subarray(0, rows));
    return out;
  }

  /** out = A^T w (csrMatTVec). */
  matTVec(out: Float64Array, w: Float64Array): Float64Array {
    const { rows, cols } = this.csr;
    assertLength('w', w, rows);
    assertLength('out', out, cols);
    this.long.set(w);
    const [indptr, indices, values, long, short] = this.at;
    this.kernels.matTVec(rows, cols, indptr, indices, values, long, short);
    out.set(this.short);
    return out;
  }

  /** out = A^T (a - b) (csrMatTVec of a - b, to the same bits), a and b being rowVectors. */
  matTVecDiff(out: Float64Array, a: Float64Array, b: Float64Array): Float64Array {
    const { rows, cols } = this.csr;
    assertLength('out', out, cols);
    if (!this.isRowVector(a) || !this.isRowVector(b)) throw new RangeError('matTVecDiff: a and b must be the instance\'s rowVectors');
    const [indptr, indices, values, , short] = this.at;
    this.kernels.matTVecDiff(rows, cols, indptr, indices, values, a.byteOffset, b.byteOffset, short);
    out.set(this.short);
    return out;
  }

  /** out = A^T A v (csrGramVec). */
  gramVec(out: Float64Array, v: Float64Array): Float64Array {
    const { rows, cols } = this.csr;
    assertLength('v', v, cols);
    assertLength('out', out, cols);
    this.long.set(v);
    const [indptr, indices, values, long, short] = this.at;
    this.kernels.gramVec(rows, cols, indptr, indices, values, long, short);
    out.set(this.short);
    return out;
  }
}

/**
 * A panel of `cols` single-precision columns of length `len`, column-major (U), with
 * coef = U^T r (panelDots) and z += U coef (panelAdd), widening each entry to a double.
 */
export class WasmPanel {
  /** The panel, viewing the instance's memory (read-only by contract). */
  readonly data: Float32Array;
  private readonly kernels: Kernels;
  /** Byte offsets: the panel, a vector of len doubles, coef (cols doubles). */
  private readonly at: number[];
  private readonly vec: Float64Array;
  private readonly coefBuf: Float64Array;

  private constructor(
    u: Float32Array,
    readonly cols: number,
    readonly len: number,
    kernels: Kernels,
    buffer: ArrayBufferLike,
    at: number[],
  ) {
    this.kernels = kernels;
    this.at = at;
    this.data = new Float32Array(buffer, at[0], cols * len);
    this.data.set(u);
    this.vec = new Float64Array(buffer, at[1], len);
    this.coefBuf = new Float64Array(buffer, at[2], cols);
  }

  /** `u` (cols x len, column-major) copied into WebAssembly memory; undefined when it does not fit there. */
  static from(u: Float32Array, cols: number, len: number): WasmPanel | undefined {
    assertLength('panel', u, cols * len);
    const { at, bytes } = layout(4 * cols * len, 8 * len, 8 * cols);
    const inst = instantiate(bytes);
    return inst && new WasmPanel(u, cols, len, inst.kernels, inst.buffer, at);
  }

  /** coef[c] = sum_j U[c len + j] r[j]. */
  dots(coef: Float64Array, r: Float64Array): Float64Array {
    assertLength('r', r, this.len);
    assertLength('coef', coef, this.cols);
    this.vec.set(r);
    this.kernels.panelDots(this.cols, this.len, this.at[0], this.at[1], this.at[2]);
    coef.set(this.coefBuf);
    return coef;
  }

  /** z[j] += sum_c coef[c] U[c len + j], column after column. */
  add(z: Float64Array, coef: Float64Array): Float64Array {
    assertLength('z', z, this.len);
    assertLength('coef', coef, this.cols);
    this.vec.set(z);
    this.coefBuf.set(coef);
    this.kernels.panelAdd(this.cols, this.len, this.at[0], this.at[2], this.at[1]);
    z.set(this.vec);
    return z;
  }
}

/** A Cholesky factor L (its lower triangle packed: packedLength(n)), solving L L^T x = b (choleskySolveInPlace). */
export class WasmCholesky {
  /** The factor, viewing the instance's memory (read-only by contract). */
  readonly data: Float64Array;
  private readonly kernels: Kernels;
  /** Byte offsets: the factor, then a vector of n doubles. */
  private readonly at: number[];
  private readonly vec: Float64Array;

  private constructor(
    readonly n: number,
    kernels: Kernels,
    buffer: ArrayBufferLike,
    at: number[],
  ) {
    this.kernels = kernels;
    this.at = at;
    this.data = new Float64Array(buffer, at[0], packedLength(n));
    this.vec = new Float64Array(buffer, at[1], n);
  }

  /**
   * An n x n factor of zeros (packed) in WebAssembly memory, to be formed in place through
   * `data`; undefined when it does not fit there.
   */
  static zeros(n: number): WasmCholesky | undefined {
    const { at, bytes } = layout(8 * packedLength(n), 8 * n);
    const inst = instantiate(bytes);
    return inst && new WasmCholesky(n, inst.kernels, inst.buffer, at);
  }

  /** b = (L L^T)^-1 b: forwardSubstitute, then backSubstitute. */
  solveInPlace(b: Float64Array): Float64Array {
    assertLength('b', b, this.n);
    this.vec.set(b);
    this.kernels.forward(this.n, this.at[0], this.at[1]);
    this.kernels.back(this.n, this.at[0], this.at[1]);
    b.set(this.vec);
    return b;
  }
}
