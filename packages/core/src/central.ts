import { CholeskyDecomposition, Matrix } from 'ml-matrix';
import { type Csr, csrAppendOnes, csrMatVec } from './csr.js';
import { type Loss } from './losses.js';

export interface CentralResult {
  /** Coefficients, one per column of X (without the intercept). */
  x: Float64Array;
  intercept: number;
  objective: number;
  iterations: number;
}

/**
 * The plain centralised solver the distributed runs are compared with:
 * minimise (1/N) sum_i loss(y_i, a_i^T x + b) + lambda/2 ||x||^2 (b unpenalised,
 * present only with `intercept`) by Newton's method with a dense Hessian and
 * backtracking line search, to full precision. Dense d x d, so for d up to a few thousand.
 */
export function fitCentral(
  X: Csr,
  y: Float64Array,
  loss: Loss,
  lambda: number,
  opts: { intercept?: boolean; maxIterations?: number } = {},
): CentralResult {
  const A = opts.intercept ? csrAppendOnes(X) : X;
  const n = A.rows;
  const d = A.cols;
  const penalised = (j: number) => !(opts.intercept && j === d - 1);
  const x = new Float64Array(d);
  const scores = new Float64Array(n);
  const objective = (xs: Float64Array): number => {
    csrMatVec(scores, A, xs);
    let f = 0;
    for (let i = 0; i < n; i++) f += loss.value(y[i], scores[i]);
    f /= n;
    for (let j = 0; j < d; j++) if (penalised(j)) f += (lambda / 2) * xs[j] * xs[j];
    return f;
  };
  let f = objective(x);
  let it = 0;
  const maxIt = opts.maxIterations ?? 100;
  const trial = new Float64Array(d);
  for (; it < maxIt; it++) {
    const g = new Float64Array(d);
    const h = Array.from({ length: d }, () => new Float64Array(d));
    for (let i = 0; i < n; i++) {
      const g1 = loss.deriv(y[i], scores[i]) / n;
      const h1 = loss.deriv2(y[i], scores[i]) / n;
      for (let p = A.indptr[i]; p < A.indptr[i + 1]; p++) {
        const jp = A.indices[p];
        const vp = A.values[p];
        g[jp] += g1 * vp;
        const row = h[jp];
        for (let q = A.indptr[i]; q < A.indptr[i + 1]; q++) row[A.indices[q]] += h1 * (vp * A.values[q]); // vp*vq is exact-commutative: H stays symmetric
      }
    }
    for (let j = 0; j < d; j++) {
      if (penalised(j)) {
        g[j] += lambda * x[j];
        h[j][j] += lambda;
      }
      // A column that is zero everywhere and unpenalised would make H singular.
      if (h[j][j] === 0) h[j][j] = 1;
    }
    const chol = new CholeskyDecomposition(new Matrix(h.map((r) => Array.from(r))));
    if (!chol.isPositiveDefinite()) throw new Error('central solver: Hessian is not positive definite (lambda = 0 on rank-deficient data?)');
    const step = chol.solve(Matrix.columnVector(Array.from(g))).getColumn(0);
    let decrement = 0;
    for (let j = 0; j < d; j++) decrement += g[j] * step[j];
    // Newton decrement: f - f* ~ decrement/2. Rounding in the gradient keeps it from
    // going much below 1e-17 on ill-conditioned data, so stop at the objective's precision.
    if (decrement / 2 <= 1e-16 * Math.max(1, Math.abs(f))) break;
    // Near the optimum f changes by less than its rounding error; a full Newton step is
    // then accepted if it does not make f measurably worse.
    const slack = 8 * Number.EPSILON * Math.max(1, Math.abs(f));
    let t = 1;
    let accepted = false;
    for (let ls = 0; ls < 40 && !accepted; ls++) {
      for (let j = 0; j < d; j++) trial[j] = x[j] - t * step[j];
      const fNew = objective(trial);
      if (fNew <= f - 0.25 * t * decrement || (t === 1 && fNew <= f + slack)) {
        accepted = true;
        f = fNew;
      } else t /= 2;
    }
    if (!accepted) break;
    x.set(trial);
  }
  f = objective(x);
  return {
    x: opts.intercept ? x.slice(0, d - 1) : x,
    intercept: opts.intercept ? x[d - 1] : 0,
    objective: f,
    iterations: it,
  };
}

/** Scores a_i^T x + b. */
export function predictScores(X: Csr, x: Float64Array, intercept = 0): Float64Array {
  const out = csrMatVec(new Float64Array(X.rows), X, x);
  if (intercept !== 0) for (let i = 0; i < out.length; i++) out[i] += intercept;
  return out;
}
