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
    // phi(t) = weight*log(1+exp(-y t)) + kappa/2 (t-a)^2 is strictly convex and
    // |weight * loss'| <= weight, so the root of phi' lies within weight/kappa of a.
    // Newton, safeguarded by bisection on that bracket.
    const r = weight / kappa;
    let lo = a - r;
    let hi = a + r;
    let t = t0 >= lo && t0 <= hi ? t0 : a;
    for (let it = 0; it < 200; it++) {
      const p = sigmoidNeg(y * t);
      const g = -weight * y * p + kappa * (t - a);
      if (g === 0) return t;
      if (g > 0) hi = t;
      else lo = t;
      const h = weight * p * (1 - p) + kappa;
      let next = t - g / h;
      if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
      if (Math.abs(next - t) <= 4 * Number.EPSILON * Math.max(1, Math.abs(t))) return next;
      if (hi - lo <= 4 * Number.EPSILON * Math.max(1, Math.abs(t))) return next;
      t = next;
    }
    return t;
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
