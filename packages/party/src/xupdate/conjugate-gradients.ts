// The cg form of the x-update (blocks too large to factor): preconditioned conjugate gradients
// on (lambda + shift) I + rho D~^T D~, with the deflation preconditioner (the leading
// eigenvectors of the Gram matrix) or Jacobi (its diagonal).
import seedrandom from 'seedrandom';
import { WasmPanel, dot, rangeFinder, ritzPairs } from '@admm-share/core';
import type { BlockOperator } from './block-operator.js';

/**
 * The deflation preconditioner of the cg form: eigenvectors kept, extra columns of the
 * subspace iteration, and its power steps. Measured on spam's 4096-feature body block: 22
 * Jacobi iterations a round become 8, for 0.6 s of set-up and 2 rank d multiply-adds an
 * iteration; more vectors cost more per iteration than they save (docs/scaling.md).
 */
export const DEFLATION_RANK = 50;
const DEFLATION_OVERSAMPLING = 10;
const DEFLATION_POWER = 2;
/**
 * Largest set-up for the deflation preconditioner, in multiply-adds of its products with the
 * Gram matrix (spam's body: 2.5e8, 0.6 s). It runs on the party's main thread, so a larger
 * block keeps Jacobi rather than stop answering heartbeats for seconds.
 */
const DEFLATION_BUDGET = 1e9;
/** Iterations after which a deflated solve gives way to Jacobi (spam's body needs 8-26). */
const DEFLATION_GIVE_UP = 200;
export const CG_TOLERANCE = 1e-12;
export const CG_MAX_ITERATIONS = 2000;

/**
 * The deflation preconditioner (see cg): the leading eigenvectors of G~ (a panel of columns of
 * length d, in single precision, in WebAssembly memory) and their eigenvalues.
 */
interface Deflation {
  panel: WasmPanel;
  lam: Float64Array;
}

/** Conjugate gradient solves with one block's centred Gram matrix, and what the last one did. */
export class ConjugateGradients {
  /** The last solve's relative residual ||b - A x|| / ||b|| at its end. */
  lastResidual = 0;
  /** Squared norms of the (centred) columns, the Jacobi preconditioner's diagonal. */
  private readonly colSq: Float64Array;
  /**
   * The leading eigenvectors of D~^T D~ (column-major, d each) and their eigenvalues, for the
   * deflation preconditioner (see cg); undefined for a small d, when turned off, or when
   * WebAssembly memory for them is refused.
   */
  private readonly deflation: Deflation | undefined;
  /** A deflated solve needed more than DEFLATION_GIVE_UP iterations: Jacobi from then on. */
  private deflationFailed = false;
  private cgVectors: [Float64Array, Float64Array, Float64Array, Float64Array] | undefined;

  constructor(
    private readonly op: BlockOperator,
    private readonly lambda: number,
    /** Eigenvectors in the deflation preconditioner (0 = Jacobi only). */
    deflationRank: number,
  ) {
    this.colSq = op.columnSquares();
    // The deflation preconditioner when the block is wide enough for it and its set-up
    // (on this thread, before the party answers setup) stays within DEFLATION_BUDGET.
    if (deflationRank > 0 && this.deflationPays(deflationRank)) this.deflation = this.topEigenvectors(deflationRank);
  }

  /**
   * ((lambda + shift) I + rho D~^T D~) out = rhs by preconditioned conjugate gradients (deflation or Jacobi),
   * warm-started from `out`, until the residual is below 1e-12 of the right-hand side
   * (numerically the exact solution). D~ v = D v - (mu^T v) 1 is applied implicitly.
   * Returns the iterations.
   */
  cg(out: Float64Array, rhs: Float64Array, shift: number, rho: number): number {
    if (!this.deflation || this.deflationFailed) return this.pcg(out, rhs, shift, rho, false, CG_MAX_ITERATIONS);
    // Deflation alone does not scale the columns: on badly scaled features it can need far
    // more iterations than Jacobi. Past DEFLATION_GIVE_UP it is dropped for good and the solve
    // goes on from where it is with Jacobi.
    const it = this.pcg(out, rhs, shift, rho, true, DEFLATION_GIVE_UP);
    if (this.lastResidual <= CG_TOLERANCE) return it;
    this.deflationFailed = true;
    return it + this.pcg(out, rhs, shift, rho, false, CG_MAX_ITERATIONS);
  }

  /** One preconditioned conjugate gradient solve (see cg), at most `maxIterations`. */
  private pcg(out: Float64Array, rhs: Float64Array, shift: number, rho: number, useDeflation: boolean, maxIterations: number): number {
    const { colSq, deflation, op } = this;
    const { d } = op;
    const diag = this.lambda + shift;
    const [r, z, p, ap] = this.cgVectors ?? (this.cgVectors = [0, 1, 2, 3].map(() => new Float64Array(d)) as [Float64Array, Float64Array, Float64Array, Float64Array]);
    const apply = (res: Float64Array, v: Float64Array) => {
      op.gramTimes(res, v);
      for (let j = 0; j < d; j++) res[j] = rho * res[j] + diag * v[j];
    };
    const bNorm = Math.sqrt(dot(rhs, rhs));
    if (bNorm === 0) {
      out.fill(0);
      this.lastResidual = 0;
      return 0;
    }
    apply(ap, out);
    for (let j = 0; j < d; j++) r[j] = rhs[j] - ap[j];
    // The preconditioner z = P^-1 r. With the leading eigenpairs (U, lam) of G~ and
    // nu = diag / rho, P^-1 = (lam_r + nu) U (lam + nu)^-1 U^T + (I - U U^T) up to a constant
    // factor, i.e. z = r + U theta U^T r with theta_k = (lam_r + nu) / (lam_k + nu) - 1: it
    // takes the top of the spectrum down to lam_r (deflation; the eigenvectors come from
    // subspace iteration, see topEigenvectors). Otherwise Jacobi: the diagonal of the system.
    const theta = useDeflation && deflation ? deflationWeights(deflation.lam, diag / rho) : undefined;
    const coef = theta ? new Float64Array(theta.length) : undefined;
    const precondition = () => {
      if (theta && coef) {
        const { panel } = deflation!;
        panel.dots(coef, r);
        for (let c = 0; c < theta.length; c++) coef[c] *= theta[c];
        z.set(r);
        panel.add(z, coef);
      } else for (let j = 0; j < d; j++) z[j] = r[j] / Math.max(diag + rho * colSq[j], 1e-300);
    };
    precondition();
    let rz = 0;
    for (let j = 0; j < d; j++) {
      p[j] = z[j];
      rz += r[j] * z[j];
    }
    let it = 0;
    for (; it < maxIterations; it++) {
      if (Math.sqrt(dot(r, r)) <= CG_TOLERANCE * bNorm) break;
      apply(ap, p);
      const alpha = rz / dot(p, ap);
      for (let j = 0; j < d; j++) {
        out[j] += alpha * p[j];
        r[j] -= alpha * ap[j];
      }
      precondition();
      const rzNew = dot(r, z);
      const beta = rzNew / rz;
      rz = rzNew;
      for (let j = 0; j < d; j++) p[j] = z[j] + beta * p[j];
    }
    this.lastResidual = Math.sqrt(dot(r, r)) / bNorm;
    return it;
  }

  /**
   * Whether the deflation preconditioner is worth building: the block is wide enough, applying
   * it (2 rank d multiply-adds) costs no more than a product with G~, and its set-up (the
   * products, the orthonormalisations, Q^T G~ Q and U) stays within DEFLATION_BUDGET.
   */
  private deflationPays(rank: number): boolean {
    const { n, d, Dr } = this.op;
    const k = rank + DEFLATION_OVERSAMPLING;
    const gramCost = Dr ? 2 * Dr.values.length : 2 * n * d;
    const setup = (DEFLATION_POWER + 1) * (k * gramCost + 2 * k * k * d) + k * k * d + rank * k * d;
    return d >= 2 * k && 2 * rank * d <= gramCost && setup <= DEFLATION_BUDGET;
  }

  /**
   * The leading `rank` eigenpairs of G~ = D~^T D~ by randomised subspace iteration (Halko,
   * Martinsson and Tropp 2011, algorithm 4.4, then Rayleigh-Ritz): Q = orth(Omega) with
   * DEFLATION_OVERSAMPLING extra columns, DEFLATION_POWER times Q = orth(G~ Q), then the
   * eigendecomposition of Q^T G~ Q. They only precondition conjugate gradients, so their
   * accuracy changes the iteration count, never the solution. Omega is seeded: the same block
   * always gets the same preconditioner. Independent of lambda and rho. Set-up cost:
   * (DEFLATION_POWER + 1) (rank + oversampling) products with G~ (0.6 s for spam's 4096-feature body).
   */
  private topEigenvectors(rank: number): Deflation | undefined {
    const { d } = this.op;
    const k = rank + DEFLATION_OVERSAMPLING;
    const rng = seedrandom('admm-share deflation');
    const omega = Array.from({ length: k }, () => Float64Array.from({ length: d }, () => rng() - 0.5));
    const times = (v: Float64Array) => {
      const out = new Float64Array(d);
      this.op.gramTimes(out, v);
      return out;
    };
    const Q = rangeFinder(omega, times, DEFLATION_POWER);
    const Y = Q.map(times);
    // Q^T G~ Q, symmetrised against rounding.
    const T = new Float64Array(Q.length * Q.length);
    for (let a = 0; a < Q.length; a++)
      for (let b = 0; b <= a; b++) T[a * Q.length + b] = T[b * Q.length + a] = (dot(Q[a], Y[b]) + dot(Q[b], Y[a])) / 2;
    const { values, vectors } = ritzPairs(Q, T);
    // A block of lower rank than k leaves fewer columns, and so fewer vectors.
    const order = [...values.keys()].sort((a, b) => values[b] - values[a]).slice(0, rank);
    if (order.length === 0) return undefined;
    const U = new Float64Array(order.length * d);
    order.forEach((e, pos) => U.set(vectors[e], pos * d));
    // Single precision halves the preconditioner's traffic each iteration. U is then
    // orthonormal only to about rank * 2^-24, which the clamp on theta in cg allows for, so the
    // preconditioner stays symmetric positive definite and the solution is as exact as before.
    // The panel lives in WebAssembly memory; if that is refused, the block keeps Jacobi.
    const panel = WasmPanel.from(Float32Array.from(U), order.length, d);
    return panel && { panel, lam: Float64Array.from(order, (e) => Math.max(values[e], 0)) };
  }
}

/**
 * The deflation preconditioner's weights theta_k = (lam_r + nu) / (lam_k + nu) - 1 (see cg), or
 * undefined when lam_r + nu is not positive. theta >= -1 + floor keeps P^-1 positive definite
 * although the single-precision U is orthonormal only to about rank * 2^-24 (the floor binds
 * only past a 1e5 spread of the eigenvalues).
 */
function deflationWeights(lam: Float64Array, nu: number): Float64Array | undefined {
  const r0 = lam[lam.length - 1] + nu;
  if (!(r0 > 0)) return undefined;
  const floor = Math.max(1e-5, 4 * lam.length * 2 ** -24);
  return Float64Array.from(lam, (l) => Math.max(r0 / (l + nu) - 1, -1 + floor));
}
