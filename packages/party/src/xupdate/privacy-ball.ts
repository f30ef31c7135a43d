// What the privacy mechanisms ask of the x-update: the ball ||x|| <= radius that the
// gaussian-share sensitivity bound assumes (its multiplier from the eigendecomposition, or by
// Newton's method over conjugate gradient solves), and the paper mechanism's model noise D xi.
import { ConfigError, dot, matVec } from '@admm-share/core';
import type { BlockOperator } from './block-operator.js';
import { CG_MAX_ITERATIONS, CG_TOLERANCE, type ConjugateGradients } from './conjugate-gradients.js';

/** An eigen form's basis: the Gram matrix Q diag(ev) Q^T (k x k), on the primal or dual side. */
export interface EigenBasis {
  side: 'primal' | 'dual';
  k: number;
  q: Float64Array;
  ev: Float64Array;
}

/**
 * ||x(m)||^2 = sum_j g_j (t_j s_j(m))^2 with s_j(m) = rho / (lambda + m + rho ev_j), g_j = 1
 * (primal) or ev_j (dual: ||D^T a||^2 = a^T D D^T a), t the right-hand side in the eigenbasis;
 * returns the m >= 0 that makes it radius^2, or 0 when the unconstrained minimiser is inside
 * the ball.
 */
export function ballMultiplier({ side, k, ev }: EigenBasis, t: Float64Array, lambda: number, rho: number, radius: number): number {
  const primal = side === 'primal';
  const normSq = (m: number): [number, number] => {
    let f = 0;
    let df = 0;
    for (let j = 0; j < k; j++) {
      const g = primal ? 1 : ev[j];
      const den = lambda + m + rho * ev[j];
      if (!(den > 0) || g === 0) continue;
      const a = (rho * t[j]) / den;
      f += g * a * a;
      df -= (2 * g * a * a) / den;
    }
    return [f, df];
  };
  let [f, df] = normSq(0);
  if (f <= radius * radius) return 0;
  // phi(m) = 1/sqrt(f(m)) - 1/radius is increasing and concave: Newton from m = 0 rises
  // monotonically to the root (More and Sorensen 1983).
  let m = 0;
  for (let it = 0; it < 100; it++) {
    const phi = 1 / Math.sqrt(f) - 1 / radius;
    const dphi = -0.5 * df * f ** -1.5;
    const step = phi / dphi;
    m -= step;
    if (m < 0) m = 0;
    [f, df] = normSq(m);
    if (Math.abs(step) <= 1e-15 * Math.max(1, m)) break;
  }
  return m;
}

/**
 * x (the unconstrained minimiser on entry) kept in the ball: outside it, Newton's method on
 * 1/||x(m)|| - 1/radius as in ballMultiplier, with ||x(m)||^2 and its derivative
 * -2 x^T ((lambda + m) I + rho D~^T D~)^-1 x each from one conjugate gradient solve.
 * Returns the iterations.
 */
export function solveBall(solver: ConjugateGradients, x: Float64Array, rhs: Float64Array, rho: number, radius: number): number {
  const d = x.length;
  let iterations = 0;
  let f = dot(x, x);
  if (f > radius * radius) {
    const y = new Float64Array(d);
    let m = 0;
    for (let it = 0; it < 100; it++) {
      y.set(x);
      iterations += solver.cg(y, x, m, rho);
      const df = -2 * dot(x, y);
      const step = (1 / Math.sqrt(f) - 1 / radius) / (-0.5 * df * f ** -1.5);
      m = Math.max(0, m - step);
      iterations += solver.cg(x, rhs, m, rho);
      f = dot(x, x);
      if (Math.abs(step) <= 1e-12 * Math.max(1, m)) break;
    }
    // The solves are accurate to 1e-12, not exact: never leave x outside the ball.
    if (f > radius * radius) {
      const scale = radius / Math.sqrt(f);
      for (let j = 0; j < d; j++) x[j] *= scale;
    }
  }
  return iterations;
}

/**
 * The paper's perturbation (eq. 17): released += D xi with xi ~ N(0, sigma^2 (D^T D)^-1),
 * sampled through the cached eigendecomposition D^T D = Q diag(ev) Q^T as
 * xi = sigma Q diag(ev^-1/2) u (directions with ev = 0 get none: the pseudo-inverse).
 * In the N x N form, D xi = sigma sum_j q_j u_j over the non-zero eigenvalues of D D^T.
 * Without an eigendecomposition (cholesky and cg forms, `solver`), the same distribution as
 * D xi = sigma P u, u ~ N(0, I_N), P = D (D^T D)^+ D^T the projection on D's column space (its
 * covariance is sigma^2 P, as D (D^T D)^+ D^T is): y solves D^T D y = D^T u by conjugate
 * gradients (consistent, so they converge), and D y = P u. Without an intercept only.
 */
export function addModelNoise(
  released: Float64Array,
  op: BlockOperator,
  basis: EigenBasis | { solver: ConjugateGradients; lambda: number },
  sigma: number,
  normal: (out: Float64Array, sigma: number) => void,
): void {
  const { n } = op;
  if ('solver' in basis) {
    const u = new Float64Array(n);
    normal(u, sigma);
    const rhs = op.mulDT(new Float64Array(op.d), u);
    const y = new Float64Array(op.d);
    // (lambda - lambda) I + 1 D^T D: the squared condition number of D, singular when D's
    // columns are dependent (the system is consistent, so conjugate gradients still converge
    // where rounding allows). Not converged is refused: D y would miss part of the noise.
    basis.solver.cg(y, rhs, -basis.lambda, 1);
    if (!(basis.solver.lastResidual <= CG_TOLERANCE))
      throw new ConfigError(`the paper mechanism's noise D xi, xi ~ N(0, sigma^2 (D^T D)^-1), did not converge in ${CG_MAX_ITERATIONS} conjugate gradient iterations on this ${op.n} x ${op.d} block (D^T D is too ill-conditioned): use --mechanism gaussian-share`);
    const py = op.mulD(new Float64Array(n), y);
    for (let i = 0; i < n; i++) released[i] += py[i];
    return;
  }
  const { k, q, ev } = basis;
  const u = new Float64Array(k);
  normal(u, sigma);
  if (basis.side === 'primal') {
    for (let j = 0; j < k; j++) u[j] = ev[j] > 0 ? u[j] / Math.sqrt(ev[j]) : 0;
    const xi = new Float64Array(k);
    matVec(xi, q, k, k, u);
    const dxi = op.mulD(new Float64Array(n), xi);
    for (let i = 0; i < n; i++) released[i] += dxi[i];
  } else {
    for (let j = 0; j < k; j++) if (ev[j] === 0) u[j] = 0;
    const dxi = new Float64Array(n);
    matVec(dxi, q, k, k, u);
    for (let i = 0; i < n; i++) released[i] += dxi[i];
  }
}
