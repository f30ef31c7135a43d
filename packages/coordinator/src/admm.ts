import { type Loss, assertLength } from '@admm-share/core';

export type Variant = 'exact' | 'paper';

export interface AdmmOptions {
  variant: Variant;
  loss: Loss;
  /** Training labels in the aligned row order. */
  y: Float64Array;
  /** Number of parties M. */
  parties: number;
  lambda: number;
  /** Initial rho. */
  rho: number;
  /** Over-relaxation for the exact form (1 = none; Boyd et al. suggest 1.5-1.8). */
  alpha: number;
  /** Residual balancing (Boyd et al. 2011, 3.4.1): rho *= tau when one residual exceeds mu times the other. */
  adaptive: { mu: number; tau: number; untilRound: number } | undefined;
  /** Stopping tolerances in the form of Boyd et al. 2011, eq. 3.12. */
  tolerance: { abs: number; rel: number };
}

export interface RoundStats {
  objective: number;
  primal: number;
  dual: number;
  epsPrimal: number;
  epsDual: number;
  /** rho for the next round. */
  rho: number;
}

/**
 * Coordinator side of ADMM sharing: z-update, dual update, residuals, and the one
 * N-vector c every party needs for its next x-update (w = s_m - c, see RidgeXUpdate).
 *
 * `exact`: the sharing problem as a two-block ADMM (Boyd et al. 2011, section 7.3):
 *   zbar = argmin l(M zbar) + M rho/2 ||zbar - u - mean(s)^||^2,  u += mean(s)^ - zbar,
 *   c = mean(s) - zbar + u, where mean(s)^ = alpha mean(s) + (1 - alpha) zbar_old.
 * `paper`: Algorithm 1 of Hu et al. (eqs. 8-9), a Jacobi multi-block ADMM:
 *   z = argmin l(z) - <y, z> + rho/2 ||sum(s) - z||^2,  y += rho (sum(s) - z),
 *   c = sum(s) - z + y/rho.
 * Both z-updates separate into one scalar problem per sample, solved to full precision.
 */
export class AdmmCoordinator {
  readonly n: number;
  rho: number;
  /** The vector to broadcast before the next round. */
  readonly c: Float64Array;
  /** zbar (exact) or z (paper). */
  readonly z: Float64Array;
  /** Scaled dual u (exact) or the dual y (paper). */
  readonly dualVar: Float64Array;
  private readonly sum: Float64Array;
  private readonly prevSum: Float64Array;
  private readonly prevShares: Float64Array[];
  private readonly prevZ: Float64Array;
  private readonly weight: number;

  constructor(readonly opts: AdmmOptions) {
    this.n = opts.y.length;
    this.rho = opts.rho;
    this.weight = 1 / this.n;
    this.c = new Float64Array(this.n);
    this.z = new Float64Array(this.n);
    this.dualVar = new Float64Array(this.n);
    this.sum = new Float64Array(this.n);
    this.prevSum = new Float64Array(this.n);
    this.prevZ = new Float64Array(this.n);
    this.prevShares = Array.from({ length: opts.parties }, () => new Float64Array(this.n));
  }

  /**
   * One coordinator step after every party pushed its share. `penaltySq` is
   * sum_m ||x_m||^2 as reported by the parties.
   */
  step(shares: readonly Float64Array[], penaltySq: number, round: number): RoundStats {
    const { n, opts, sum, prevSum, z, prevZ, weight } = this;
    const M = opts.parties;
    if (shares.length !== M) throw new RangeError(`expected ${M} shares, got ${shares.length}`);
    sum.fill(0);
    for (const s of shares) {
      assertLength('share', s, n);
      for (let i = 0; i < n; i++) sum[i] += s[i];
    }
    prevZ.set(z);
    const rho = this.rho;
    const { loss, y } = opts;
    let primalSq = 0;
    let dualSq = 0;
    let normS = 0;
    let normZ = 0;
    let normDual = 0;
    if (opts.variant === 'exact') {
      const u = this.dualVar;
      const alpha = opts.alpha;
      // Per sample: minimise l_i(M zbar) + M rho/2 (zbar - v)^2; with t = M zbar this is
      // prox of l_i with kappa = rho / M at M v.
      const kappa = rho / M;
      for (let i = 0; i < n; i++) {
        const mean = sum[i] / M;
        const relaxed = alpha * mean + (1 - alpha) * prevZ[i];
        const v = u[i] + relaxed;
        const t = loss.prox(y[i], M * v, kappa, weight, M * prevZ[i]);
        z[i] = t / M;
        u[i] = v - z[i];
        const r = mean - z[i];
        primalSq += r * r;
      }
      primalSq *= M;
      // Dual residual: rho * ||z_m^new - z_m^old|| over parties, z_m = s_m + zbar - mean(s).
      for (let m = 0; m < M; m++) {
        const s = shares[m];
        const old = this.prevShares[m];
        for (let i = 0; i < n; i++) {
          const zi = s[i] + z[i] - sum[i] / M;
          const dz = zi - (old[i] + prevZ[i] - prevSum[i] / M);
          dualSq += dz * dz;
          normS += s[i] * s[i];
          normZ += zi * zi;
        }
      }
      dualSq *= rho * rho;
      for (let i = 0; i < n; i++) normDual += u[i] * u[i];
      normDual = rho * rho * M * normDual;
    } else {
      const yv = this.dualVar;
      for (let i = 0; i < n; i++) {
        const S = sum[i];
        // minimise l_i(z) - y_i z + rho/2 (z - S)^2 = prox of l_i with kappa = rho at S + y_i/rho
        z[i] = loss.prox(y[i], S + yv[i] / rho, rho, weight, prevZ[i]);
        const r = S - z[i];
        yv[i] += rho * r;
        primalSq += r * r;
        const dz = z[i] - prevZ[i];
        dualSq += dz * dz;
        normS += S * S;
        normZ += z[i] * z[i];
        normDual += yv[i] * yv[i];
      }
      dualSq *= rho * rho * M;
    }
    for (let m = 0; m < M; m++) this.prevShares[m].set(shares[m]);
    prevSum.set(sum);

    let objective = 0;
    for (let i = 0; i < n; i++) objective += loss.value(y[i], sum[i]);
    objective = objective / n + (opts.lambda / 2) * penaltySq;

    const primal = Math.sqrt(primalSq);
    const dual = Math.sqrt(dualSq);
    const dim = opts.variant === 'exact' ? M * n : n;
    const stats: RoundStats = {
      objective,
      primal,
      dual,
      epsPrimal: Math.sqrt(dim) * opts.tolerance.abs + opts.tolerance.rel * Math.sqrt(Math.max(normS, normZ)),
      epsDual: Math.sqrt(dim) * opts.tolerance.abs + opts.tolerance.rel * Math.sqrt(normDual),
      rho,
    };
    // Balance the residuals relative to their tolerances: the raw residuals are in
    // different units (scores vs. loss gradients), the normalised ones are not.
    this.adapt(primal / stats.epsPrimal, dual / stats.epsDual, round);
    stats.rho = this.rho;
    this.computeBroadcast();
    return stats;
  }

  private adapt(primal: number, dual: number, round: number): void {
    const a = this.opts.adaptive;
    if (!a || round > a.untilRound) return;
    let factor = 1;
    if (primal > a.mu * dual) factor = a.tau;
    else if (dual > a.mu * primal) factor = 1 / a.tau;
    if (factor === 1) return;
    this.rho *= factor;
    // The scaled dual u = y / rho must be rescaled; the paper form keeps y unscaled.
    if (this.opts.variant === 'exact') for (let i = 0; i < this.n; i++) this.dualVar[i] /= factor;
  }

  private computeBroadcast(): void {
    const { n, c, z, sum, dualVar, rho } = this;
    const M = this.opts.parties;
    if (this.opts.variant === 'exact') for (let i = 0; i < n; i++) c[i] = sum[i] / M - z[i] + dualVar[i];
    else for (let i = 0; i < n; i++) c[i] = sum[i] - z[i] + dualVar[i] / rho;
  }
}

