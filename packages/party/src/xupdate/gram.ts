// The centred Gram matrix of a party's block, D~^T D~ (d x d) or D~ D~^T (N x N), formed
// packed and in pieces, so that a caller may give its event loop a turn between them: what
// both factorisations (eigen.ts, cholesky.ts) start from.
import {
  type DenseTeam,
  csrGramRows,
  csrOuterGramRows,
  denseGramRows,
  denseOuterGramRows,
  gramPanel,
  packedLength,
  unpackSymmetric,
  PANEL_ROWS,
} from '@admm-share/core';
import { type BlockSource, blockCols, blockRows } from './block-operator.js';

/** The side's Gram matrix of the centred block: D~^T D~ (d x d) or D~ D~^T (N x N), square and row-major. */
export function centredGram(src: BlockSource, side: 'primal' | 'dual', mu: Float64Array | undefined): Float64Array {
  const k = side === 'primal' ? blockCols(src) : blockRows(src);
  const gram = new Float64Array(packedLength(k));
  for (const _ of centredGramPieces(src, side, mu, gram, Infinity));
  return unpackSymmetric(gram, k);
}

/**
 * run(from, to) over [0, count) in ranges of about `work` multiply-adds (cost(i) those of item
 * i), each range's end a multiple of `align` (or count), yielding after each.
 */
export function* inPieces(count: number, work: number, cost: (i: number) => number, run: (from: number, to: number) => void, align = 1): Generator<void, void, void> {
  for (let from = 0; from < count; ) {
    let to = from;
    for (let w = 0; to < count && w < work; to++) w += cost(to);
    to = Math.min(count, Math.ceil(to / align) * align);
    run(from, to);
    from = to;
    yield;
  }
}

/**
 * The centred Gram matrix in pieces of about `work` multiply-adds (inPieces), formed packed in
 * `gram` (zeros). With `pool` (a dense block's threads; `gram` in shared memory) the threads
 * form their parts meanwhile, and the last yield is a promise of their end.
 */
export function* centredGramPieces(src: BlockSource, side: 'primal' | 'dual', mu: Float64Array | undefined, gram: Float64Array, work: number, pool?: DenseTeam): Generator<Promise<void> | void, void, void> {
  const n = blockRows(src);
  const d = blockCols(src);
  const { dense, csr } = src;
  const nnz = (i: number): number => (csr ? csr.indptr[i + 1] - csr.indptr[i] : d);
  if (pool && dense) yield* pool.gram(gram, side, work);
  else if (side === 'primal') {
    if (dense) {
      const panel = gramPanel(d);
      yield* inPieces(n, work, () => (d * d) / 2, (from, to) => denseGramRows(dense, gram, from, to, panel), PANEL_ROWS);
    } else yield* inPieces(n, work, (i) => nnz(i) ** 2 / 2, (from, to) => csrGramRows(csr!, gram, from, to));
  } else if (dense) {
    // Row i of D D^T is its dot products with rows i..n-1.
    yield* inPieces(n, work, (i) => (n - i) * d, (from, to) => denseOuterGramRows(dense, gram, from, to), 2);
  } else {
    const scratch = new Float64Array(d);
    yield* inPieces(n, work, (i) => (n - i) * nnz(i), (from, to) => csrOuterGramRows(csr!, gram, from, to, scratch));
  }
  if (!mu) return;
  // (D - 1 mu^T)^T (D - 1 mu^T) = D^T D - N mu mu^T; C D D^T C with C = I - 1 1^T / N.
  if (side === 'primal') for (let i = 0, r = 0; i < d; r += ++i) for (let j = 0; j <= i; j++) gram[r + j] -= n * mu[i] * mu[j];
  else centreSymmetric(gram, n);
}

/** K <- C K C with C = I - 1 1^T / n (double centring), in place, K symmetric and packed. */
function centreSymmetric(k: Float64Array, n: number): void {
  const rowMean = new Float64Array(n);
  for (let i = 0, r = 0; i < n; r += ++i) {
    for (let j = 0; j < i; j++) {
      rowMean[i] += k[r + j];
      rowMean[j] += k[r + j];
    }
    rowMean[i] += k[r + i];
  }
  let all = 0;
  for (let i = 0; i < n; i++) all += rowMean[i];
  all /= n * n;
  for (let i = 0; i < n; i++) rowMean[i] /= n;
  for (let i = 0, r = 0; i < n; r += ++i) for (let j = 0; j <= i; j++) k[r + j] += all - rowMean[i] - rowMean[j];
}
