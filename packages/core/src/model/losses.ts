/**
 * Per-sample losses l_i(t) = weight * loss(y_i, t) and their proximal maps, as used by the
 * coordinator's z-update and by the central solver. The project convention (ALGORITHM.md)
 * is weight = 1/N, so the training loss is an average.
 */
/** The losses implemented here (the protocol's LOSSES name the same ones; a test checks). */
export const LOSS_NAMES = ['logistic', 'squared'] as const;
export type LossName = (typeof LOSS_NAMES)[number];

/** 2^k for the integers k in [-1022, 1022], exactly (halving and doubling are exact there). */
const POW2 = new Float64Array(2045);
for (let k = 0, v = 1; k <= 1022; k++, v *= 2) POW2[1022 + k] = v;
for (let k = 0, v = 1; k <= 1022; k++, v /= 2) POW2[1022 - k] = v;
/** Adding it rounds a double of magnitude below 2^51 to an integer (1.5 * 2^52). */
const ROUND = 6755399441055744;
const INV_LN2 = 1.442695040888963387;
const LN2_HI = 6.9314718036912381649e-1;
const LN2_LO = 1.90821492927058770002e-10;
const [E1, E2, E3, E4, E5] = [1.66666666666666019037e-1, -2.77777777770155933842e-3, 6.61375632143793436117e-5, -1.65339022054652515390e-6, 4.13813679705723846039e-8];
const [L1, L2, L3, L4, L5, L6, L7] = [6.666666666666735130e-1, 3.999999999940941908e-1, 2.857142874366239149e-1, 2.222219843214978396e-1, 1.818357216161805012e-1, 1.531383769920937332e-1, 1.479819860511658591e-1];

/**
 * e^x where it is a normal double, 0 below -708 and Infinity above 708 (where Math.exp is a
 * subnormal or finite near the largest double). fdlibm's method: x = k ln2 + r with
 * k = round(x / ln2), |r| <= ln2 / 2, e^r from a rational approximation whose error is below
 * an ulp, times 2^k. The coordinator's WebAssembly kernels (kernels.wat, $exp2) do the same
 * operations, two lanes at a time, so the step's loss and prox are the same bits there and
 * here (a test compares them, and this with Math.exp).
 */
export function expFlushed(x: number): number {
  if (x > 708) return Infinity;
  if (x < -708) return 0;
  const k = x * INV_LN2 + ROUND - ROUND;
  const hi = x - k * LN2_HI;
  const lo = k * LN2_LO;
  const r = hi - lo;
  const t = r * r;
  const c = r - t * (E1 + t * (E2 + t * (E3 + t * (E4 + t * E5))));
  return (1 - (lo - (r * c) / (2 - c) - hi)) * POW2[k + 1022];
}

/** Just below sqrt(2) - 1: log1pUnit halves 1 + e above it. */
const SQRT2_MINUS_1 = 0.41421356237309503;

/**
 * log(1 + e) for e in [0, 1], within an ulp (fdlibm's logarithm: 1 + e = 2^k (1 + f) with k = 0
 * or 1 and f in [sqrt(2)/2 - 1, sqrt(2) - 1]; log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))),
 * s = f / (2 + f)). The twin of kernels.wat's $log1p2.
 */
export function log1pUnit(e: number): number {
  const big = e > SQRT2_MINUS_1;
  const f = big ? (e - 1) * 0.5 : e;
  const k = big ? 1 : 0;
  const s = f / (2 + f);
  const z = s * s;
  const w = z * z;
  const R = z * (L1 + w * (L3 + w * (L5 + w * L7))) + w * (L2 + w * (L4 + w * L6));
  const h = 0.5 * f * f;
  return k * LN2_HI - (h - (s * (h + R) + k * LN2_LO) - f);
}

/** log(1 + exp(-m)) without overflow: log1p(e^-|m|), plus -m where m <= 0. */
export function log1pExpNeg(m: number): number {
  const l = log1pUnit(expFlushed(m > 0 ? -m : m));
  return m > 0 ? l : l - m;
}

/** 1 / (1 + exp(m)) without overflow. */
export function sigmoidNeg(m: number): number {
  if (m >= 0) {
    const e = Math.exp(-m);
    return e / (1 + e);
  }
  return 1 / (1 + Math.exp(m));
}

/**
 * The weights of the two classes (labels -1 and +1) of a class-weighted logistic loss: the
 * training loss becomes (1/N) sum_i w_{y_i} l(y_i, z_i) (scikit-learn's class_weight).
 */
export interface ClassWeights {
  negative: number;
  positive: number;
}

export interface Loss {
  readonly name: LossName;
  /** The flip probability a flip-corrected loss corrects for (absent: 0); trainingLoss(name, labelFlip, classWeights) makes the same loss again, in another thread. */
  readonly labelFlip?: number;
  /** The class weights of a class-weighted loss (absent: both 1); value, deriv and deriv2 include them. */
  readonly classWeights?: ClassWeights;
  /** loss(y, t) times the class weight of y (without the 1/N: `weight` below). */
  value(y: number, t: number): number;
  /** d/dt of value(y, t). */
  deriv(y: number, t: number): number;
  /** d2/dt2 of value(y, t). */
  deriv2(y: number, t: number): number;
  /**
   * The proximal map of every sample at once, to full double precision:
   *   t[i] = argmin_t  weight * value(y[i], t) + kappa/2 (t - a[i])^2.
   * On entry t holds warm starts; on exit slope[i] = dt[i]/da[i] and curvature[i] =
   * d2t[i]/da[i]^2 at the solution, which let the caller predict the next call's solution
   * to second order. Returns the exponentials computed (a Newton step each; none for a loss
   * without them): about one per sample from a good warm start.
   */
  proxInto(t: Float64Array, slope: Float64Array, curvature: Float64Array, y: Float64Array, a: Float64Array, kappa: number, weight: number): number;
}

/** The scalar proximal map (one sample), for tests and callers without vectors. */
export function prox(loss: Loss, y: number, a: number, kappa: number, weight: number, t0 = a): number {
  const t = Float64Array.of(t0);
  loss.proxInto(t, new Float64Array(1), new Float64Array(1), Float64Array.of(y), Float64Array.of(a), kappa, weight);
  return t[0];
}

/** max |sigma'(s) (1 - 2 sigma(s))| = 1 / (6 sqrt 3): bounds h''/R in the logistic prox. */
const MAX_SIGMOID_CURVATURE = 1 / (6 * Math.sqrt(3));

/**
 * The constants of the logistic prox with a linear term c (logisticProxInto, and the
 * coordinator's kernel logisticProx): R = weight / kappa, the centre's shift R c, and the
 * scale of the error bound after a Newton step.
 */
export function logisticProxParams(kappa: number, weight: number, c: number): { R: number; shift: number; errScale: number } {
  const R = weight / kappa;
  return { R, shift: R * c, errScale: 0.5 * R * MAX_SIGMOID_CURVATURE };
}

/**
 * The logistic proximal map with a linear term: every t[i] = argmin_t w_i weight (loss(y[i], t) -
 * c y[i] t) + kappa/2 (t - a[i])^2, w_i the class weight of y[i] (1 without `w`). The linear term
 * only moves the prox centre, to a[i] + w_i weight c y[i] / kappa, so c = 0 is the plain logistic
 * prox and c > 0 the prox of the loss corrected for flipped labels (flipCorrectedLogistic). A
 * class weight only scales R (below) per class: weight * 1 is weight, so the unweighted prox is
 * the same bits with or without `w`.
 */
function logisticProxInto(t: Float64Array, slope: Float64Array, curvature: Float64Array, y: Float64Array, a: Float64Array, kappa: number, weight: number, c: number, w?: ClassWeights): number {
  // With s = y t and b = y a + R c (y = +-1; y times the shifted centre) the optimality
  // condition is
  //   h(s) = s - b - R sigma(-s) = 0,  R = weight / kappa.
  // h is increasing (h' >= 1), convex for s < 0 and concave for s > 0. From any start in
  // the root's half-line one Newton step lands on the far side of the root, and from
  // there Newton converges monotonically; a step that leaves the half-line restarts at
  // s = 0, which is always on the far side. After a step delta the error is at most
  // (max|h''| / 2 min h') delta^2 <= R C delta^2 / 2, so the loop stops as soon as that
  // is below rounding: usually one or two exponentials per sample with a good warm start.
  const neg = logisticProxParams(kappa, weight * (w?.negative ?? 1), c);
  const pos = w ? logisticProxParams(kappa, weight * w.positive, c) : neg;
  let exps = 0;
  for (let i = 0; i < t.length; i++) {
    const yi = y[i];
    const { R, shift, errScale } = yi > 0 ? pos : neg;
    const b = yi * a[i] + shift;
    const rootNegative = -b - R / 2 > 0; // h(0) > 0
    let s = yi * t[i];
    if (rootNegative ? s > 0 : s < 0) s = 0;
    let inv = 1;
    let p = 0;
    for (let it = 0; it < 100; it++) {
      // sigma(-s) = 1/(1+e^s): e^s flushed to Infinity or 0 harmlessly (expFlushed).
      p = 1 / (1 + expFlushed(s));
      exps++;
      inv = 1 / (1 + R * p * (1 - p));
      const step = (s - b - R * p) * inv;
      s -= step;
      if (rootNegative ? s > 0 : s < 0) {
        s = 0;
        continue;
      }
      if (errScale * step * step <= Number.EPSILON * (s > 1 ? s : s < -1 ? -s : 1)) break;
    }
    t[i] = yi * s;
    // Implicit differentiation of h(s(b)) = b: s' = 1/h', s'' = -h'' s'^3 with
    // h'' = -R p (1-p) (1-2p); in t = y s, a = y b: dt/da = s', d2t/da2 = y s''. The shift
    // is a constant, so it changes neither.
    slope[i] = inv;
    curvature[i] = yi * R * p * (1 - p) * (1 - 2 * p) * inv * inv * inv;
  }
  return exps;
}

export const logistic: Loss = {
  name: 'logistic',
  value: (y, t) => log1pExpNeg(y * t),
  deriv: (y, t) => -y * sigmoidNeg(y * t),
  deriv2: (y, t) => {
    const p = sigmoidNeg(y * t);
    return p * (1 - p);
  },
  proxInto(t, slope, curvature, y, a, kappa, weight) {
    return logisticProxInto(t, slope, curvature, y, a, kappa, weight, 0);
  },
};

/**
 * The coefficient c = p / (1 - 2p) of the flip-corrected logistic loss, for labels flipped
 * with probability p in [0, 1/2).
 */
export function flipCorrection(p: number): number {
  if (!(p >= 0 && p < 0.5)) throw new RangeError(`flip probability must be in [0, 0.5), got ${p}`);
  return p / (1 - 2 * p);
}

/**
 * The logistic loss corrected for labels flipped independently with known probability p
 * (randomized response; Natarajan, Dhillon, Ravikumar and Tewari 2013, "Learning with noisy
 * labels", Lemma 1):
 *   l~(y~, t) = ((1 - p) l(y~, t) - p l(-y~, t)) / (1 - 2p) = l(y~, t) - c y~ t,  c = p / (1 - 2p),
 * because l(-y, t) = l(y, t) + y t for the logistic loss. Its expectation over the flip of the
 * true label y is l(y, t), so its mean over the samples estimates the loss on the true labels
 * without bias. It is convex (the correction is linear) but unbounded below, so the training
 * objective needs lambda > 0. p = 0 is the plain logistic loss.
 */
export function flipCorrectedLogistic(p: number): Loss {
  const c = flipCorrection(p);
  if (c === 0) return logistic;
  return {
    name: 'logistic',
    labelFlip: p,
    value: (y, t) => log1pExpNeg(y * t) - c * y * t,
    deriv: (y, t) => -y * (sigmoidNeg(y * t) + c),
    deriv2: logistic.deriv2,
    proxInto(t, slope, curvature, y, a, kappa, weight) {
      return logisticProxInto(t, slope, curvature, y, a, kappa, weight, c);
    },
  };
}

export const squared: Loss = {
  name: 'squared',
  value: (y, t) => 0.5 * (t - y) * (t - y),
  deriv: (y, t) => t - y,
  deriv2: () => 1,
  proxInto(t, slope, curvature, y, a, kappa, weight) {
    const sl = kappa / (weight + kappa);
    for (let i = 0; i < t.length; i++) {
      t[i] = (weight * y[i] + kappa * a[i]) / (weight + kappa);
      slope[i] = sl;
      curvature[i] = 0;
    }
    return 0;
  },
};

/**
 * `base` (the logistic loss, flip-corrected or not) with class weights: value, deriv and deriv2
 * times w_y, and the prox of the weighted loss. Weights of 1 and 1 give `base` itself.
 */
export function classWeighted(base: Loss, w: ClassWeights): Loss {
  if (w.negative === 1 && w.positive === 1) return base;
  if (base.name !== 'logistic') throw new RangeError(`class weights need the logistic loss, not ${base.name}`);
  if (!(w.negative > 0 && w.positive > 0 && Number.isFinite(w.negative) && Number.isFinite(w.positive))) throw new RangeError(`class weights must be positive and finite, got ${w.negative} and ${w.positive}`);
  const c = flipCorrection(base.labelFlip ?? 0);
  const weights: ClassWeights = { negative: w.negative, positive: w.positive };
  const of = (y: number) => (y > 0 ? weights.positive : weights.negative);
  return {
    name: base.name,
    ...(base.labelFlip === undefined ? {} : { labelFlip: base.labelFlip }),
    classWeights: weights,
    value: (y, t) => of(y) * base.value(y, t),
    deriv: (y, t) => of(y) * base.deriv(y, t),
    deriv2: (y, t) => of(y) * base.deriv2(y, t),
    proxInto(t, slope, curvature, y, a, kappa, weight) {
      return logisticProxInto(t, slope, curvature, y, a, kappa, weight, c, weights);
    },
  };
}

const LOSS_BY_NAME: Readonly<Record<LossName, Loss>> = { logistic, squared };

export function lossByName(name: LossName): Loss {
  return LOSS_BY_NAME[name];
}

/**
 * The loss a job trains with: `name`, corrected for training labels flipped with probability
 * `labelFlip` (label differential privacy; 0: none), then weighted by class (`classWeights`;
 * absent: unweighted). Only the logistic loss has a correction and class weights.
 */
export function trainingLoss(name: LossName, labelFlip: number, classWeights?: ClassWeights): Loss {
  if (labelFlip !== 0 && name !== 'logistic') throw new RangeError(`flipped labels need the logistic loss, not ${name}`);
  const base = labelFlip === 0 ? lossByName(name) : flipCorrectedLogistic(labelFlip);
  return classWeights ? classWeighted(base, classWeights) : base;
}

/** (1/N) sum_i loss(y_i, scores_i) (with class weights, each term weighted) */
export function meanLoss(loss: Loss, y: Float64Array, scores: Float64Array): number {
  let acc = 0;
  for (let i = 0; i < y.length; i++) acc += loss.value(y[i], scores[i]);
  return acc / y.length;
}
