import { type Loss, type VectorKernels, type VectorMemory, assertLength, sharedArray, vectorLayout, vectorMemory } from '@admm-share/core';
import type { Variant } from '@admm-share/protocol';
import { CHUNK, DUAL_SQ, EXPS, NORM_DUAL, NORM_S, NORM_Z, PRIMAL_SQ, STEP_SUMS, type StepArrays, lossChunks, stepChunks, unpackChunks } from './admm-kernels.js';
import { Anderson, type AndersonSnapshot, type AndersonStep } from './anderson.js';
import { addChunkSums, chunkCount, teamByDefault } from './chunks.js';
import { StepTeam } from './step-team.js';

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
  /** Whether the step's passes run in a team with a worker thread (default: from TEAM_FROM values of state on a machine of two cores or more; chunks.ts). */
  team?: boolean;
  /**
   * Whether the step runs in WebAssembly with the logistic loss (default true when it is there):
   * false runs the TypeScript twins, 'prox' only the loss and its prox in WebAssembly (what a
   * state too large for one memory with Anderson's gets, stepMemory); the same bits either way
   * (for tests).
   */
  kernels?: boolean | 'prox';
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

/** The step's N-vectors that live in its WebAssembly memory (stepMemory), in their order there; then each party's share and last share, and the chunks' sums. */
const NAMED = ['y', 'sum', 'a', 't', 'slope', 'curvature', 'losses', 'gap', 'offset', 'z', 'dual', 'c'] as const;

interface StepMemory {
  memory: VectorMemory;
  kernels: VectorKernels;
  /** Byte offsets: of each NAMED vector; of party m's share (shares[m]) and last share (prevShares[m]); of the chunks' sums; of Anderson's arrays (anderson.ts), when they are here. */
  at: Record<(typeof NAMED)[number], number>;
  shares: number[];
  prevShares: number[];
  sums: number;
  anderson: number | undefined;
}

/**
 * One WebAssembly memory for the step's kernels (the logistic prox and loss; every pass of the
 * exact form) and Anderson's: every array they read or write, Anderson's `andersonBytes` last.
 * When that is refused (above 2 GiB: about 5e6 rows with two parties, 3.6e6 with four, and
 * Anderson's memory of 5), the step's arrays alone (`anderson` undefined: Anderson takes a
 * memory of its own and the step's passes stay TypeScript); undefined without WebAssembly, or
 * when even that is refused.
 */
function stepMemory(n: number, M: number, sums: number, andersonBytes: number): StepMemory | undefined {
  const lengths = [...NAMED.map(() => 8 * n), ...Array<number>(2 * M).fill(8 * n), 8 * sums];
  const { at, bytes } = vectorLayout(lengths);
  const joint = andersonBytes > 0 ? vectorMemory(bytes + andersonBytes) : undefined;
  const wasm = joint ?? vectorMemory(bytes);
  if (!wasm) return undefined;
  const named = Object.fromEntries(NAMED.map((k, j) => [k, at[j]])) as StepMemory['at'];
  const first = NAMED.length;
  return { ...wasm, at: named, shares: at.slice(first, first + M), prevShares: at.slice(first + M, first + 2 * M), sums: at[first + 2 * M], anderson: joint ? bytes : undefined };
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
export class AdmmStep {
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
  private readonly weight: number;
  /**
   * The per-sample arrays of a step (admm-kernels.ts), among them: prevShares, the last step's
   * shares; gap and offset, for the step's dual residual (their values between steps are not
   * used; exact: zbar - mean(s) before the step, then its change, and the new zbar - mean(s);
   * paper: z before the step); the prox points a, solutions t (M zbar or z), and slopes and
   * curvatures dt/da of the last z-update.
   */
  private readonly arrays: StepArrays;
  /** The WebAssembly memory of the logistic kernels' arrays (stepMemory), and the kernels on it. */
  private readonly kernels: StepMemory | undefined;
  /** The residuals' sums of a step (admm-kernels.ts, PRIMAL_SQ...). */
  private readonly sums = new Float64Array(STEP_SUMS);
  /**
   * The loss at `sum` (the objective's loss term), once summed (loss()). In a team, the worker
   * thread begins it as the step ends (lossBegun), while the main thread checks and sends the
   * next round's vectors: it is not on the way from the shares to those vectors. It is summed
   * chunk by chunk, the chunks' sums (lossSums, taken from lossNext) then added in order.
   */
  private lossSum: number | undefined;
  private lossBegun = false;
  private readonly lossNext: Int32Array;
  private readonly lossSums: Float64Array;
  /** Each chunk's check that the parties' vectors are finite (unpackRange). */
  private readonly checks: Float64Array;
  /** The exponentials the last step's z-update computed (exponentials). */
  private exps = 0;
  /** The next chunk of a step's passes to take, and each chunk's sums (admm-kernels.ts, stepChunks). */
  private readonly next: Int32Array;
  private readonly chunkSums: Float64Array;
  /** The worker thread that takes chunks of each step, on a large state (chunks.ts). */
  private readonly team: StepTeam | undefined;
  /**
   * Anderson acceleration of the round as a fixed-point map of the state v = (w_1..w_M, zbar, u),
   * w_m = s_m - c being party m's target (RidgeXUpdate): every next round depends on v alone.
   * The step packs F(v) into its input (arrays.packed); `arrays.cs[m]` is what party m gets so
   * that its target is the accelerated w_m (w = released - c at the party; the coordinator
   * knows what was released).
   */
  private readonly anderson: Anderson | undefined;

  constructor(readonly opts: AdmmOptions) {
    const n = opts.y.length;
    const M = opts.parties;
    this.n = n;
    this.rho = opts.rho;
    this.weight = 1 / n;
    const memory = opts.anderson ?? 0;
    if (memory > 0 && opts.variant !== 'exact') throw new RangeError('Anderson acceleration is for the exact sharing form');
    const dim = (M + 2) * n;
    const team = opts.team ?? teamByDefault(dim);
    // In a team, every array the worker thread reads or writes is in shared memory.
    const f64 = (len: number) => (team ? sharedArray(Float64Array, len) : new Float64Array(len));
    // With the logistic loss, the step runs in WebAssembly (core's kernels.wat: its prox and
    // loss, and every pass of the exact form), on arrays that then live in its memory (shared,
    // so the worker thread runs the same kernels on them), with Anderson's; without it, the
    // TypeScript twins, to the same bits.
    const chunks = chunkCount(n, CHUNK);
    const k = opts.loss.name === 'logistic' && opts.kernels !== false ? stepMemory(n, M, chunks * STEP_SUMS, memory > 0 && opts.kernels !== 'prox' ? Anderson.layout(dim, memory).bytes : 0) : undefined;
    this.kernels = k;
    const view = (at: number, len = n) => new Float64Array(k!.memory.buffer, at, len);
    const named = (key: (typeof NAMED)[number], len = n): Float64Array => (k ? view(k.at[key], len) : f64(len));
    this.c = named('c');
    this.z = named('z');
    this.dualVar = named('dual');
    this.sum = named('sum');
    const base = k?.anderson;
    this.anderson = memory > 0 ? new Anderson(dim, memory, team, k && base !== undefined ? { memory: k.memory, kernels: k.kernels, base } : undefined) : undefined;
    this.arrays = {
      // In a team, or in WebAssembly, the shares are copied in; otherwise the step reads the caller's.
      shares: k ? k.shares.map((at) => view(at)) : team ? Array.from({ length: M }, () => f64(n)) : [],
      prevShares: k ? k.prevShares.map((at) => view(at)) : Array.from({ length: M }, () => f64(n)),
      y: k ? named('y') : team ? f64(n) : opts.y,
      sum: this.sum,
      gap: named('gap'),
      offset: named('offset', opts.variant === 'exact' ? n : 0),
      z: this.z,
      dual: this.dualVar,
      a: named('a'),
      t: named('t'),
      slope: named('slope'),
      curvature: named('curvature'),
      losses: k ? named('losses') : new Float64Array(0),
      memory: k?.memory,
      // F(v), which the exact passes write, must be in the same memory (Anderson's input there).
      passes: k !== undefined && opts.kernels !== 'prox' && (memory === 0 || base !== undefined),
      c: this.c,
      packed: this.anderson ? this.anderson.input : new Float64Array(0),
      point: this.anderson ? this.anderson.point : new Float64Array(0),
      cs: this.anderson ? Array.from({ length: M }, () => f64(n)) : [],
    };
    if (this.arrays.y !== opts.y) this.arrays.y.set(opts.y);
    this.next = team ? sharedArray(Int32Array, 1) : new Int32Array(1);
    this.chunkSums = k ? view(k.sums, chunks * STEP_SUMS) : f64(chunks * STEP_SUMS);
    this.checks = f64(chunks);
    this.lossNext = team ? sharedArray(Int32Array, 1) : new Int32Array(1);
    this.lossSums = f64(chunks);
    const shared = { next: this.next, sums: this.chunkSums, checks: this.checks, lossNext: this.lossNext, lossSums: this.lossSums };
    this.team = team ? new StepTeam(this.arrays, { name: opts.loss.name, labelFlip: opts.loss.labelFlip ?? 0, classWeights: opts.loss.classWeights }, shared, this.anderson?.teamInit) : undefined;
    // One worker thread for the step's passes and Anderson's, which follow them.
    if (this.team && this.anderson) this.anderson.useTeam(this.team.thread);
  }

  /** What party m is sent for the next round: c, or its own vector under Anderson acceleration. */
  cFor(m: number): Float64Array {
    return this.anderson ? this.arrays.cs[m] : this.c;
  }

  /** The exponentials the last step's z-update computed: a Newton step each, about one a sample from the warm start. */
  get exponentials(): number {
    return this.exps;
  }

  /** Whether the logistic loss and prox run in WebAssembly (else their TypeScript twins). */
  get webAssembly(): boolean {
    return this.kernels !== undefined;
  }

  /** Whether each party gets its own vector (Anderson acceleration). */
  get accelerated(): boolean {
    return this.anderson !== undefined;
  }

  /** Whether the step's passes run in a team with a worker thread. */
  get teamed(): boolean {
    return this.team !== undefined;
  }

  /** Extrapolated points kept and rejected so far (undefined without acceleration). */
  get accelerationCounts(): { extrapolated: number; rejected: number } | undefined {
    return this.anderson ? { ...this.anderson.counts } : undefined;
  }

  /**
   * One coordinator step after every party pushed its share. `initial`: the step from zero
   * shares before round 1; Anderson acceleration starts its memory after it (the jump from
   * the zero state says little about the iteration; measured, docs/rho.md).
   *
   * Per sample, exact minimises l_i(M zbar) + M rho/2 (zbar - v)^2 and paper
   * l_i(z) - y_i z + rho/2 (z - S)^2: the passes are in admm-kernels.ts (stepRange), chunk by
   * chunk. In a team, the main thread and a worker thread each take the next chunk left; the
   * chunks' sums are added in the chunks' order, so the step is the same bits as in one thread.
   */
  step(shares: readonly Float64Array[], initial = false): RoundStats {
    const { n, opts, arrays, team } = this;
    const M = opts.parties;
    if (shares.length !== M) throw new RangeError(`expected ${M} shares, got ${shares.length}`);
    for (const s of shares) assertLength('share', s, n);
    // A loss the worker thread is summing reads `sum`, which the step overwrites.
    if (this.lossBegun) this.loss();
    const rho = this.rho;
    const exact = opts.variant === 'exact';
    const params = { exact, rho, alpha: opts.alpha, weight: this.weight };
    const { sums, next, chunkSums } = this;
    next[0] = 0;
    const k = this.kernels?.kernels;
    if (team || k) shares.forEach((s, m) => arrays.shares[m].set(s));
    if (team) team.step(params, () => stepChunks(arrays, opts.loss, params, next, chunkSums, k));
    else stepChunks(k ? arrays : { ...arrays, shares: [...shares] }, opts.loss, params, next, chunkSums, k);
    addChunkSums(chunkSums, chunkCount(n, CHUNK), STEP_SUMS, STEP_SUMS, sums);
    this.exps = sums[EXPS];
    let primalSq = sums[PRIMAL_SQ];
    let dualSq = sums[DUAL_SQ];
    let normDual = sums[NORM_DUAL];
    if (exact) {
      primalSq *= M;
      normDual *= rho * rho * M;
      dualSq *= rho * rho;
    } else dualSq *= rho * rho * M;

    const dim = exact ? M * n : n;
    const { abs, rel } = opts.tolerance;
    const acceleration = this.anderson ? this.accelerate(initial) : undefined;
    this.lossSum = undefined;
    if (team) {
      this.lossNext[0] = 0;
      team.beginLoss();
      this.lossBegun = true;
    }
    return {
      primal: Math.sqrt(primalSq),
      dual: Math.sqrt(dualSq),
      epsPrimal: Math.sqrt(dim) * abs + rel * Math.sqrt(Math.max(sums[NORM_S], sums[NORM_Z])),
      epsDual: Math.sqrt(dim) * abs + rel * Math.sqrt(normDual),
      rho,
      ...(acceleration ? { acceleration } : {}),
    };
  }

  /** The loss at `sum`: summed here, or the chunks the worker thread has not taken (lossSum). */
  private loss(): number {
    if (this.lossSum === undefined) {
      const { arrays, opts, lossNext, lossSums, team } = this;
      const mine = () => lossChunks(arrays, opts.loss, lossNext, lossSums, this.kernels?.kernels);
      if (this.lossBegun && team) team.finishLoss(mine);
      else {
        lossNext[0] = 0;
        mine();
      }
      this.lossBegun = false;
      let f = 0;
      for (const x of lossSums) f += x;
      this.lossSum = f;
    }
    return this.lossSum;
  }

  /**
   * Whether every vector for the next round (cFor) is finite: under acceleration as checked by
   * the pass that computed them (unpackRange), otherwise by a pass over c.
   */
  sentFinite(): boolean {
    let check = 0;
    if (this.anderson) for (const x of this.checks) check += x;
    else for (const v of this.c) check += v - v;
    return check === 0;
  }

  /** F(v), packed by the step, handed to Anderson; the next z, u and each party's vector from its point. */
  private accelerate(initial: boolean): AndersonStep {
    const anderson = this.anderson!;
    let step: AndersonStep = 'plain';
    if (initial) anderson.restart(anderson.input);
    else step = anderson.next(anderson.input);
    this.unpack();
    return step;
  }

  /** z, u and each party's vector from Anderson's point (unpackRange). */
  private unpack(): void {
    const { arrays, team, next, checks } = this;
    next[0] = 0;
    if (team) team.unpack(() => unpackChunks(arrays, next, checks));
    else unpackChunks(arrays, next, checks);
  }

  /** Everything the next steps depend on, for a checkpoint. */
  snapshot(): AdmmSnapshot {
    const { rho, c, z, dualVar, sum } = this;
    const { a, t, slope, curvature, prevShares } = this.arrays;
    return { rho, c, z, dualVar, sum, a, t, slope, curvature, prevShares, ...(this.anderson ? { anderson: { memory: this.anderson.memory, state: this.anderson.snapshot() } } : {}) };
  }

  /** Continue from a snapshot of the same problem (same N and parties). */
  restore(snap: AdmmSnapshot): void {
    if (snap.c.length !== this.n || snap.prevShares.length !== this.opts.parties) throw new RangeError('checkpoint does not match this job (N or number of parties)');
    if (this.lossBegun) this.loss();
    this.rho = snap.rho;
    this.lossSum = undefined;
    const { arrays } = this;
    for (const key of ['c', 'z', 'sum', 'a', 't', 'slope', 'curvature'] as const) arrays[key].set(snap[key]);
    arrays.dual.set(snap.dualVar);
    snap.prevShares.forEach((s, m) => arrays.prevShares[m].set(s));
    if (Boolean(snap.anderson) !== Boolean(this.anderson)) throw new RangeError(`checkpoint was written ${snap.anderson ? 'with' : 'without'} Anderson acceleration; this job runs ${this.anderson ? 'with' : 'without'} it`);
    if (snap.anderson && this.anderson) {
      this.anderson.restore(snap.anderson.state);
      // The last step's shares are prevShares; the same arithmetic as after that step.
      this.unpack();
    }
  }

  /** Ends the worker threads, if the step has them (a large state; chunks.ts). */
  close(): void {
    // A loss the worker thread began is not waited for (its team may have failed): if the
    // objective is still asked for, loss() sums it all in this thread.
    this.lossBegun = false;
    this.team?.close();
    this.anderson?.close();
  }

  /** Party m's share as of the last step (what a rejoining party resumes from). */
  lastShare(m: number): Float64Array {
    return this.arrays.prevShares[m];
  }

  /**
   * Training objective of the model whose shares the last step received:
   * l(sum_m s_m) + lambda/2 sum_m ||x_m||^2. Its loss term is summed once (loss()), after the
   * step: in a team, mostly by the worker thread while the next round is sent.
   */
  objective(penaltySq: number): number {
    return this.loss() / this.n + (this.opts.lambda / 2) * penaltySq;
  }
}
