/**
 * Per-sample losses l_i(t) = weight * loss(y_i, t) and their proximal maps, as used by the
 * coordinator's z-update and by the central solver. The project convention (ALGORITHM.md)
 * is weight = 1/N, so the training loss is an average.
 */
export type LossName = 'logistic' | 'squared';

/** log(1 + exp(-m)) without overflow. */
export function log1pExpNeg(m: number): number {
  return m > 0 ? Math.log1p(Math.exp(-m)) : -m + Math.log1p(Math.exp(m));
}

/** 1 / (1 + exp(m)) without overflow. */
export function sigmoidNeg(m: number): number {
  if (m >= 0) {
    const e = Math.exp(-m);
    return e / (1 + e);
  }
  return 1 / (1 + Math.exp(m));
}

export interface Loss {
  readonly name: LossName;
  /** loss(y, t), unweighted. */
  value(y: number, t: number): number;
  /** d/dt loss(y, t). */
  deriv(y: number, t: number): number;
  /** d2/dt2 loss(y, t). */
  deriv2(y: number, t: number): number;
  /**
   * argmin_t  weight * loss(y, t) + kappa/2 (t - a)^2, to full double precision.
   * `t0` is a warm start (the previous round's value).
   */
  prox(y: number, a: number, kappa: number, weight: number, t0: number): number;
}

export const logistic: Loss = {
  name: 'logistic',
  value: (y, t) => log1pExpNeg(y * t),
  deriv: (y, t) => -y * sigmoidNeg(y * t),
  deriv2: (y, t) => {
    const p = sigmoidNeg(y * t);
    return p * (1 - p);
  },
  prox(y, a, kappa, weight, t0) {
    // With s = y t and b = y a (y = +-1) the optimality condition is
    //   h(s) = s - b - R sigma(-s) = 0,  R = weight / kappa.
    // h is increasing, convex for s < 0 and concave for s > 0. Newton's method started on
    // the far side of the root within the root's half-line (s = 0, or the warm start when it
    // qualifies) therefore converges monotonically, without overshoot or safeguards.
    const R = weight / kappa;
    const b = y * a;
    // From any point of the root's half-line one Newton step lands on the far side (the
    // tangent of a convex increasing function lies below it), so a warm start near the
    // root costs one extra step at most.
    const rootNegative = -b - R / 2 > 0; // h(0) > 0
    let s = 0;
    let w = y * t0;
    if (w !== 0 && (rootNegative ? w <= 0 : w >= 0)) {
      const p = sigmoidNeg(w);
      const hw = w - b - R * p;
      if (rootNegative ? hw < 0 : hw > 0) w -= hw / (1 + R * p * (1 - p));
      if (rootNegative ? w <= 0 : w >= 0) s = w;
    }
    for (let it = 0; it < 100; it++) {
      const p = sigmoidNeg(s);
      const step = (s - b - R * p) / (1 + R * p * (1 - p));
      s -= step;
      // Quadratic convergence: the error after a step is O(step^2 h''/h'), below rounding
      // once the step is under 1e-9 relative.
      if (!(Math.abs(step) > 1e-9 * Math.max(1, Math.abs(s)))) break;
    }
    return y * s;
  },
};

export const squared: Loss = {
  name: 'squared',
  value: (y, t) => 0.5 * (t - y) * (t - y),
  deriv: (y, t) => t - y,
  deriv2: () => 1,
  prox: (y, a, kappa, weight) => (weight * y + kappa * a) / (weight + kappa),
};

export function lossByName(name: LossName): Loss {
  return name === 'logistic' ? logistic : squared;
}

/** (1/N) sum_i loss(y_i, scores_i) */
export function meanLoss(loss: Loss, y: Float64Array, scores: Float64Array): number {
  let acc = 0;
  for (let i = 0; i < y.length; i++) acc += loss.value(y[i], scores[i]);
  return acc / y.length;
}
