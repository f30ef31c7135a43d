// The randomised range finder (Halko, Martinsson and Tropp 2011, "Finding structure with
// randomness", algorithm 4.4) and the Rayleigh-Ritz step after it: a few leading eigenpairs of
// a large symmetric positive semi-definite operator M, known only through its products, from
// an orthonormal basis Q of its dominant range. The party uses it twice: the deflation
// preconditioner of its conjugate gradients (M = D~^T D~) and the active party's sketch of a
// block too large to factor (M = D~ D~^T).
import { dot, symmetricEigen } from './eigen.js';

/**
 * Orthonormal columns spanning `cols` (modified Gram-Schmidt, twice); columns that vanish
 * (below 1e-10 of the longest: the span has lower rank) are dropped.
 */
export function orthonormalise(cols: readonly Float64Array[]): Float64Array[] {
  const out: Float64Array[] = [];
  const scale = Math.max(...cols.map((c) => Math.sqrt(dot(c, c))), 0);
  for (const c of cols) {
    const v = c.slice();
    for (let pass = 0; pass < 2; pass++)
      for (const q of out) {
        const a = dot(q, v);
        for (let i = 0; i < v.length; i++) v[i] -= a * q[i];
      }
    const norm = Math.sqrt(dot(v, v));
    if (!(norm > 1e-10 * scale)) continue;
    for (let i = 0; i < v.length; i++) v[i] /= norm;
    out.push(v);
  }
  return out;
}

/**
 * An orthonormal basis of M's dominant range: Q = orth(start), then `power` times
 * Q = orth(M Q), M given by `times` (a new vector M v). `start` is M's range already sampled
 * (M Omega, or Omega itself), its columns seeded by the caller so that the basis is
 * reproducible. Each power step sharpens the basis towards the leading eigenvectors at the
 * cost of one product per column.
 */
export function rangeFinder(start: readonly Float64Array[], times: (v: Float64Array) => Float64Array, power: number): Float64Array[] {
  let Q = orthonormalise(start);
  for (let it = 0; it < power; it++) Q = orthonormalise(Q.map(times));
  return Q;
}

/**
 * Rayleigh-Ritz on the basis Q (k columns): the eigenpairs of T = Q^T M Q (k x k, symmetric,
 * row-major, formed by the caller) and their Ritz vectors Q v, in the order symmetricEigen
 * gives them. The eigenvalues approximate M's leading ones, the vectors its eigenvectors.
 */
export function ritzPairs(Q: readonly Float64Array[], T: Float64Array): { values: Float64Array; vectors: Float64Array[] } {
  const k = Q.length;
  const { values, vectors } = symmetricEigen(T, k);
  const ritz = Array.from({ length: k }, (_, j) => {
    const p = new Float64Array(Q[0]?.length ?? 0);
    for (let c = 0; c < k; c++) {
      const v = vectors[c * k + j];
      const q = Q[c];
      for (let i = 0; i < p.length; i++) p[i] += v * q[i];
    }
    return p;
  });
  return { values, vectors: ritz };
}
