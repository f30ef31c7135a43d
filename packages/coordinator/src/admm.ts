import { type Loss, assertLength } from '@admm-share/core';
import type { Variant } from '@admm-share/protocol';
import { Anderson, type AndersonSnapshot, type AndersonStep } from './anderson.js';

/** The ADMM form, from the protocol's VARIANTS table. */
export type { Variant };

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
  /**
   * Anderson acceleration's memory (0: none; exact form only). The accelerated iteration sends
   * each party its own vector (cFor), still one N-vector each way per round.
   */
  anderson?: number;
}

export interface AdmmSnapshot {
  rho: number;
  c: Float64Array;
  z: Float64Array;
  dualVar: Float64Array;
  sum: Float64Array;
  a: Float64Array;
  t: Float64Array;
  slope: Float64Array;
  curvature: Float64Array;
  prevShares: Float64Array[];
  /** With Anderson acceleration: its memory and state (each party's next vector follows from the state and prevShares). */
  anderson?: { memory: number; state: AndersonSnapshot };
}

export interface RoundStats {
  primal: number;
  dual: number;
  epsPrimal: number;
  epsDual: number;
  /** rho used in this round. */
  rho: number;
  /** With Anderson acceleration: what it made of this step (see anderson.ts). */
  acceleration?: AndersonStep;
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
 * (Loss.proxInto), warm-started from a second-order prediction of the new solution.
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
  private readonly prevShares: Float64Array[];
  /**
   * Per sample, for the step's dual residual (their values between steps are not used):
   * exact: zbar - mean(s) before the step, then its change; the new zbar - mean(s).
   * paper: z before the step.
   */
  private readonly gap: Float64Array;
  private readonly offset: Float64Array;
  /** Prox points, solutions (t = M zbar or z) and slopes dt/da of the last z-update. */
  private readonly a: Float64Array;
  private readonly t: Float64Array;
  private readonly slope: Float64Array;
  private readonly curvature: Float64Array;
  private readonly weight: number;
  /**
   * Anderson acceleration of the round as a fixed-point map of the state v = (w_1..w_M, zbar, u),
   * w_m = s_m - c being party m's target (RidgeXUpdate): every next round depends on v alone.
   * `packed` holds F(v) after a step; `cs[m]` is what party m gets so that its target is the
   * accelerated w_m (w = released - c at the party; the coordinator knows what was released).
   */
  private readonly anderson: Anderson | undefined;
  private readonly packed: Float64Array;
  private readonly cs: Float64Array[];

  constructor(readonly opts: AdmmOptions) {
    const n = opts.y.length;
    this.n = n;
    this.rho = opts.rho;
    this.weight = 1 / n;
    this.c = new Float64Array(n);
    this.z = new Float64Array(n);
    this.dualVar = new Float64Array(n);
    this.sum = new Float64Array(n);
    this.gap = new Float64Array(n);
    this.offset = new Float64Array(opts.variant === 'exact' ? n : 0);
    this.a = new Float64Array(n);
    this.t = new Float64Array(n);
    this.slope = new Float64Array(n);
    this.curvature = new Float64Array(n);
    this.prevShares = Array.from({ length: opts.parties }, () => new Float64Array(n));
    const memory = opts.anderson ?? 0;
    if (memory > 0 && opts.variant !== 'exact') throw new RangeError('Anderson acceleration is for the exact sharing form');
    const dim = (opts.parties + 2) * n;
    this.anderson = memory > 0 ? new Anderson(dim, memory) : undefined;
    this.packed = this.anderson ? this.anderson.input : new Float64Array(0);
    this.cs = this.anderson ? Array.from({ length: opts.parties }, () => new Float64Array(n)) : [];
  }

  /** What party m is sent for the next round: c, or its own vector under Anderson acceleration. */
  cFor(m: number): Float64Array {
    return this.anderson ? this.cs[m] : this.c;
  }

  /** Whether each party gets its own vector (Anderson acceleration). */
  get accelerated(): boolean {
    return this.anderson !== undefined;
  }

  /** Extrapolated points kept and rejected so far (undefined without acceleration). */
  get accelerationCounts(): { extrapolated: number; rejected: number } | undefined {
    return this.anderson ? { ...this.anderson.counts } : undefined;
  }

  /**
   * One coordinator step after every party pushed its share. `initial`: the step from zero
   * shares before round 1; Anderson acceleration starts its memory after it (the jump from
   * the zero state says little about the iteration; measured, docs/rho.md).
   */
  step(shares: readonly Float64Array[], initial = false): RoundStats {
    const { n, opts, sum, gap, offset, z, a, t, slope, curvature, weight, dualVar: dual, c, prevShares } = this;
    const M = opts.parties;
    if (shares.length !== M) throw new RangeError(`expected ${M} shares, got ${shares.length}`);
    for (const s of shares) assertLength('share', s, n);
    const rho = this.rho;
    const exact = opts.variant === 'exact';
    const alpha = opts.alpha;
    const invM = 1 / M;
    // The loops that touch every share go one party at a time: with a loop over the parties
    // inside the loop over samples, a step at a million rows took a fifth longer (docs/scaling.md).
    // Pass 0: the sum of the shares, and what the dual residual needs of the step before
    // (exact: zbar - mean(s); paper: z).
    for (let m = 0; m < M; m++) {
      const s = shares[m];
      if (m > 0) for (let i = 0; i < n; i++) sum[i] += s[i];
      else if (exact)
        for (let i = 0; i < n; i++) {
          gap[i] = z[i] - sum[i] * invM;
          sum[i] = s[i];
        }
      else {
        gap.set(z);
        sum.set(s);
      }
    }
    // Pass 1: the prox points. Per sample, exact minimises l_i(M zbar) + M rho/2 (zbar - v)^2,
    // i.e. with t = M zbar the prox of l_i with kappa = rho/M at M v; paper minimises
    // l_i(z) - y_i z + rho/2 (z - S)^2, the prox with kappa = rho at S + y_i/rho. The warm
    // start is the last solution moved along its slope and curvature.
    for (let i = 0; i < n; i++) {
      const S = sum[i];
      const ai = exact ? M * (dual[i] + alpha * S * invM + (1 - alpha) * z[i]) : S + dual[i] / rho;
      const da = ai - a[i];
      t[i] += da * (slope[i] + 0.5 * da * curvature[i]);
      a[i] = ai;
    }
    opts.loss.proxInto(t, slope, curvature, opts.y, a, exact ? rho * invM : rho, weight);
    // Pass 2: z, dual, broadcast vector, residuals and their scales.
    let primalSq = 0;
    let dualSq = 0;
    let normS = 0;
    let normZ = 0;
    let normDual = 0;
    for (let i = 0; i < n; i++) {
      const S = sum[i];
      if (exact) {
        const zi = t[i] * invM;
        z[i] = zi;
        const ui = a[i] * invM - zi; // u + mean^ - zbar
        dual[i] = ui;
        const mean = S * invM;
        c[i] = mean - zi + ui;
        primalSq += (mean - zi) * (mean - zi);
        normDual += ui * ui;
        offset[i] = zi - mean;
        gap[i] = zi - mean - gap[i];
      } else {
        const zi = t[i];
        z[i] = zi;
        const r = S - zi;
        const yi = dual[i] + rho * r;
        dual[i] = yi;
        c[i] = r + yi / rho;
        primalSq += r * r;
        const dz = zi - gap[i];
        dualSq += dz * dz;
        normS += S * S;
        normZ += zi * zi;
        normDual += yi * yi;
      }
    }
    // Pass 3, party by party: exact's dual residual, rho ||z_m^new - z_m^old|| over parties,
    // z_m = s_m + zbar - mean(s) (so z_m's change is s_m's plus gap's), and the norms of s_m
    // and z_m; every share becomes the last one.
    for (let m = 0; m < M; m++) {
      const s = shares[m];
      const old = prevShares[m];
      if (exact)
        for (let i = 0; i < n; i++) {
          const si = s[i];
          const dz = si - old[i] + gap[i];
          dualSq += dz * dz;
          normS += si * si;
          const zm = si + offset[i];
          normZ += zm * zm;
          old[i] = si;
        }
      else old.set(s);
    }
    if (exact) {
      primalSq *= M;
      normDual *= rho * rho * M;
      dualSq *= rho * rho;
    } else dualSq *= rho * rho * M;

    const dim = exact ? M * n : n;
    const { abs, rel } = opts.tolerance;
    return {
      primal: Math.sqrt(primalSq),
      dual: Math.sqrt(dualSq),
      epsPrimal: Math.sqrt(dim) * abs + rel * Math.sqrt(Math.max(normS, normZ)),
      epsDual: Math.sqrt(dim) * abs + rel * Math.sqrt(normDual),
      rho,
      ...(this.anderson ? { acceleration: this.accelerate(shares, initial) } : {}),
    };
  }

  /** F(v) from the step just taken, handed to Anderson; the next z, u and each party's vector from its point. */
  private accelerate(shares: readonly Float64Array[], initial: boolean): AndersonStep {
    const { n, c, z, dualVar, packed } = this;
    const anderson = this.anderson!;
    const M = shares.length;
    for (let m = 0; m < M; m++) {
      const s = shares[m];
      const off = m * n;
      for (let i = 0; i < n; i++) packed[off + i] = s[i] - c[i];
    }
    packed.set(z, M * n);
    packed.set(dualVar, (M + 1) * n);
    let step: AndersonStep = 'plain';
    if (initial) anderson.restart(packed);
    else step = anderson.next(packed);
    this.unpack(shares);
    return step;
  }

  /** z, u and each party's vector from Anderson's point: party m's target released_m - c_m is the point's w_m. */
  private unpack(shares: readonly Float64Array[]): void {
    const { n, z, dualVar, cs } = this;
    const M = shares.length;
    const p = this.anderson!.point;
    z.set(p.subarray(M * n, (M + 1) * n));
    dualVar.set(p.subarray((M + 1) * n));
    for (let m = 0; m < M; m++) {
      const s = shares[m];
      const out = cs[m];
      const off = m * n;
      for (let i = 0; i < n; i++) out[i] = s[i] - p[off + i];
    }
  }

  /** Everything the next steps depend on, for a checkpoint. */
  snapshot(): AdmmSnapshot {
    const { rho, c, z, dualVar, sum, a, t, slope, curvature, prevShares } = this;
    return { rho, c, z, dualVar, sum, a, t, slope, curvature, prevShares, ...(this.anderson ? { anderson: { memory: this.anderson.memory, state: this.anderson.snapshot() } } : {}) };
  }

  /** Continue from a snapshot of the same problem (same N and parties). */
  restore(snap: AdmmSnapshot): void {
    if (snap.c.length !== this.n || snap.prevShares.length !== this.opts.parties) throw new RangeError('checkpoint does not match this job (N or number of parties)');
    this.rho = snap.rho;
    for (const key of ['c', 'z', 'dualVar', 'sum', 'a', 't', 'slope', 'curvature'] as const) this[key].set(snap[key]);
    snap.prevShares.forEach((s, m) => this.prevShares[m].set(s));
    if (Boolean(snap.anderson) !== Boolean(this.anderson)) throw new RangeError(`checkpoint was written ${snap.anderson ? 'with' : 'without'} Anderson acceleration; this job runs ${this.anderson ? 'with' : 'without'} it`);
    if (snap.anderson && this.anderson) {
      this.anderson.restore(snap.anderson.state);
      // The last step's shares are prevShares; the same arithmetic as after that step.
      this.unpack(this.prevShares);
    }
  }

  /** Ends Anderson acceleration's worker thread, if it has one (a large state; anderson.ts). */
  close(): void {
    this.anderson?.close();
  }

  /** Party m's share as of the last step (what a rejoining party resumes from). */
  lastShare(m: number): Float64Array {
    return this.prevShares[m];
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
}
