/**
 * Type-II Anderson acceleration of a fixed-point iteration v <- F(v), with a safeguard.
 *
 * Each call to `next` gets f = F(v) for the point v it handed out last (`point`), and writes
 * the next point to evaluate: the plain step f, or the extrapolation
 *   v+ = f - sum_j gamma_j dF_j,   gamma = argmin ||g - sum_j gamma_j dG_j||^2 + eta ||gamma||^2,
 * where g = f - v is the fixed-point residual and dF_j, dG_j are the differences of the last
 * `memory` values of f and g (Walker and Ni 2011; the regularisation eta, a tiny multiple of
 * the largest diagonal of the Gram matrix, keeps the small system well posed, as in Fu, Zhang
 * and Boyd 2019, "Anderson accelerated Douglas-Rachford splitting").
 *
 * Safeguard: an extrapolated point is kept only if its residual ||g|| is no larger than the
 * residual of the last point kept. Otherwise it is rejected: the next point is the plain step
 * from the last kept point (whose F value is remembered) and the memory is cleared, so the
 * iteration can never do worse than the plain iteration by more than the rejected round
 * (Zhang, O'Donoghue and Boyd 2020 use the same kind of residual test, against a decreasing
 * bound, to make type-I acceleration globally convergent).
 *
 * The differences are stored in single precision: they only weigh the extrapolation (the
 * residual test above runs on the double-precision f and point), their Gram matrix and the
 * combination use the stored values consistently, and a difference's rounding error (6e-8
 * of it) vanishes with the steps. That halves the memory and the traffic of 2 * memory of
 * the state's vectors, which bound the cost: the state is (M + 2)N doubles (6e6 at a million
 * rows and four parties).
 *
 * Cost per call: about memory + 2 passes over vectors of the state's length (the new
 * differences, the Gram row of the new one two slots at a time, the combination two slots at
 * a time, its first pair with the copies); memory: 4 such vectors in double precision and
 * 2 * memory in single. The passes run in WebAssembly (core's kernels.wat, two elements at a
 * time), on vectors in its memory: on a9a's state one call's passes take about 0.4 ms
 * against 2 in TypeScript, which remains for Node without WebAssembly. On a large state each
 * pass is shared with a worker thread (AndersonTeam), chunk by chunk; the memory is shared.
 * The passes' sums are added chunk by chunk in the chunks' order, in a team or not: the same
 * state gives the same bits on any machine.
 */
import { ConfigError, type ThreadTeam, type VectorKernels, type VectorMemory, sharedArray, vectorLayout, vectorMemory } from '@admm-share/core';
import { NEW_RHS, NEW_SQ, NORM_SQ, ROW } from './anderson-kernels.js';
import { ANDERSON_CHUNK, AndersonTeam, type SharedState, type AndersonTeamInit, andersonInit, firstPassChunks, nextPointChunks } from './anderson-team.js';
import { addChunkSums, chunkCount, teamByDefault } from './chunks.js';

/** The default memory (docs/rho.md has the measurements behind it), and the largest accepted. */
export const DEFAULT_ANDERSON = 5;
export const MAX_ANDERSON = 20;

/** The --anderson flag's value: an integer from 0 (off) to MAX_ANDERSON. */
export function requireAnderson(v: number): number {
  if (!(Number.isSafeInteger(v) && v >= 0 && v <= MAX_ANDERSON)) throw new ConfigError(`--anderson must be an integer from 0 (off) to ${MAX_ANDERSON}, got ${v}`);
  return v;
}

export type AndersonStep = 'plain' | 'extrapolated' | 'rejected';

export interface AndersonSnapshot {
  point: Float64Array;
  prevF: Float64Array;
  prevG: Float64Array;
  /** Differences, oldest first, in single precision as kept. */
  dF: Float32Array[];
  dG: Float32Array[];
  /** Their Gram matrix (row-major, in the same order) and dG . g: kept, not recomputed, so a restored iteration continues bit for bit. */
  gram: Float64Array;
  rhs: Float64Array;
  havePrev: boolean;
  extrapolated: boolean;
  lastNorm: number;
  counts: { extrapolated: number; rejected: number };
}

const REGULARISATION = 1e-8;

export class Anderson {
  /** The point F is to be evaluated at next. */
  readonly point: Float64Array;
  private readonly prevF: Float64Array;
  private readonly prevG: Float64Array;
  /** Ring of differences, in single precision; slot order is kept in `order` (oldest first). */
  private readonly dF: Float32Array[];
  private readonly dG: Float32Array[];
  private order: number[] = [];
  /** Gram matrix of the dG slots, memory x memory, by slot. */
  private readonly gram: Float64Array;
  /** dG_j . g for the current g, by slot (kept up to date through the stored dG, so equal to it up to rounding). */
  private readonly rhs: Float64Array;
  private havePrev = false;
  private extrapolated = false;
  /** ||g|| at the last point kept. */
  private lastNorm = Infinity;
  /** Extrapolated points kept and rejected so far. */
  readonly counts = { extrapolated: 0, rejected: 0 };

  /**
   * Where a caller may write F(v) before `next(input)`: the kernels' memory (without WebAssembly,
   * shared memory on a large state), which they and the worker thread read where it is (another
   * array is copied here first).
   */
  readonly input: Float64Array;
  /** The sums of pass 1 (anderson-kernels.ts), added up from its chunks'. */
  private readonly sums: Float64Array;
  /** What both threads' passes work on, the chunks' sums among it (anderson-team.ts). */
  private readonly shared: SharedState;
  /** What a worker thread needs for the passes (in a team only). */
  readonly teamInit: AndersonTeamInit | undefined;
  /** The coordinator step's thread, when the passes use it instead of one of their own (useTeam). */
  private thread: ThreadTeam | undefined;
  /**
   * The WebAssembly kernels (core's kernels.wat) and the shared memory every vector above is a
   * view of; without WebAssembly (or when the memory is refused) the TypeScript loops do the
   * same, on arrays of their own.
   */
  private readonly wasm: { memory: VectorMemory; kernels: VectorKernels } | undefined;

  /** The worker thread that takes chunks of each pass on a large state. */
  private team: AndersonTeam | undefined;

  /** Byte offsets of its arrays in a WebAssembly memory (from 0), and the bytes they take. */
  static layout(dim: number, memory: number): { at: number[]; bytes: number } {
    const chunks = chunkCount(dim, ANDERSON_CHUNK);
    return vectorLayout([...Array<number>(4).fill(dim * 8), ...Array<number>(2 * memory).fill(dim * 4), chunks * (ROW + memory) * 8]);
  }

  constructor(
    readonly dim: number,
    readonly memory: number,
    /** Whether each pass runs in a team with a worker thread (default: from TEAM_FROM values on a machine of two cores or more). */
    readonly parallel = teamByDefault(dim),
    /** A WebAssembly memory to place the arrays in, from byte `base` (16-aligned; layout's bytes free there): the coordinator step's, whose kernels write F(v) into `input`. Else one of its own. */
    place?: { memory: VectorMemory; kernels: VectorKernels; base: number },
  ) {
    if (!(Number.isInteger(memory) && memory >= 1)) throw new RangeError(`Anderson memory must be an integer >= 1, got ${memory}`);
    const chunks = chunkCount(dim, ANDERSON_CHUNK);
    const { at, bytes } = Anderson.layout(dim, memory);
    this.wasm = place ? { memory: place.memory, kernels: place.kernels } : vectorMemory(bytes);
    const base = place?.base ?? 0;
    let k = 0;
    /** The next array: a view of the WebAssembly memory, else one of its own (shared, for a team). */
    const view = <T>(C: { new (b: ArrayBufferLike, offset: number, length: number): T; BYTES_PER_ELEMENT: number }, length: number): T => {
      const bytes = length * C.BYTES_PER_ELEMENT;
      const offset = base + at[k++];
      return this.wasm ? new C(this.wasm.memory.buffer, offset, length) : new C(this.parallel ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes), 0, length);
    };
    this.input = view(Float64Array, dim);
    this.point = view(Float64Array, dim);
    this.prevF = view(Float64Array, dim);
    this.prevG = view(Float64Array, dim);
    this.dF = Array.from({ length: memory }, () => view(Float32Array, dim));
    this.dG = Array.from({ length: memory }, () => view(Float32Array, dim));
    const chunkSums = view(Float64Array, chunks * (ROW + memory));
    const { input: f, point, prevF, prevG, dF, dG } = this;
    const next = this.parallel ? sharedArray(Int32Array, 1) : new Int32Array(1);
    this.shared = { f, point, prevF, prevG, dF, dG, next, sums: chunkSums, memory: this.wasm?.memory };
    this.teamInit = this.parallel ? andersonInit(this.shared) : undefined;
    this.sums = new Float64Array(ROW + memory);
    this.gram = new Float64Array(memory * memory);
    this.rhs = new Float64Array(memory);
  }

  /** Ends the worker thread, if one was started (a later `next` starts another); a team given by useTeam is its owner's to close. */
  close(): void {
    this.team?.close();
    this.team = undefined;
  }

  /** Run the team's passes in `thread`, started with `teamInit` among its data (the coordinator's step thread). */
  useTeam(thread: ThreadTeam): void {
    this.close();
    this.thread = thread;
  }

  /** Start (again) at v with an empty memory: the next call extrapolates nothing. */
  restart(v: Float64Array): void {
    this.point.set(v);
    this.order = [];
    this.havePrev = false;
    this.extrapolated = false;
  }

  /** f = F(point); afterwards `point` holds the next point to evaluate. */
  next(f: Float64Array): AndersonStep {
    const { dim, point, prevF, prevG, memory, gram, rhs } = this;
    if (f.length !== dim) throw new RangeError(`expected a vector of length ${dim}, got ${f.length}`);
    // Pass 1: ||g||, and (when there is a previous point) the new differences in the slot they
    // go to, their Gram row against the slots kept, and the new slot's dG . g. prevF and prevG
    // stay as they were, for a rejection.
    const keep = this.havePrev ? (this.order.length < memory ? this.order : this.order.slice(1)) : [];
    const slot = this.havePrev ? (this.order.length < memory ? this.order.length : this.order[0]) : -1;
    const dFs = slot >= 0 ? this.dF[slot] : undefined;
    const dGs = slot >= 0 ? this.dG[slot] : undefined;
    const kept = keep.map((j) => this.dG[j]);
    if (f !== this.input && (this.parallel || this.wasm)) {
      this.input.set(f);
      f = this.input;
    }
    const { sums, shared } = this;
    const k = this.wasm?.kernels;
    const team = this.teamInit ? (this.team ??= new AndersonTeam(this.teamInit, this.thread)) : undefined;
    const pass1 = () => firstPassChunks(shared, f, dFs, dGs, kept, k);
    shared.next[0] = 0;
    if (team) team.firstPass(slot, keep, pass1);
    else pass1();
    addChunkSums(shared.sums, chunkCount(dim, ANDERSON_CHUNK), ROW + memory, ROW + keep.length, sums);
    const normSq = sums[NORM_SQ];
    const newRhs = sums[NEW_RHS];
    const newSq = sums[NEW_SQ];
    const row = sums.subarray(ROW, ROW + keep.length);
    const norm = Math.sqrt(normSq);
    if (this.extrapolated && !(norm <= this.lastNorm)) {
      // Rejected: back to the plain step from the last point kept; start the memory afresh.
      this.restart(prevF);
      this.counts.rejected++;
      return 'rejected';
    }
    if (this.extrapolated) this.counts.extrapolated++;
    this.lastNorm = norm;
    if (slot >= 0) {
      // dG_j . g_new = dG_j . g_old + dG_j . dG_new for the slots kept (g_new = g_old + dG_new).
      keep.forEach((j, r) => {
        const d = row[r];
        rhs[j] += d;
        gram[slot * memory + j] = d;
        gram[j * memory + slot] = d;
      });
      gram[slot * memory + slot] = newSq;
      rhs[slot] = newRhs;
      this.order = [...keep, slot];
    }
    const gamma = this.order.length > 0 ? this.coefficients() : undefined;
    // Pass 2: f and g become the previous ones; the next point is f - sum_j gamma_j dF_j.
    const ds = gamma ? this.order.map((j) => this.dF[j]) : [];
    const pass2 = () => nextPointChunks(shared, f, ds, gamma, k);
    shared.next[0] = 0;
    if (team) team.nextPoint(gamma ? this.order : [], gamma, pass2);
    else pass2();
    this.havePrev = true;
    this.extrapolated = gamma !== undefined;
    return gamma ? 'extrapolated' : 'plain';
  }

  /** gamma for the current memory, or undefined when the small system is singular or not finite. */
  private coefficients(): Float64Array | undefined {
    const { order, memory, gram, rhs } = this;
    const m = order.length;
    const A = new Float64Array(m * m);
    const b = new Float64Array(m);
    let top = 0;
    for (let r = 0; r < m; r++) {
      for (let c = 0; c < m; c++) A[r * m + c] = gram[order[r] * memory + order[c]];
      top = Math.max(top, A[r * m + r]);
      b[r] = rhs[order[r]];
    }
    if (!(top > 0)) return undefined;
    for (let r = 0; r < m; r++) A[r * m + r] += REGULARISATION * top;
    const x = solveSpd(A, b, m);
    return x && x.every(Number.isFinite) ? x : undefined;
  }

  /** Everything `next` depends on, for a checkpoint. */
  snapshot(): AndersonSnapshot {
    return {
      point: this.point,
      prevF: this.prevF,
      prevG: this.prevG,
      dF: this.order.map((s) => this.dF[s]),
      dG: this.order.map((s) => this.dG[s]),
      gram: Float64Array.from(this.order.flatMap((r) => this.order.map((c) => this.gram[r * this.memory + c]))),
      rhs: Float64Array.from(this.order, (r) => this.rhs[r]),
      havePrev: this.havePrev,
      extrapolated: this.extrapolated,
      lastNorm: this.lastNorm,
      counts: { ...this.counts },
    };
  }

  restore(s: AndersonSnapshot): void {
    if (s.point.length !== this.dim || s.dF.length > this.memory || s.dF.length !== s.dG.length) throw new RangeError('Anderson state does not match this job');
    this.point.set(s.point);
    this.prevF.set(s.prevF);
    this.prevG.set(s.prevG);
    this.order = s.dF.map((_, k) => k);
    s.dF.forEach((v, k) => this.dF[k].set(v));
    s.dG.forEach((v, k) => this.dG[k].set(v));
    const k = this.order.length;
    if (s.gram.length !== k * k || s.rhs.length !== k) throw new RangeError('Anderson state does not match this job');
    for (let r = 0; r < k; r++) {
      for (let c = 0; c < k; c++) this.gram[r * this.memory + c] = s.gram[r * k + c];
      this.rhs[r] = s.rhs[r];
    }
    this.havePrev = s.havePrev;
    this.extrapolated = s.extrapolated;
    this.lastNorm = s.lastNorm;
    Object.assign(this.counts, s.counts);
  }
}

/** A x = b for a small symmetric positive definite A (m x m, row-major) by Cholesky; undefined if not positive definite. */
function solveSpd(A: Float64Array, b: Float64Array, m: number): Float64Array | undefined {
  const L = new Float64Array(m * m);
  for (let j = 0; j < m; j++) {
    let d = A[j * m + j];
    for (let k = 0; k < j; k++) d -= L[j * m + k] ** 2;
    if (!(d > 0)) return undefined;
    const ljj = Math.sqrt(d);
    L[j * m + j] = ljj;
    for (let i = j + 1; i < m; i++) {
      let s = A[i * m + j];
      for (let k = 0; k < j; k++) s -= L[i * m + k] * L[j * m + k];
      L[i * m + j] = s / ljj;
    }
  }
  const x = Float64Array.from(b);
  for (let i = 0; i < m; i++) {
    for (let k = 0; k < i; k++) x[i] -= L[i * m + k] * x[k];
    x[i] /= L[i * m + i];
  }
  for (let i = m - 1; i >= 0; i--) {
    for (let k = i + 1; k < m; k++) x[i] -= L[k * m + i] * x[k];
    x[i] /= L[i * m + i];
  }
  return x;
}

