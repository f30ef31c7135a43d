import { randomFillSync } from 'node:crypto';
import seedrandom from 'seedrandom';

/**
 * Gaussian noise for the privacy mechanisms.
 *
 * Uniform bits: by default from the operating system's CSPRNG (`crypto.randomFillSync`);
 * with a seed, from seedrandom (ARC4), which is predictable by anyone who knows the seed
 * and must only be used for reproducible experiments (`seeded` says so, and the party's
 * log and privacy report repeat it).
 *
 * Uniform to normal: 64 random bits give a double u = (k + 1/2) / 2^53 with k uniform on
 * 53 bits, so u is never 0 or 1; the Box-Muller transform turns two such uniforms into two
 * independent standard normals, sqrt(-2 ln u1) (cos 2 pi u2, sin 2 pi u2). The tail is cut
 * at sqrt(-2 ln 2^-54), about 8.6 standard deviations (probability below 1e-17).
 *
 * Floating point: a sampler built from floating-point operations does not produce every
 * real number, and which doubles can come out of x + noise depends on x; Mironov (2012)
 * showed that this lets an observer tell neighbouring inputs apart for the textbook Laplace
 * sampler. As a mitigation, every released value is rounded to a grid of spacing
 * 2^floor(log2(sigma)) / 2^GRID_BITS (a power of two about a thousandth of sigma): the
 * rounding is post-processing of the Gaussian mechanism, costs a relative error under 1e-3
 * of the noise, and erases the low-order bits that carry the input-dependent pattern. It is
 * a mitigation, not a proof; the principled fix is a discrete Gaussian sampler (Canonne,
 * Kamath and Steinke 2020), noted as future work in docs/privacy.md.
 */
export interface NoiseSource {
  /** True when the noise is predictable (a seeded generator). */
  readonly seeded: boolean;
  /** out[i] += N(0, sigma^2) for every i. */
  addNormal(out: Float64Array, sigma: number): void;
  /** n uniforms (k + 1/2) / 2^53, k uniform on 53 bits: in (0, 1), never 0 or 1. */
  uniforms(n: number): Float64Array;
}

/** Bits below sigma's leading power of two kept in released values. */
export const GRID_BITS = 10;

const TWO_53 = 2 ** 53;

function boxMuller(out: Float64Array, sigma: number, uniforms: (n: number) => Float64Array): void {
  const n = out.length;
  const u = uniforms(n + (n % 2));
  for (let i = 0; i < n; i += 2) {
    const r = sigma * Math.sqrt(-2 * Math.log(u[i]));
    const theta = 2 * Math.PI * u[i + 1];
    out[i] += r * Math.cos(theta);
    if (i + 1 < n) out[i + 1] += r * Math.sin(theta);
  }
}

/** Round every value to the grid 2^(floor(log2 sigma) - GRID_BITS). */
export function snapToGrid(out: Float64Array, sigma: number): void {
  const spacing = 2 ** (Math.floor(Math.log2(sigma)) - GRID_BITS);
  for (let i = 0; i < out.length; i++) out[i] = Math.round(out[i] / spacing) * spacing;
}

/** Noise from the operating system's CSPRNG. */
export function osNoise(): NoiseSource {
  const uniforms = (n: number) => {
    const bits = new Uint32Array(2 * n);
    randomFillSync(bits);
    const u = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const k = bits[2 * i] * 2 ** 21 + (bits[2 * i + 1] >>> 11); // 53 random bits
      u[i] = (k + 0.5) / TWO_53;
    }
    return u;
  };
  return { seeded: false, addNormal: (out, sigma) => boxMuller(out, sigma, uniforms), uniforms };
}

/** Predictable noise from a seed: for reproducible experiments only. */
export function seededNoise(seed: string): NoiseSource {
  const rng = seedrandom(seed);
  const uniforms = (n: number) => {
    const u = new Float64Array(n);
    for (let i = 0; i < n; i++) u[i] = (Math.floor(rng.double() * TWO_53) + 0.5) / TWO_53;
    return u;
  };
  return { seeded: true, addNormal: (out, sigma) => boxMuller(out, sigma, uniforms), uniforms };
}
