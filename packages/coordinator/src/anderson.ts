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
 * Cost per call: about 3 * memory passes over vectors of the state's length (the Gram row of
 * the new difference, the right-hand side, the combination); memory: 2 * memory + 3 such vectors.
 */
import { ConfigError, dot } from '@admm-share/core';

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
  /** Differences, oldest first. */
  dF: Float64Array[];
  dG: Float64Array[];
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
  /** Ring of differences; slot order is kept in `order` (oldest first). */
  private readonly dF: Float64Array[];
  private readonly dG: Float64Array[];
  private order: number[] = [];
  /** Gram matrix of the dG slots, memory x memory, by slot. */
  private readonly gram: Float64Array;
  /** dG_j . g for the current g, by slot. */
  private readonly rhs: Float64Array;
  private havePrev = false;
  private extrapolated = false;
  /** ||g|| at the last point kept. */
  private lastNorm = Infinity;
  /** Extrapolated points kept and rejected so far. */
  readonly counts = { extrapolated: 0, rejected: 0 };

  constructor(
    readonly dim: number,
    readonly memory: number,
  ) {
    if (!(Number.isInteger(memory) && memory >= 1)) throw new RangeError(`Anderson memory must be an integer >= 1, got ${memory}`);
    this.point = new Float64Array(dim);
    this.prevF = new Float64Array(dim);
    this.prevG = new Float64Array(dim);
    this.dF = Array.from({ length: memory }, () => new Float64Array(dim));
    this.dG = Array.from({ length: memory }, () => new Float64Array(dim));
    this.gram = new Float64Array(memory * memory);
    this.rhs = new Float64Array(memory);
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
    let normSq = 0;
    let newRhs = 0;
    if (slot >= 0) {
      const dFs = this.dF[slot];
      const dGs = this.dG[slot];
      for (let i = 0; i < dim; i++) {
        const fi = f[i];
        const gi = fi - point[i];
        normSq += gi * gi;
        dFs[i] = fi - prevF[i];
        const dg = gi - prevG[i];
        dGs[i] = dg;
        newRhs += dg * gi;
      }
    } else
      for (let i = 0; i < dim; i++) {
        const gi = f[i] - point[i];
        normSq += gi * gi;
      }
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
      // The new slot's Gram row, and dG . g for every slot: dG_j . g_new = dG_j . g_old +
      // dG_j . dG_new for the slots kept (g_new = g_old + dG_new). Separate dot loops: V8
      // runs these faster than one loop over all slots.
      const dGs = this.dG[slot];
      for (const j of keep) {
        const d = dot(dGs, this.dG[j]);
        rhs[j] += d;
        gram[slot * memory + j] = d;
        gram[j * memory + slot] = d;
      }
      const newSq = dot(dGs, dGs);
      gram[slot * memory + slot] = newSq;
      rhs[slot] = newRhs;
      this.order = [...keep, slot];
    }
    const gamma = this.order.length > 0 ? this.coefficients() : undefined;
    // Pass 2: the next point; f and g become the previous ones.
    for (let i = 0; i < dim; i++) {
      const fi = f[i];
      prevG[i] = fi - point[i];
      prevF[i] = fi;
      point[i] = fi;
    }
    if (gamma)
      this.order.forEach((j, r) => {
        const d = this.dF[j];
        const gj = gamma[r];
        for (let i = 0; i < dim; i++) point[i] -= gj * d[i];
      });
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
