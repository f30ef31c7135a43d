// Symmetric and triangular matrices stored packed (their lower triangle by rows).

/**
 * A symmetric or lower-triangular n x n matrix stored packed: its lower triangle by rows, so
 * element (i, j), j <= i, is at packedAt(i) + j, and n (n + 1) / 2 numbers in all (half the
 * memory of the square). The Gram matrices of the factored x-update, and its factor, are kept so.
 */
export function packedLength(n: number): number {
  return (n * (n + 1)) / 2;
}

/** Where row i of a packed lower triangle starts. */
export function packedAt(i: number): number {
  return (i * (i + 1)) / 2;
}

/** The n x n symmetric matrix whose lower triangle `p` holds packed, as a square row-major array. */
export function unpackSymmetric(p: Float64Array, n: number): Float64Array {
  if (p.length !== packedLength(n)) throw new RangeError(`packed: length ${p.length}, expected ${packedLength(n)} for ${n} x ${n}`);
  const g = new Float64Array(n * n);
  for (let i = 0, r = 0; i < n; r += ++i) for (let j = 0; j <= i; j++) g[i * n + j] = g[j * n + i] = p[r + j];
  return g;
}
