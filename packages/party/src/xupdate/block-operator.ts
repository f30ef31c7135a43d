// The party's block D (N x d) as the x-update multiplies it: D v, D^T w and the centred Gram
// product, on a dense (row-major) or sparse (CSR, in the kernels' WebAssembly memory where it
// fits) block, on this thread or with threads beside it for a large dense block.
import { availableParallelism } from 'node:os';
import {
  type Csr,
  type Dense,
  DenseTeam,
  WasmCsr,
  csrColumnMeans,
  csrGramVec,
  csrMatTVec,
  csrMatVec,
  csrToDense,
  denseColumnMeans,
  denseMatTVec,
  denseMatVec,
  dot,
  isDense,
  preferDense,
} from '@admm-share/core';

/** A party's block: dense (row-major) or CSR. */
export type BlockSource = { dense: Dense; csr?: undefined } | { csr: Csr; dense?: undefined };

export const blockRows = (src: BlockSource): number => (src.dense ? src.dense.rows : src.csr.rows);
export const blockCols = (src: BlockSource): number => (src.dense ? src.dense.cols : src.csr.cols);

/**
 * The block and its products. A block with at least half its entries non-zero is kept dense
 * (row-major) and multiplied as such; a sparse one as CSR only (D^T w scatters over its rows).
 * With an intercept, `mu` holds the column means: the x-update works on the centred matrix
 * D~ = D - 1 mu^T, applied implicitly.
 */
export class BlockOperator {
  readonly n: number;
  readonly d: number;
  /** Whether the block is kept dense (row-major) rather than as CSR. */
  readonly dense: boolean;
  /** Column means (with an intercept), else undefined. */
  readonly mu: Float64Array | undefined;
  /** A sparse block, by rows: D x gathers and D^T w scatters over the same arrays (no column copy). */
  readonly Dr: Csr | undefined;
  /** The sparse block's products in WebAssembly (Dr views its memory); undefined if it did not fit there. */
  readonly Dw: WasmCsr | undefined;
  /** A dense block, row-major. */
  readonly Dd: Dense | undefined;
  /** Threads beside this one for the dense block's products and Gram matrix (threadsFor), if any. */
  private threadTeam: DenseTeam | undefined;
  private wcg: Float64Array | undefined;

  constructor(
    /** The block: sparse (a WasmCsr is used as it is, other sparse blocks are copied into one), or dense. */
    block: Csr | Dense | WasmCsr,
    withIntercept: boolean,
  ) {
    const D = block instanceof WasmCsr ? block.csr : block;
    this.n = D.rows;
    this.d = D.cols;
    // A CSR block with at least half its entries non-zero is kept dense too.
    this.dense = isDense(D) || preferDense(D);
    if (isDense(D)) this.Dd = D;
    else if (this.dense) this.Dd = csrToDense(D);
    else {
      this.Dw = block instanceof WasmCsr ? block : WasmCsr.from(D);
      this.Dr = this.Dw?.csr ?? D;
    }
    this.mu = withIntercept ? (this.Dd ? denseColumnMeans(this.Dd) : csrColumnMeans(this.Dr!)) : undefined;
  }

  /** Start threads beside this one for a dense block (threadsFor); call close() when done. */
  startThreads(setting: number | 'auto'): void {
    const threads = this.Dd ? threadsFor(setting, this.Dd) : 0;
    this.threadTeam = threads > 0 ? DenseTeam.start(this.Dd!, threads) : undefined;
  }

  /** The dense block's threads, if any. */
  get pool(): DenseTeam | undefined {
    return this.threadTeam;
  }

  /** Threads used beside this one (0: none). */
  get threads(): number {
    return this.threadTeam?.threads ?? 0;
  }

  /** Stops the threads, if any. */
  async close(): Promise<void> {
    await this.threadTeam?.close();
  }

  /** out = D v (length N). */
  mulD(out: Float64Array, v: Float64Array): Float64Array {
    if (this.threadTeam) return this.threadTeam.matVec(out, v);
    return this.Dd ? denseMatVec(out, this.Dd, v) : this.Dw ? this.Dw.matVec(out, v) : csrMatVec(out, this.Dr!, v);
  }

  /** out = D^T w (length d). */
  mulDT(out: Float64Array, w: Float64Array): Float64Array {
    if (this.threadTeam) return this.threadTeam.matTVec(out, w);
    return this.Dd ? denseMatTVec(out, this.Dd, w) : this.Dw ? this.Dw.matTVec(out, w) : csrMatTVec(out, this.Dr!, w);
  }

  /** The block as the factorisation reads it: its dense array, or its CSR arrays. */
  source(): BlockSource {
    return this.Dd ? { dense: this.Dd } : { csr: this.Dr! };
  }

  /** Squared norms of the centred columns. */
  columnSquares(): Float64Array {
    const { n, d, mu } = this;
    const sq = new Float64Array(d);
    if (this.Dd) {
      const data = this.Dd.data;
      for (let i = 0; i < n; i++) for (let j = 0, r = i * d; j < d; j++) sq[j] += data[r + j] * data[r + j];
    } else {
      const { indices, values } = this.Dr!;
      for (let p = 0; p < values.length; p++) sq[indices[p]] += values[p] ** 2;
    }
    if (mu) for (let j = 0; j < d; j++) sq[j] -= n * mu[j] * mu[j];
    return sq;
  }

  /** res = D~^T D~ v (length d), D~ v = D v - (mu^T v) 1 applied implicitly. */
  gramTimes(res: Float64Array, v: Float64Array): void {
    const { n, d, mu } = this;
    if (this.Dr) {
      // D~^T D~ v = D^T D v - N (mu^T v) mu, one pass over the rows.
      if (this.Dw) this.Dw.gramVec(res, v);
      else csrGramVec(res, this.Dr, v);
      if (mu) {
        const centre = n * dot(mu, v);
        for (let j = 0; j < d; j++) res[j] -= centre * mu[j];
      }
    } else {
      const scratchN = this.wcg ?? (this.wcg = new Float64Array(n));
      this.mulD(scratchN, v);
      if (mu) {
        const centre = dot(mu, v);
        for (let i = 0; i < n; i++) scratchN[i] -= centre;
      }
      this.mulDT(res, scratchN); // 1^T D~ v = 0, so no mu correction here
    }
  }
}

/**
 * Entries of a dense block from which `threads: 'auto'` uses threads: 2^23 (64 MiB), where one
 * product takes some 14 ms on one thread. Each thread costs about 10 MB (its own V8 heap): on
 * the gisette-shaped set, one thread took the 1000-feature party (46 MB, under this limit)
 * over 3x its block (docs/scaling.md, "Threads for a large dense block").
 */
export const THREADS_MIN_ENTRIES = 2 ** 23;
/**
 * Most threads beside the party's own that 'auto' takes. The products stream the block through
 * memory, whose bandwidth the cores share; 2 threads in all measured 1.9-2x one on 2 cores
 * (`npm run bench:threads`); more was not measured here.
 */
export const MAX_AUTO_THREADS = 3;

/**
 * Threads beside the party's own for a dense block: a number as given, or 'auto': none for a
 * block under THREADS_MIN_ENTRIES or outside shared memory, else one less than the cores this
 * process may use (at most MAX_AUTO_THREADS). Parties that share a machine (admm-share
 * simulate) should say how many.
 */
export function threadsFor(setting: number | 'auto', block: Dense): number {
  if (setting !== 'auto') {
    if (!(Number.isInteger(setting) && setting >= 0)) throw new RangeError(`threads must be a whole number or 'auto', got ${setting}`);
    return setting;
  }
  // Threads read the block where it is: only a block in shared memory (as the party's readers make it) can have them.
  if (!(block.data.buffer instanceof SharedArrayBuffer) || block.rows * block.cols < THREADS_MIN_ENTRIES) return 0;
  return Math.max(0, Math.min(availableParallelism() - 1, MAX_AUTO_THREADS));
}
