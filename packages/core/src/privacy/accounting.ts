import erfc from '@stdlib/math-base-special-erfc';
import erfcx from '@stdlib/math-base-special-erfcx';
import { ConfigError } from '../errors.js';

/**
 * Privacy accounting for T rounds of the Gaussian mechanism with L2 sensitivity Delta and
 * noise standard deviation sigma, in both directions (sigma for a target epsilon, epsilon
 * spent for a sigma). See docs/privacy.md.
 *
 * - `exact`: the T-fold composition is exactly mu-GDP with mu = sqrt(T) Delta / sigma
 *   (Dong, Roth and Su 2019), and mu-GDP is (eps, delta(eps))-DP for every eps with
 *   delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Balle and Wang 2018),
 *   which is tight.
 * - `rdp`: zCDP / Renyi accounting, rho = T Delta^2 / (2 sigma^2), eps = rho + 2 sqrt(rho ln(1/delta));
 *   valid, looser.
 * - `advanced`: the paper's accounting (Corollary 1): each round is (eps0, delta0)-DP with
 *   sigma = sqrt(2 ln(1.25/delta0)) Delta / eps0, composed by the advanced composition
 *   theorem, eps = sqrt(2 T ln(1/delta')) eps0 + T eps0 (e^eps0 - 1), with the total delta
 *   split as delta0 = delta / (2T), delta' = delta / 2. Loosest; also needs eps0 <= 1 for
 *   the per-round Gaussian mechanism bound.
 */
export const ACCOUNTANTS = ['exact', 'rdp', 'advanced'] as const;
export type Accountant = (typeof ACCOUNTANTS)[number];

export interface Calibration {
  epsilon: number;
  delta: number;
  rounds: number;
  sensitivity: number;
  method?: Accountant;
}

export interface Spend {
  sigma: number;
  delta: number;
  rounds: number;
  sensitivity: number;
  method?: Accountant;
}

const SQRT2 = Math.SQRT2;

/** Standard normal CDF, accurate in relative terms far into the lower tail. */
export function normalCdf(x: number): number {
  return 0.5 * erfc(-x / SQRT2);
}

/**
 * delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2). The second term
 * is formed as erfcx(a/sqrt2) exp(eps - a^2/2) / 2 with a = eps/mu + mu/2 so that e^eps
 * never overflows.
 */
export function gdpDelta(epsilon: number, mu: number): number {
  if (!(mu > 0)) return 0;
  const a = epsilon / mu + mu / 2;
  const first = normalCdf(-epsilon / mu + mu / 2);
  const second = 0.5 * erfcx(a / SQRT2) * Math.exp(epsilon - (a * a) / 2);
  return Math.max(0, first - second);
}

/** Find x in [lo, hi] with f(x) = 0 for f increasing (or decreasing, given `sign` = -1), to full precision. */
function bisect(f: (x: number) => number, lo: number, hi: number): number {
  for (let i = 0; i < 2000; i++) {
    const mid = 0.5 * (lo + hi);
    if (mid === lo || mid === hi) return mid;
    if (f(mid) > 0) hi = mid;
    else lo = mid;
  }
  return 0.5 * (lo + hi);
}

/** Grow `hi` until f(hi) > 0 (f increasing). */
function bracketAbove(f: (x: number) => number, lo: number, hi: number): [number, number] {
  while (f(hi) <= 0) {
    lo = hi;
    hi *= 2;
    if (!Number.isFinite(hi)) throw new RangeError('no solution: the function never changes sign');
  }
  return [lo, hi];
}

function check(name: string, v: number, positive = true): void {
  if (!(Number.isFinite(v) && (positive ? v > 0 : v >= 0))) throw new ConfigError(`${name} must be a ${positive ? 'positive' : 'non-negative'} number, got ${v}`);
}

function checkDelta(delta: number): void {
  if (!(delta > 0 && delta < 1)) throw new ConfigError(`delta must be in (0, 1), got ${delta}`);
}

/** mu of mu-GDP that gives exactly (epsilon, delta). */
export function gdpMuFor(epsilon: number, delta: number): number {
  // delta(eps; mu) increases with mu.
  const f = (mu: number) => gdpDelta(epsilon, mu) - delta;
  const [lo, hi] = bracketAbove(f, 0, 1);
  return bisect(f, lo, hi);
}

/** Epsilon of mu-GDP at the given delta. */
export function gdpEpsilonFor(mu: number, delta: number): number {
  // delta(eps; mu) decreases with eps.
  const f = (eps: number) => delta - gdpDelta(eps, mu);
  if (f(0) >= 0) return 0;
  const [lo, hi] = bracketAbove(f, 0, 1);
  return bisect(f, lo, hi);
}

/** Per-round epsilon of the paper's advanced composition for a total epsilon over T rounds. */
function advancedPerRound(epsilon: number, delta: number, rounds: number): number {
  const c = Math.sqrt(2 * rounds * Math.log(2 / delta));
  const total = (e0: number) => c * e0 + rounds * e0 * Math.expm1(e0) - epsilon;
  const [lo, hi] = bracketAbove(total, 0, 1);
  return bisect(total, lo, hi);
}

/** Noise standard deviation that makes T rounds exactly (epsilon, delta)-DP under `method`. */
export function calibrateSigma(c: Calibration): number {
  check('epsilon', c.epsilon);
  checkDelta(c.delta);
  check('sensitivity', c.sensitivity);
  if (!(Number.isSafeInteger(c.rounds) && c.rounds >= 1)) throw new ConfigError(`rounds must be an integer >= 1, got ${c.rounds}`);
  const T = c.rounds;
  switch (c.method ?? 'exact') {
    case 'exact':
      return (Math.sqrt(T) * c.sensitivity) / gdpMuFor(c.epsilon, c.delta);
    case 'rdp': {
      // eps = rho + 2 sqrt(rho L), L = ln(1/delta): sqrt(rho) = sqrt(L + eps) - sqrt(L).
      const L = Math.log(1 / c.delta);
      const rho = (Math.sqrt(L + c.epsilon) - Math.sqrt(L)) ** 2;
      return c.sensitivity * Math.sqrt(T / (2 * rho));
    }
    case 'advanced': {
      const e0 = advancedPerRound(c.epsilon, c.delta, T);
      const delta0 = c.delta / (2 * T);
      return (Math.sqrt(2 * Math.log(1.25 / delta0)) * c.sensitivity) / e0;
    }
  }
}

/** Epsilon spent by T rounds with noise sigma, at the given delta, under `method`. */
export function accountEpsilon(s: Spend): number {
  check('sigma', s.sigma);
  checkDelta(s.delta);
  check('sensitivity', s.sensitivity, false);
  if (!(Number.isSafeInteger(s.rounds) && s.rounds >= 0)) throw new ConfigError(`rounds must be an integer >= 0, got ${s.rounds}`);
  if (s.rounds === 0 || s.sensitivity === 0) return 0;
  const T = s.rounds;
  switch (s.method ?? 'exact') {
    case 'exact':
      return gdpEpsilonFor((Math.sqrt(T) * s.sensitivity) / s.sigma, s.delta);
    case 'rdp': {
      const rho = (T * s.sensitivity ** 2) / (2 * s.sigma ** 2);
      return rho + 2 * Math.sqrt(rho * Math.log(1 / s.delta));
    }
    case 'advanced': {
      const delta0 = s.delta / (2 * T);
      const e0 = (Math.sqrt(2 * Math.log(1.25 / delta0)) * s.sensitivity) / s.sigma;
      return Math.sqrt(2 * T * Math.log(2 / s.delta)) * e0 + T * e0 * Math.expm1(e0);
    }
  }
}
