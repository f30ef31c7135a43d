/**
 * Randomized response on binary labels (Warner 1965), the mechanism of label differential
 * privacy at the coordinator: each label is flipped independently with probability
 * p = 1 / (1 + e^epsilon). For any two label vectors that differ in one label, every outcome
 * has probability ratio at most (1 - p) / p = e^epsilon, so the flipped labels are
 * epsilon-label-DP, and so is everything computed from them alone (post-processing).
 */
import type { NoiseSource } from './noise.js';

/** The ridge weight lambda of the objective when nothing else is asked for (ALGORITHM.md's figures are at this value). */
export const DEFAULT_LAMBDA = 1e-4;

/**
 * The default lambda with label privacy. The loss corrected for flipped labels is unbounded
 * below, so only the ridge term holds the coefficients of features whose flipped labels happen
 * to lean one way; at DEFAULT_LAMBDA its fit is heavy-tailed. Measured on a9a (central fits,
 * 30 draws of the flips at label epsilon 1): test log loss median 0.339 but mean 0.349 and up
 * to 0.518 at lambda 1e-4 (largest coefficient up to 35), mean 0.331 and at most 0.341 at 1e-3;
 * at epsilon 2 and 3 1e-3 is as good as 1e-4 or better (0.3257, 0.3247), and on the true
 * labels it costs 0.3243 against 0.3238 (docs/privacy.md, section 10.4).
 */
export const LABEL_PRIVACY_LAMBDA = 1e-3;

/** p = 1 / (1 + e^epsilon), the flip probability that makes randomized response epsilon-DP. */
export function flipProbability(epsilon: number): number {
  if (!(Number.isFinite(epsilon) && epsilon > 0)) throw new RangeError(`label epsilon must be a positive number, got ${epsilon}`);
  return 1 / (1 + Math.exp(epsilon));
}

/**
 * Which of `n` labels randomized response flips with probability p: the indices i with
 * u_i < p for uniforms u_i from `source` (the OS CSPRNG, or a seeded generator for
 * experiments), ascending. u_i has 53 random bits, so P(flip) is p to within 2^-53.
 */
export function drawFlips(n: number, p: number, source: Pick<NoiseSource, 'uniforms'>): Uint32Array {
  if (!(p >= 0 && p < 0.5)) throw new RangeError(`flip probability must be in [0, 0.5), got ${p}`);
  const u = source.uniforms(n);
  let count = 0;
  for (let i = 0; i < n; i++) if (u[i] < p) count++;
  const out = new Uint32Array(count);
  for (let i = 0, k = 0; i < n; i++) if (u[i] < p) out[k++] = i;
  return out;
}

/** y with the labels at `flipped` negated (+1 <-> -1): a new vector. */
export function applyFlips(y: Float64Array, flipped: Uint32Array): Float64Array {
  const out = y.slice();
  for (let k = 0; k < flipped.length; k++) out[flipped[k]] = -out[flipped[k]];
  return out;
}

/** The chance, at most, that a mask drawn by drawFlips is refused by plausibleFlipCounts' bounds. */
export const FLIP_COUNT_FALSE_REFUSAL = 1e-9;

/** Kullback-Leibler divergence of Bernoulli(q) from Bernoulli(p), 0 < p < 1, with 0 ln 0 = 0. */
function bernoulliKl(q: number, p: number): number {
  const a = q > 0 ? q * Math.log(q / p) : 0;
  const b = q < 1 ? (1 - q) * Math.log((1 - q) / (1 - p)) : 0;
  return a + b;
}

/**
 * The numbers of flips [lo, hi] that a mask of n labels flipped with probability p can
 * plausibly have. The Chernoff bound P(X <= k) <= exp(-n KL(k/n || p)) for k <= np (and
 * P(X >= k) likewise above) holds for every n, so a count whose tail bound is below rate / 2
 * on either side is outside: a true draw is refused with probability below `rate`
 * (FLIP_COUNT_FALSE_REFUSAL by default). A mask outside was made for another p, or edited
 * (`flipped: []` for p = 0.27 and more than 68 labels).
 */
export function plausibleFlipCounts(n: number, p: number, rate = FLIP_COUNT_FALSE_REFUSAL): { lo: number; hi: number } {
  if (!(p > 0 && p < 1)) throw new RangeError(`flip probability must be in (0, 1), got ${p}`);
  const limit = Math.log(2 / rate);
  const inside = (k: number) => n * bernoulliKl(k / n, p) <= limit;
  const mode = Math.min(n, Math.max(0, Math.round(n * p)));
  // n KL(k/n || p) falls towards np and rises away from it: bisect each side for the last k inside.
  const edge = (from: number, to: number) => {
    // `from` is inside; the answer lies between from and to.
    if (inside(to)) return to;
    let a = from;
    let b = to;
    while (Math.abs(b - a) > 1) {
      const m = Math.trunc((a + b) / 2);
      if (inside(m)) a = m;
      else b = m;
    }
    return a;
  };
  return { lo: edge(mode, 0), hi: edge(mode, n) };
}
