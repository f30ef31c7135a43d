// Applying a model file's coefficients to rows, as its `score` field says, written here
// independently of the party's code (the tests compare the two).
import type { Csr } from '@admm-share/core';

/** x . row for each row; with `unit`, a row of norm > 1 is scaled to norm 1 first (privacy and one-shot models). */
export function modelScores(X: Csr, x: ArrayLike<number>, unit = false): Float64Array {
  const out = new Float64Array(X.rows);
  for (let i = 0; i < X.rows; i++) {
    let sq = 0;
    let dot = 0;
    for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) {
      sq += X.values[k] ** 2;
      dot += X.values[k] * x[X.indices[k]];
    }
    out[i] = unit && sq > 1 ? dot / Math.sqrt(sq) : dot;
  }
  return out;
}
