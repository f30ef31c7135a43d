/**
 * Randomized response on binary labels (Warner 1965), the mechanism of label differential
 * privacy at the coordinator: each label is flipped independently with probability
 * p = 1 / (1 + e^epsilon). For any two label vectors that differ in one label, every outcome
 * has probability ratio at most (1 - p) / p = e^epsilon, so the flipped labels are
 * epsilon-label-DP, and so is everything computed from them alone (post-processing).
 */
import type { NoiseSource } from './noise.js';

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
