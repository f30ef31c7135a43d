// A dense block's products and Gram matrix over more than one thread: worker threads that read
// the block in shared memory (no copy) and wait on an atomic flag between calls, so that a
// product costs no message and the calling thread stays synchronous (it blocks for the
// milliseconds the others take). The calling thread does a part itself.
import { assertLength } from '../linalg/csr.js';
import { type Dense, PANEL_ROWS, sharedFloat64, choleskyRows, denseGramRows, denseMatTVecRows, denseMatVecRows, denseOuterGramRows, gramPanel } from '../linalg/dense.js';
import { packedLength } from '../linalg/packed.js';
import { ThreadTeam } from './thread-team.js';

/** What the threads are told to do (ctrl[OP]). */
export const Op = {
  MatVec: 1,
  MatTVec: 2,
  /** The packed A^T A, a range of its columns each (a message before the op holds the matrix and the range). */
  Gram: 3,
  /** The packed A A^T, a range of its rows each. */
  OuterGram: 4,
  /** A block of rows of a packed Cholesky factor, their columns before the block: a range of the rows each. */
  CholeskyLeft: 6,
} as const;
type Op = (typeof Op)[keyof typeof Op];

/** What each worker thread gets at its start. */
export interface DenseThreadData {
  a: Dense;
  /** Its rows for the products: [from, to). */
  from: number;
  to: number;
  /** The products' input vectors (cols and rows long), their output (rows long) and this thread's part of A^T w (cols long). */
  x: Float64Array;
  w: Float64Array;
  out: Float64Array;
  partial: Float64Array;
}

/**
 * An op's message to one thread: the packed matrix (shared), its range of columns (Gram) or
 * rows (OuterGram, CholeskyLeft); for CholeskyLeft the matrix's order and the columns to form, [0, upTo).
 */
export interface PackedPart {
  g: Float64Array;
  from: number;
  to: number;
  n?: number;
  upTo?: number;
}

/**
 * [from, to) of `count` items cut into `parts` ranges of about equal cost (cost(i) that of
 * item i), each boundary a multiple of `align` (or count).
 */
export function balancedRanges(count: number, parts: number, cost: (i: number) => number, align = 1): [number, number][] {
  let total = 0;
  for (let i = 0; i < count; i++) total += cost(i);
  const ranges: [number, number][] = [];
  let from = 0;
  let acc = 0;
  let i = 0;
  for (let p = 1; p <= parts; p++) {
    const goal = (total * p) / parts;
    while (i < count && acc + cost(i) / 2 < goal) acc += cost(i++);
    const to = p === parts ? count : Math.min(count, Math.ceil(i / align) * align);
    ranges.push([from, Math.max(from, to)]);
    from = Math.max(from, to);
  }
  return ranges;
}

/**
 * Worker threads for one dense block (its data in a SharedArrayBuffer): `threads` of them and
 * the calling thread each take a part of every call. Start with DenseTeam.start; close when
 * the block is no longer used (the threads are unref'd, so they never keep a process alive).
 */
export class DenseTeam {
  private readonly x: Float64Array;
  private readonly w: Float64Array;
  private readonly out: Float64Array;
  /** Thread t's part of A^T w at t * cols. */
  private readonly partials: Float64Array;
  private readonly team: ThreadTeam;
  /** The calling thread's rows for the products. */
  private readonly mine: [number, number];

  private constructor(
    private readonly a: Dense,
    readonly threads: number,
  ) {
    if (!(a.data.buffer instanceof SharedArrayBuffer)) throw new RangeError('DenseTeam: the block is not in shared memory (sharedFloat64)');
    if (!(Number.isInteger(threads) && threads >= 1)) throw new RangeError(`DenseTeam: threads must be an integer >= 1, got ${threads}`);
    const { rows, cols } = a;
    this.x = sharedFloat64(cols);
    this.w = sharedFloat64(rows);
    this.out = sharedFloat64(rows);
    this.partials = sharedFloat64(threads * cols);
    const ranges = balancedRanges(rows, threads + 1, () => 1);
    this.mine = ranges[threads];
    this.team = new ThreadTeam({
      script: new URL('./dense-thread.js', import.meta.url),
      data: (t): DenseThreadData => ({ a, from: ranges[t][0], to: ranges[t][1], x: this.x, w: this.w, out: this.out, partial: this.partials.subarray(t * cols, (t + 1) * cols) }),
      threads,
      name: 'a product thread',
      fail: (failure) => new Error(`DenseTeam: ${failure}`),
    });
  }

  /** Threads for the dense block `a` (in shared memory: sharedFloat64). */
  static start(a: Dense, threads: number): DenseTeam {
    return new DenseTeam(a, threads);
  }

  /** out = A x, the rows split between the threads. */
  matVec(out: Float64Array, x: Float64Array): Float64Array {
    assertLength('out', out, this.a.rows);
    assertLength('x', x, this.a.cols);
    this.x.set(x);
    this.team.begin(Op.MatVec);
    const [from, to] = this.mine;
    denseMatVecRows(out, this.a, x, from, to);
    this.team.waitSync();
    out.set(this.out.subarray(0, from));
    return out;
  }

  /** out = A^T w: each thread sums its rows, then the parts are added. */
  matTVec(out: Float64Array, w: Float64Array): Float64Array {
    const { rows, cols } = this.a;
    assertLength('out', out, cols);
    assertLength('w', w, rows);
    this.w.set(w);
    this.team.begin(Op.MatTVec);
    denseMatTVecRows(out, this.a, w, this.mine[0], this.mine[1]);
    this.team.waitSync();
    const p = this.partials;
    for (let t = 0; t < this.threads; t++) for (let j = 0, o = t * cols; j < cols; j++) out[j] += p[o + j];
    return out;
  }

  /**
   * Adds A^T A (side primal: cols x cols) or A A^T (dual: rows x rows), packed, to `g` (in
   * shared memory): the threads each take a range of the triangle's columns (primal) or rows
   * (dual) of about equal work, the calling thread the last one, in pieces of about `work`
   * multiply-adds with a yield after each. The generator's last yield is the threads' part,
   * a promise: the caller awaits it before using `g`.
   */
  *gram(g: Float64Array, side: 'primal' | 'dual', work: number): Generator<Promise<void> | void, void, void> {
    const { rows: n, cols: d } = this.a;
    if (!(g.buffer instanceof SharedArrayBuffer)) throw new RangeError('DenseTeam.gram: the matrix is not in shared memory');
    assertLength('gram', g, packedLength(side === 'primal' ? d : n));
    const parts =
      side === 'primal'
        ? balancedRanges(d, this.threads + 1, (j) => d - j, 4) // column j's block pairs with the columns after it
        : balancedRanges(n, this.threads + 1, (i) => n - i, 2); // row i, with the rows after it
    this.team.begin(side === 'primal' ? Op.Gram : Op.OuterGram, (t) => ({ g, from: parts[t][0], to: parts[t][1] }));
    const [from, to] = parts[this.threads];
    if (side === 'primal') {
      const panel = gramPanel(d);
      // Rows in pieces, each panel's part of the triangle for the columns [from, to).
      const perRow = Math.max(1, ((to - from) * (d - (from + to) / 2)) | 0);
      const rowsPerPiece = Math.max(PANEL_ROWS, Math.floor(work / perRow / PANEL_ROWS) * PANEL_ROWS);
      for (let r = 0; r < n; r += rowsPerPiece) {
        denseGramRows(this.a, g, r, Math.min(n, r + rowsPerPiece), panel, from, to);
        yield;
      }
    } else {
      for (let i = from; i < to; ) {
        let end = i;
        for (let w = 0; end < to && w < work; end += 2) w += 2 * (n - end) * d;
        end = Math.min(end, to);
        denseOuterGramRows(this.a, g, i, end);
        i = end;
        yield;
      }
    }
    yield this.team.waitAsync();
  }

  /**
   * The Cholesky factor of the packed n x n matrix `a` (in shared memory) in place, as
   * choleskyInPlace, by blocks of rows: the threads and this one form the block's columns
   * before it (each a range of its rows: they need only the rows before the block), then this
   * thread the block's own triangle. A yield after each block, whose work is about `work`
   * multiply-adds on each thread. Returns false at a pivot that is not positive.
   */
  *cholesky(a: Float64Array, n: number, work: number): Generator<void, boolean, void> {
    if (!(a.buffer instanceof SharedArrayBuffer)) throw new RangeError('DenseTeam.cholesky: the matrix is not in shared memory');
    assertLength('factor', a, packedLength(n));
    for (let b0 = 0; b0 < n; ) {
      // About `work` on each thread: a row's columns before the block cost b0^2 / 2 multiply-adds
      // (the first block, all on this thread, is at most 128 rows).
      const rows = Math.max(8, Math.min(128, Math.floor(((this.threads + 1) * work) / ((b0 + 8) ** 2 / 2))));
      const b1 = Math.min(n, b0 + rows);
      if (b0 > 0) {
        const parts = balancedRanges(b1 - b0, this.threads + 1, () => 1);
        this.team.begin(Op.CholeskyLeft, (t) => ({ g: a, n, from: b0 + parts[t][0], to: b0 + parts[t][1], upTo: b0 }));
        choleskyRows(a, n, b0 + parts[this.threads][0], b0 + parts[this.threads][1], 0, b0);
        this.team.waitSync();
      }
      if (!choleskyRows(a, n, b0, b1, b0)) return false;
      b0 = b1;
      yield;
    }
    return true;
  }

  /** Stop the threads (a call under way is not interrupted: call from the same thread as the calls). */
  close(): Promise<void> {
    return this.team.close();
  }
}
