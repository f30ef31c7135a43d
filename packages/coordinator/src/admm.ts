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
  /** Stopping tolerances in the form of Boyd et al. 2011, eq. 3.12. */
  tolerance: { abs: number; rel: number };
}

export interface RoundStats {
  primal: number;
  dual: number;
  epsPrimal: number;
  epsDual: number;
  /** rho used in this round. */
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
 * Both z-updates separate into one scalar problem per sample, solved to full precision
 * (Loss.proxInto), warm-started from a first-order prediction of the new solution.
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
  /** sum_m s_m of the last step: the model's training scores. */
  readonly sum: Float64Array;
  private readonly prevSum: Float64Array;
  private readonly prevShares: Float64Array[];
  private readonly prevZ: Float64Array;
  /** Prox points, solutions (t = M zbar or z) and slopes dt/da of the last z-update. */
  private readonly a: Float64Array;
  private readonly aPrev: Float64Array;
  private readonly t: Float64Array;
  private readonly slope: Float64Array;
  private readonly weight: number;

  constructor(readonly opts: AdmmOptions) {
    const n = opts.y.length;
    this.n = n;
    this.rho = opts.rho;
    this.weight = 1 / n;
    this.c = new Float64Array(n);
    this.z = new Float64Array(n);
    this.dualVar = new Float64Array(n);
    this.sum = new Float64Array(n);
    this.prevSum = new Float64Array(n);
    this.prevZ = new Float64Array(n);
    this.a = new Float64Array(n);
    this.aPrev = new Float64Array(n);
    this.t = new Float64Array(n);
    this.slope = new Float64Array(n);
    this.prevShares = Array.from({ length: opts.parties }, () => new Float64Array(n));
  }

  /** One coordinator step after every party pushed its share (from zero shares: the initial step). */
  step(shares: readonly Float64Array[]): RoundStats {
    const { n, opts, sum, prevSum, z, prevZ, a, aPrev, t, slope, weight } = this;
    const M = opts.parties;
    if (shares.length !== M) throw new RangeError(`expected ${M} shares, got ${shares.length}`);
    prevSum.set(sum);
    sum.fill(0);
    for (const s of shares) {
      assertLength('share', s, n);
      for (let i = 0; i < n; i++) sum[i] += s[i];
    }
    prevZ.set(z);
    aPrev.set(a);
    const rho = this.rho;
    const { loss, y } = opts;
    const dual = this.dualVar;
    let primalSq = 0;
    let dualSq = 0;
    let normS = 0;
    let normZ = 0;
    let normDual = 0;
    const exact = opts.variant === 'exact';
    // Prox points: per sample, exact minimises l_i(M zbar) + M rho/2 (zbar - v)^2, i.e. with
    // t = M zbar the prox of l_i with kappa = rho/M at M v; paper minimises
    // l_i(z) - y_i z + rho/2 (z - S)^2, the prox with kappa = rho at S + y_i/rho.
    for (let i = 0; i < n; i++) {
      a[i] = exact ? M * (dual[i] + opts.alpha * (sum[i] / M) + (1 - opts.alpha) * prevZ[i]) : sum[i] + dual[i] / rho;
      t[i] += (a[i] - aPrev[i]) * slope[i];
    }
    loss.proxInto(t, slope, y, a, exact ? rho / M : rho, weight);
    if (exact) {
      for (let i = 0; i < n; i++) {
        z[i] = t[i] / M;
        dual[i] = a[i] / M - z[i];
        const r = sum[i] / M - z[i];
        primalSq += r * r;
        normDual += dual[i] * dual[i];
      }
      primalSq *= M;
      normDual *= rho * rho * M;
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
    } else {
      for (let i = 0; i < n; i++) {
        z[i] = t[i];
        const r = sum[i] - z[i];
        dual[i] += rho * r;
        primalSq += r * r;
        const dz = z[i] - prevZ[i];
        dualSq += dz * dz;
        normS += sum[i] * sum[i];
        normZ += z[i] * z[i];
        normDual += dual[i] * dual[i];
      }
      dualSq *= rho * rho * M;
    }
    for (let m = 0; m < M; m++) this.prevShares[m].set(shares[m]);

    const primal = Math.sqrt(primalSq);
    const dualRes = Math.sqrt(dualSq);
    const dim = exact ? M * n : n;
    const { abs, rel } = opts.tolerance;
    const stats: RoundStats = {
      primal,
      dual: dualRes,
      epsPrimal: Math.sqrt(dim) * abs + rel * Math.sqrt(Math.max(normS, normZ)),
      epsDual: Math.sqrt(dim) * abs + rel * Math.sqrt(normDual),
      rho,
    };
    this.computeBroadcast();
    return stats;
  }

  /**
   * Training objective of the model whose shares the last step received:
   * l(sum_m s_m) + lambda/2 sum_m ||x_m||^2. Separate from `step` so that the coordinator
   * can compute it while the parties work on the next round.
   */
  objective(penaltySq: number): number {
    const { n, sum, opts } = this;
    let f = 0;
    for (let i = 0; i < n; i++) f += opts.loss.value(opts.y[i], sum[i]);
    return f / n + (opts.lambda / 2) * penaltySq;
  }

  private computeBroadcast(): void {
    const { n, c, z, sum, dualVar, rho } = this;
    const M = this.opts.parties;
    if (this.opts.variant === 'exact') for (let i = 0; i < n; i++) c[i] = sum[i] / M - z[i] + dualVar[i];
    else for (let i = 0; i < n; i++) c[i] = sum[i] - z[i] + dualVar[i] / rho;
  }
}
