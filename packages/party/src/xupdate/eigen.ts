// The eigen form of the x-update: an eigendecomposition of the centred Gram matrix, which
// solves the system for any rho with two dense products (the privacy ball's multiplier and the
// one-shot fits' penalty path need that).
import { symmetricEigen } from '@admm-share/core';
import type { BlockSource } from './block-operator.js';
import { centredGram } from './gram.js';

/**
 * Largest min(d, N) factored by an eigendecomposition: it costs min(d, N)^3 (about 3 s at 600
 * and 13 s at 1000 on a 2-core machine), and pays where rho varies (the privacy ball's
 * multiplier, the one-shot fits' penalty path) or the block is small.
 */
export const EIGEN_LIMIT = 600;

/** The side's centred Gram matrix as Q diag(ev) Q^T (Q column-major, k x k). */
export function gramEigen(src: BlockSource, side: 'primal' | 'dual', mu: Float64Array | undefined, k: number): { q: Float64Array; ev: Float64Array } {
  const gram = centredGram(src, side, mu);
  const { values, vectors } = symmetricEigen(gram, k);
  const top = values.reduce((a, v) => Math.max(a, v), 0);
  // Rounding leaves eigenvalues of a PSD matrix slightly negative or tiny positive;
  // treat those as exact zeros (their directions are the null space).
  return { q: vectors, ev: values.map((v) => (v > 1e-12 * top ? v : 0)) };
}

/** rho / (lambda + rho * ev); a zero eigenvalue with lambda = 0 gives the minimum-norm solution. */
export function shrink(lambda: number, rho: number, ev: number): number {
  const den = lambda + rho * ev;
  return den > 0 ? rho / den : 0;
}
