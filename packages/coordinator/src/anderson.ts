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
 * a time, its first pair with the copies); memory: 3 such vectors in double precision and
 * 2 * memory in single.
 */
import { ConfigError } from '@admm-share/core';

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

  constructor(
    readonly dim: number,
    readonly memory: number,
  ) {
    if (!(Number.isInteger(memory) && memory >= 1)) throw new RangeError(`Anderson memory must be an integer >= 1, got ${memory}`);
    this.point = new Float64Array(dim);
    this.prevF = new Float64Array(dim);
    this.prevG = new Float64Array(dim);
    this.dF = Array.from({ length: memory }, () => new Float32Array(dim));
    this.dG = Array.from({ length: memory }, () => new Float32Array(dim));
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
    const dFs = slot >= 0 ? this.dF[slot] : undefined;
    const dGs = slot >= 0 ? this.dG[slot] : undefined;
    const kept = keep.map((j) => this.dG[j]);
    const row = new Float64Array(keep.length);
    let normSq = 0;
    let newRhs = 0;
    let newSq = 0;
    if (dFs && dGs) {
      for (let i = 0; i < dim; i++) {
        const fi = f[i];
        const gi = fi - point[i];
        normSq += gi * gi;
        dFs[i] = fi - prevF[i];
        // The stored (single-precision) difference, so that the Gram matrix is that of the stored vectors.
        const dg = Math.fround(gi - prevG[i]);
        dGs[i] = dg;
        newRhs += dg * gi;
        newSq += dg * dg;
      }
      addDots(row, dGs, kept);
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
    nextPoint(point, prevF, prevG, f, gamma ? this.order.map((j) => this.dF[j]) : [], gamma);
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

/*
 * The vector kernels. V8 compiles a sum into one chain of dependent additions, so a plain dot
 * product waits on the adder every element; these go two vectors per pass, each with two
 * sums (four chains in flight), and read the shared vector once. With pass 1 computing the
 * new difference's own square and the copies done by memcpy (set), one call of `next` on
 * a9a's state (130k elements, memory 5) went from about 4.7 ms to about 2 ms; the copies now
 * ride along with the first pair of the combination (nextPoint), and the differences are
 * single precision.
 */

/** out[r] += a . b_r, two vectors at a time. */
function addDots(out: Float64Array, a: Float32Array, bs: readonly Float32Array[]): void {
  const n = a.length;
  const end = n - (n & 1);
  let r = 0;
  for (; r + 1 < bs.length; r += 2) {
    const b = bs[r];
    const c = bs[r + 1];
    let b0 = 0;
    let b1 = 0;
    let c0 = 0;
    let c1 = 0;
    for (let i = 0; i < end; i += 2) {
      const x0 = a[i];
      const x1 = a[i + 1];
      b0 += x0 * b[i];
      b1 += x1 * b[i + 1];
      c0 += x0 * c[i];
      c1 += x1 * c[i + 1];
    }
    if (end < n) {
      b0 += a[end] * b[end];
      c0 += a[end] * c[end];
    }
    out[r] += b0 + b1;
    out[r + 1] += c0 + c1;
  }
  if (r < bs.length) {
    const b = bs[r];
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    let i = 0;
    for (; i + 3 < n; i += 4) {
      s0 += a[i] * b[i];
      s1 += a[i + 1] * b[i + 1];
      s2 += a[i + 2] * b[i + 2];
      s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    out[r] += s0 + s1 + (s2 + s3);
  }
}

/**
 * prevG = f - point, prevF = f and point = f - sum_r gamma_r d_r in one pass with the first two
 * differences, then two more per pass (the same arithmetic, in the same order, as copying f
 * and subtracting pair by pair).
 */
function nextPoint(point: Float64Array, prevF: Float64Array, prevG: Float64Array, f: Float64Array, ds: readonly Float32Array[], gamma: Float64Array | undefined): void {
  const n = f.length;
  if (!gamma || ds.length === 0) {
    for (let i = 0; i < n; i++) prevG[i] = f[i] - point[i];
    prevF.set(f);
    point.set(f);
    return;
  }
  // With one difference the second term is 0 * a[i], which adds an exact zero.
  const a = ds[0];
  const ga = gamma[0];
  const b = ds.length > 1 ? ds[1] : a;
  const gb = ds.length > 1 ? gamma[1] : 0;
  for (let i = 0; i < n; i++) {
    const fi = f[i];
    prevG[i] = fi - point[i];
    prevF[i] = fi;
    point[i] = fi - (ga * a[i] + gb * b[i]);
  }
  let r = 2;
  for (; r + 1 < ds.length; r += 2) {
    const c = ds[r];
    const d = ds[r + 1];
    const gc = gamma[r];
    const gd = gamma[r + 1];
    for (let i = 0; i < n; i++) point[i] -= gc * c[i] + gd * d[i];
  }
  if (r < ds.length) {
    const c = ds[r];
    const gc = gamma[r];
    for (let i = 0; i < n; i++) point[i] -= gc * c[i];
  }
}
