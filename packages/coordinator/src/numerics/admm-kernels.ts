/*
 * The coordinator step's passes over the samples (admm-step.ts), each over a range [from, to) of
 * them, so that two threads (a team, StepTeam) can share one step. Every value a pass writes at
 * sample i depends on that sample alone; only the residuals' sums cross samples, and they go
 * to `out` (below) for the caller to add up.
 */
import { type Loss, type VectorKernels, type VectorMemory, flipCorrection, logisticProxParams } from '@admm-share/core/team';
import { claimChunks } from './chunks.js';

/** Where stepRange puts its sums. */
export const PRIMAL_SQ = 0;
export const DUAL_SQ = 1;
export const NORM_S = 2;
export const NORM_Z = 3;
export const NORM_DUAL = 4;
/** The exponentials the z-update computed (a Newton step each, Loss.proxInto). */
export const EXPS = 5;
export const STEP_SUMS = 6;

/** The per-sample arrays of a step (AdmmStep's fields). */
export interface StepArrays {
  /** This step's shares, and the last step's (which become this step's). */
  shares: Float64Array[];
  prevShares: Float64Array[];
  y: Float64Array;
  sum: Float64Array;
  gap: Float64Array;
  offset: Float64Array;
  z: Float64Array;
  dual: Float64Array;
  a: Float64Array;
  t: Float64Array;
  slope: Float64Array;
  curvature: Float64Array;
  c: Float64Array;
  /** With the logistic kernels: each sample's loss at the shares' sum (lossRange; else empty), and the memory y, sum, a, t, slope, curvature and it are views of. */
  losses: Float64Array;
  memory: VectorMemory | undefined;
  /** Whether, with the logistic kernels, the exact form's passes run in WebAssembly too (exactInKernels): every array they touch, F(v) too, in `memory`. */
  passes: boolean;
  /** With Anderson acceleration, F(v) = (w_1..w_M, zbar, u), w_m = s_m - c (else empty); its next point; each party's vector. */
  packed: Float64Array;
  point: Float64Array;
  cs: Float64Array[];
}

export interface StepParams {
  exact: boolean;
  rho: number;
  alpha: number;
  weight: number;
}

/**
 * Passes 0 to 3 of a step over the samples [from, to): the sum of the shares, the prox points,
 * the z-update (loss.proxInto), z, the dual, c and the residuals' sums (to out[PRIMAL_SQ..]);
 * with Anderson acceleration also F(v) into `packed`. See AdmmStep.step for the maths.
 * With `k` (the logistic loss; every array, `out` too, in k's memory: StepArrays.memory) the
 * z-update runs in WebAssembly, and for the exact form every pass (exactInKernels), to the same
 * bits as this TypeScript.
 */
export function stepRange(st: StepArrays, loss: Loss, p: StepParams, from: number, to: number, out: Float64Array, k: VectorKernels | undefined): void {
  if (k && p.exact && st.passes) return exactInKernels(st, loss, p, from, to, out, k);
  const { shares, prevShares, y, sum, gap, offset, z, dual, a, t, slope, curvature, c, packed } = st;
  const { exact, rho, alpha, weight } = p;
  const M = shares.length;
  const n = sum.length;
  const invM = 1 / M;
  const pack = packed.length > 0;
  // The loops that touch every share go one party at a time: with a loop over the parties
  // inside the loop over samples, a step at a million rows took a fifth longer (docs/scaling.md).
  // Pass 0: the sum of the shares, and what the dual residual needs of the step before
  // (exact: zbar - mean(s); paper: z).
  for (let m = 0; m < M; m++) {
    const s = shares[m];
    if (m > 0) for (let i = from; i < to; i++) sum[i] += s[i];
    else if (exact)
      for (let i = from; i < to; i++) {
        gap[i] = z[i] - sum[i] * invM;
        sum[i] = s[i];
      }
    else
      for (let i = from; i < to; i++) {
        gap[i] = z[i];
        sum[i] = s[i];
      }
  }
  // Pass 1: the prox points. Per sample, exact minimises l_i(M zbar) + M rho/2 (zbar - v)^2,
  // i.e. with t = M zbar the prox of l_i with kappa = rho/M at M v; paper minimises
  // l_i(z) - y_i z + rho/2 (z - S)^2, the prox with kappa = rho at S + y_i/rho. The warm
  // start is the last solution moved along its slope and curvature.
  for (let i = from; i < to; i++) {
    const S = sum[i];
    const ai = exact ? M * (dual[i] + alpha * S * invM + (1 - alpha) * z[i]) : S + dual[i] / rho;
    const da = ai - a[i];
    t[i] += da * (slope[i] + 0.5 * da * curvature[i]);
    a[i] = ai;
  }
  const kappa = exact ? rho * invM : rho;
  const exps = k ? proxInKernels(st, loss, kappa, weight, from, to, k) : loss.proxInto(t.subarray(from, to), slope.subarray(from, to), curvature.subarray(from, to), y.subarray(from, to), a.subarray(from, to), kappa, weight);
  // Pass 2: z, dual, broadcast vector, residuals and their scales.
  let primalSq = 0;
  let dualSq = 0;
  let normS = 0;
  let normZ = 0;
  let normDual = 0;
  const zAt = M * n;
  const uAt = (M + 1) * n;
  for (let i = from; i < to; i++) {
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
      if (pack) {
        packed[zAt + i] = zi;
        packed[uAt + i] = ui;
      }
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
  // and z_m; every share becomes the last one; with acceleration, w_m = s_m - c.
  for (let m = 0; m < M; m++) {
    const s = shares[m];
    const old = prevShares[m];
    const off = m * n;
    if (exact)
      for (let i = from; i < to; i++) {
        const si = s[i];
        const dz = si - old[i] + gap[i];
        dualSq += dz * dz;
        normS += si * si;
        const zm = si + offset[i];
        normZ += zm * zm;
        old[i] = si;
        if (pack) packed[off + i] = si - c[i];
      }
    else old.set(s.subarray(from, to), from);
  }
  out[PRIMAL_SQ] = primalSq;
  out[DUAL_SQ] = dualSq;
  out[NORM_S] = normS;
  out[NORM_Z] = normZ;
  out[NORM_DUAL] = normDual;
  out[EXPS] = exps;
}

/**
 * The logistic prox of a step over [from, to) in WebAssembly (as loss.proxInto); returns its
 * exponentials. Class weights scale the loss's weight per class (the kernel takes each class's
 * constants); without them, both classes get the same constants, the same bits as before.
 */
function proxInKernels(st: StepArrays, loss: Loss, kappa: number, weight: number, from: number, to: number, k: VectorKernels): number {
  const c = flipCorrection(loss.labelFlip ?? 0);
  const w = loss.classWeights;
  const neg = logisticProxParams(kappa, weight * (w?.negative ?? 1), c);
  const pos = w ? logisticProxParams(kappa, weight * w.positive, c) : neg;
  return k.logisticProx(from, to, st.t.byteOffset, st.slope.byteOffset, st.curvature.byteOffset, st.y.byteOffset, st.a.byteOffset, neg.R, neg.shift, neg.errScale, pos.R, pos.shift, pos.errScale);
}

/**
 * stepRange for the exact form, every pass a kernel of core's kernels.wat (step*): the same
 * operations on each sample, and the same sums, sample by sample, as the TypeScript above. On
 * a9a they take about 0.5-0.6 ms a step in one thread, against 0.8-0.9 ms in V8 (25 ns a
 * sample, whether the arrays are in the cache or not).
 */
function exactInKernels(st: StepArrays, loss: Loss, p: StepParams, from: number, to: number, out: Float64Array, k: VectorKernels): void {
  const { shares, prevShares, sum, gap, offset, z, dual, a, t, slope, curvature, c, packed } = st;
  const M = shares.length;
  const n = sum.length;
  const invM = 1 / M;
  const pack = packed.length > 0 ? 1 : 0;
  const at = (m: number) => (pack ? packed.byteOffset + 8 * m * n : 0);
  k.stepFirst(from, to, shares[0].byteOffset, sum.byteOffset, gap.byteOffset, z.byteOffset, invM);
  for (let m = 1; m < M; m++) k.stepAdd(from, to, shares[m].byteOffset, sum.byteOffset);
  k.stepPoints(from, to, sum.byteOffset, dual.byteOffset, z.byteOffset, a.byteOffset, t.byteOffset, slope.byteOffset, curvature.byteOffset, M, p.alpha, 1 - p.alpha, invM);
  out[EXPS] = proxInKernels(st, loss, p.rho * invM, p.weight, from, to, k);
  k.stepUpdate(from, to, sum.byteOffset, t.byteOffset, a.byteOffset, z.byteOffset, dual.byteOffset, c.byteOffset, offset.byteOffset, gap.byteOffset, at(M), at(M + 1), pack, invM, out.byteOffset);
  out[DUAL_SQ] = 0;
  out[NORM_S] = 0;
  out[NORM_Z] = 0;
  for (let m = 0; m < M; m++) k.stepParty(from, to, shares[m].byteOffset, prevShares[m].byteOffset, gap.byteOffset, offset.byteOffset, c.byteOffset, at(m), pack, out.byteOffset);
}

/**
 * The loss at the shares' sum over the samples [from, to), added sample by sample: the
 * objective's loss term, before its weight. With `k` (as in stepRange) each sample's loss is
 * computed in WebAssembly (into `losses`), to the same bits as loss.value (with class weights,
 * times its class's weight here, as loss.value does).
 */
export function lossRange(st: StepArrays, loss: Loss, from: number, to: number, k: VectorKernels | undefined): number {
  const { y, sum, losses } = st;
  let f = 0;
  if (k) {
    k.logisticLoss(from, to, y.byteOffset, sum.byteOffset, flipCorrection(loss.labelFlip ?? 0), losses.byteOffset);
    const w = loss.classWeights;
    if (w) for (let i = from; i < to; i++) f += (y[i] > 0 ? w.positive : w.negative) * losses[i];
    else for (let i = from; i < to; i++) f += losses[i];
  } else for (let i = from; i < to; i++) f += loss.value(y[i], sum[i]);
  return f;
}

/**
 * Samples in a chunk of a step's passes. A step goes over the samples chunk by chunk: every
 * pass over one chunk, then the next (a chunk's arrays stay in the cache between its passes).
 * In a team, each thread takes the next chunk left (claimChunks, chunks.ts).
 */
export const CHUNK = 2048;

/** stepRange over the chunks left (claimChunks); chunk j's sums go to sums[j * STEP_SUMS...]. */
export function stepChunks(st: StepArrays, loss: Loss, p: StepParams, next: Int32Array, sums: Float64Array, k: VectorKernels | undefined): void {
  claimChunks(next, st.sum.length, CHUNK, (from, to, j) => stepRange(st, loss, p, from, to, sums.subarray(j * STEP_SUMS, (j + 1) * STEP_SUMS), k));
}

/** lossRange over the chunks left (claimChunks): chunk j's sum to sums[j] (the chunks are then added in order). */
export function lossChunks(st: StepArrays, loss: Loss, next: Int32Array, sums: Float64Array, k: VectorKernels | undefined): void {
  claimChunks(next, st.sum.length, CHUNK, (from, to, j) => {
    sums[j] = lossRange(st, loss, from, to, k);
  });
}

/** unpackRange over the chunks left (claimChunks): chunk j's check to checks[j]. */
export function unpackChunks(st: StepArrays, next: Int32Array, checks: Float64Array): void {
  claimChunks(next, st.sum.length, CHUNK, (from, to, j) => {
    checks[j] = unpackRange(st, from, to);
  });
}

/**
 * z, u and each party's vector from Anderson's next point over [from, to): party m's target
 * released_m - c_m is the point's w_m, and released_m is its last share (prevShares). Returns
 * the sum of v - v over the parties' vectors' values v: 0 when all are finite, else NaN (the
 * check that nothing non-finite is sent, done while the values are at hand).
 */
export function unpackRange(st: StepArrays, from: number, to: number): number {
  const { prevShares, z, dual, point, cs } = st;
  const M = prevShares.length;
  const n = z.length;
  z.set(point.subarray(M * n + from, M * n + to), from);
  dual.set(point.subarray((M + 1) * n + from, (M + 1) * n + to), from);
  // Four sums of v - v in flight: with one, this pass waited on the adder at every value.
  let c0 = 0;
  let c1 = 0;
  let c2 = 0;
  let c3 = 0;
  for (let m = 0; m < M; m++) {
    const s = prevShares[m];
    const out = cs[m];
    const off = m * n;
    let i = from;
    for (; i + 3 < to; i += 4) {
      const v0 = s[i] - point[off + i];
      const v1 = s[i + 1] - point[off + i + 1];
      const v2 = s[i + 2] - point[off + i + 2];
      const v3 = s[i + 3] - point[off + i + 3];
      out[i] = v0;
      out[i + 1] = v1;
      out[i + 2] = v2;
      out[i + 3] = v3;
      c0 += v0 - v0;
      c1 += v1 - v1;
      c2 += v2 - v2;
      c3 += v3 - v3;
    }
    for (; i < to; i++) {
      const v = s[i] - point[off + i];
      out[i] = v;
      c0 += v - v;
    }
  }
  return c0 + c1 + (c2 + c3);
}
