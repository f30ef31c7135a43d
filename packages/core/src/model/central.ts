import { type Csr, csrAppendOnes, csrMatVec, cscMatTVec, csrToCsc } from '../linalg/csr.js';
import { type Dense, choleskyInPlace, choleskySolveInPlace, denseMatVec, isDense } from '../linalg/dense.js';
import { packedAt, packedLength } from '../linalg/packed.js';
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
 * present only with `intercept`) by Newton's method with backtracking line search, to full
 * precision. Each step solves with the Hessian: formed (its lower triangle, packed) and
 * factored by Cholesky up to DENSE_HESSIAN_LIMIT features and no more features than rows,
 * by conjugate gradients on Hessian-vector products otherwise (Newton-CG).
 */
export function fitCentral(
  X: Csr,
  y: Float64Array,
  loss: Loss,
  lambda: number,
  opts: { intercept?: boolean; maxIterations?: number; denseHessianLimit?: number } = {},
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
  // Newton-CG above the limit, and wherever there are more features than rows: the Hessian is
  // then lambda I plus a matrix of rank at most N, so conjugate gradients need about N steps.
  const A_T = d > Math.min(opts.denseHessianLimit ?? DENSE_HESSIAN_LIMIT, n) ? csrToCsc(A) : undefined;
  for (; it < maxIt; it++) {
    const g = new Float64Array(d);
    let step: Float64Array;
    if (A_T) {
      // Too many features for a dense Hessian: solve H step = g by conjugate gradients
      // with Hessian-vector products H v = (1/N) A^T (h * A v) + lambda v (Newton-CG).
      const h = new Float64Array(n);
      const gi = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        gi[i] = loss.deriv(y[i], scores[i]) / n;
        h[i] = loss.deriv2(y[i], scores[i]) / n;
      }
      cscMatTVec(g, A_T, gi);
      for (let j = 0; j < d; j++) if (penalised(j)) g[j] += lambda * x[j];
      const av = new Float64Array(n);
      step = conjugateGradient(
        (out, v) => {
          csrMatVec(av, A, v);
          for (let i = 0; i < n; i++) av[i] *= h[i];
          cscMatTVec(out, A_T, av);
          for (let j = 0; j < d; j++) out[j] += penalised(j) ? lambda * v[j] : 1e-12 * v[j];
        },
        g,
      );
    } else {
      // The Hessian's lower triangle, packed (H is symmetric); a row's indices increase, so
      // its entries q <= p are its pairs in the lower triangle.
      const h = new Float64Array(packedLength(d));
      for (let i = 0; i < n; i++) {
        const g1 = loss.deriv(y[i], scores[i]) / n;
        const h1 = loss.deriv2(y[i], scores[i]) / n;
        for (let p = A.indptr[i]; p < A.indptr[i + 1]; p++) {
          const jp = A.indices[p];
          const vp = A.values[p];
          g[jp] += g1 * vp;
          const row = packedAt(jp);
          for (let q = A.indptr[i]; q <= p; q++) h[row + A.indices[q]] += h1 * (vp * A.values[q]);
        }
      }
      for (let j = 0; j < d; j++) {
        const jj = packedAt(j) + j;
        if (penalised(j)) {
          g[j] += lambda * x[j];
          h[jj] += lambda;
        }
        // A column that is zero everywhere and unpenalised would make H singular.
        if (h[jj] === 0) h[jj] = 1;
      }
      if (!choleskyInPlace(h, d)) throw new Error('central solver: Hessian is not positive definite (lambda = 0 on rank-deficient data?)');
      step = g.slice();
      choleskySolveInPlace(h, d, step);
    }
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

/** Above this many features (or above the number of rows) the central solver uses Newton-CG instead of a dense Hessian. */
export const DENSE_HESSIAN_LIMIT = 1000;

/** Solve A x = b for symmetric positive definite A given as a product, to 1e-10 relative residual. */
function conjugateGradient(apply: (out: Float64Array, v: Float64Array) => void, b: Float64Array): Float64Array {
  const d = b.length;
  const x = new Float64Array(d);
  const r = b.slice();
  const p = b.slice();
  const ap = new Float64Array(d);
  const dot = (u: Float64Array, v: Float64Array) => {
    let acc = 0;
    for (let j = 0; j < d; j++) acc += u[j] * v[j];
    return acc;
  };
  let rr = dot(r, r);
  const target = 1e-20 * rr;
  for (let it = 0; it < 10 * d && rr > target; it++) {
    apply(ap, p);
    const alpha = rr / dot(p, ap);
    for (let j = 0; j < d; j++) {
      x[j] += alpha * p[j];
      r[j] -= alpha * ap[j];
    }
    const next = dot(r, r);
    for (let j = 0; j < d; j++) p[j] = r[j] + (next / rr) * p[j];
    rr = next;
  }
  return x;
}

/** Scores a_i^T x + b. */
export function predictScores(X: Csr | Dense, x: Float64Array, intercept = 0): Float64Array {
  const out = isDense(X) ? denseMatVec(new Float64Array(X.rows), X, x) : csrMatVec(new Float64Array(X.rows), X, x);
  if (intercept !== 0) for (let i = 0; i < out.length; i++) out[i] += intercept;
  return out;
}
