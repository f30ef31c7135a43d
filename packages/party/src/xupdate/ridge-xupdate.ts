import { type Csr, type Dense, WasmCsr, assertLength, dot, matTVec, matVec, predictScores } from '@admm-share/core';
import { BlockOperator } from './block-operator.js';
import { CHOLESKY_LIMIT, CholeskyFactor } from './cholesky.js';
import { ConjugateGradients, DEFLATION_RANK } from './conjugate-gradients.js';
import { EIGEN_LIMIT, gramEigen, shrink } from './eigen.js';
import { type EigenBasis, addModelNoise, ballMultiplier, solveBall } from './privacy-ball.js';

/**
 * How the x-update solves its system: an eigendecomposition of the Gram matrix (`primal`, d x d,
 * or `dual`, N x N: any rho at the cost of two dense products), a Cholesky factorisation of
 * lambda I + rho times it (`cholesky`: two triangular solves, refactored only if rho changes),
 * or conjugate gradients every round (`cg`: blocks too large to factor).
 */
export type XUpdateForm = 'primal' | 'dual' | 'cholesky' | 'cg';

/**
 * The party's x-update for R(x) = ||x||^2 / 2, in the form both ADMM variants share:
 *
 *   x_m = argmin_x  lambda/2 ||x||^2 + rho/2 ||D_m x + b 1 - w||^2,   w = s_m - c
 *
 * (exact sharing: Boyd et al. 2011 eq. 7.12 with c = mean(s) - zbar + u; the paper's
 * Algorithm 1 eq. 7 with c = sum(s) - z + y/rho). b is an optional unpenalised intercept.
 *
 * The factorisation is computed once, of the (column-centred, with an intercept) Gram matrix
 * D^T D, d x d, or of D D^T, N x N, when d > N: with k = min(d, N) up to `eigenLimit`, an
 * eigendecomposition (the solve costs two dense products per round for any rho, which the
 * ball of the privacy mechanisms and the one-shot fits' penalty path use); above it, with
 * lambda > 0 and k up to `choleskyLimit`, a Cholesky factorisation of lambda I + rho times the
 * Gram matrix (two triangular solves per round; rho is fixed in a job, and a new rho
 * refactors); beyond that, or when rho varies, conjugate gradients. The block and its products
 * are a BlockOperator. Eliminating b: b = mean(w - D x), and x solves the ridge problem on the
 * centred matrix D~ = D - 1 mu^T and centred target w~.
 */
export class RidgeXUpdate {
  readonly n: number;
  readonly d: number;
  readonly form: XUpdateForm;
  /** Which Gram matrix is factored: D^T D (primal) or D D^T (dual); cg: primal. */
  readonly side: 'primal' | 'dual';
  /** Whether the block is kept dense (row-major) rather than as CSR. */
  readonly dense: boolean;
  /** Coefficients (without the intercept). */
  readonly x: Float64Array;
  intercept = 0;
  /** The share s_m = D_m x + b. */
  readonly share: Float64Array;
  /**
   * What the party last sent: the share, plus noise when privacy is on. The next target is
   * w = released - c, so the update depends on the data only through D (and on public values
   * otherwise), which is what the privacy analysis needs.
   */
  readonly released: Float64Array;
  /** cg form (and the ball of the cholesky form): conjugate gradient iterations of the last solve. */
  lastIterations = 0;

  private readonly op: BlockOperator;
  private readonly mu: Float64Array | undefined;
  /** The eigen forms' basis (primal or dual); undefined in the cholesky and cg forms. */
  private readonly eigen: EigenBasis | undefined;
  /** cholesky form: the factor of lambda I + rho times the Gram matrix. */
  private readonly chol: CholeskyFactor | undefined;
  /** cholesky and cg forms: conjugate gradients (the cg form's solves, the ball's multiplier, the paper's noise). */
  private readonly solver: ConjugateGradients | undefined;
  private readonly k: number;
  /**
   * The block's kernels when updateFromBroadcast may run in place without bounds (updateInPlace):
   * a sparse block in their memory, a primal form (the eigenbasis or Cholesky, whose first
   * product is D^T w), no intercept (w is not centred), and the share released as it is.
   */
  private readonly inPlace: WasmCsr | undefined;
  /** The target w of updateFromBroadcast when it is formed (not by updateInPlace); made at its first use. */
  private wc: Float64Array | undefined;
  private cgRhs: Float64Array | undefined;
  private readonly t: Float64Array;
  private readonly tmp: Float64Array;

  constructor(
    /** The block: sparse (a WasmCsr is used as it is, other sparse blocks are copied into one), or dense. */
    block: Csr | Dense | WasmCsr,
    private readonly lambda: number,
    readonly withIntercept: boolean,
    opts: {
      /** Largest min(d, N) factored by an eigendecomposition (EIGEN_LIMIT). */
      eigenLimit?: number;
      /** Largest min(d, N) factored by Cholesky above it (CHOLESKY_LIMIT). */
      choleskyLimit?: number;
      /** Factor for this rho at once (the job's), so that set-up does the work rather than round 1. */
      rho?: number;
      /** cg form: eigenvectors in the deflation preconditioner (DEFLATION_RANK; 0 = Jacobi only). */
      deflationRank?: number;
      /**
       * No noise is ever added (privacy off): `released` is the share itself, one vector of N
       * doubles less (8 MB for a million rows).
       */
      noiseFree?: boolean;
      /** Threads beside this one for a dense block's products and set-up (threadsFor; default 0). Call close() when done. */
      threads?: number | 'auto';
    } = {},
  ) {
    if (!(lambda >= 0)) throw new RangeError(`lambda must be >= 0, got ${lambda}`);
    const op = (this.op = new BlockOperator(block, withIntercept));
    this.n = op.n;
    this.d = op.d;
    const k = Math.min(this.d, this.n);
    let side: 'primal' | 'dual' = this.d <= this.n ? 'primal' : 'dual';
    this.form =
      k <= (opts.eigenLimit ?? EIGEN_LIMIT)
        ? side
        : lambda > 0 && k <= (opts.choleskyLimit ?? CHOLESKY_LIMIT)
          ? 'cholesky'
          : 'cg';
    if (this.form === 'cg') side = 'primal';
    this.side = side;
    this.dense = op.dense;
    this.mu = op.mu;
    if (this.form === 'cg' || this.form === 'cholesky') {
      // cg: preconditioned by deflation (or the diagonal of lambda I + rho D~^T D~); cholesky:
      // Jacobi-preconditioned conjugate gradients find the ball's multiplier when the ball binds (solveBall).
      this.k = this.form === 'cholesky' ? (side === 'primal' ? this.d : this.n) : 0;
      this.solver = new ConjugateGradients(op, lambda, this.form === 'cg' ? (opts.deflationRank ?? DEFLATION_RANK) : 0);
      if (this.form === 'cholesky') {
        this.chol = new CholeskyFactor(this.k, (rho, into) => ({ ...op.source(), side, mu: this.mu, lambda, rho, into }));
        if (opts.rho !== undefined) this.chol.factor(opts.rho);
      }
    } else {
      this.k = k;
      this.eigen = { side, k, ...gramEigen(op.source(), side, this.mu, k) };
    }
    this.x = new Float64Array(this.d);
    // A sparse block's share is in its kernels' memory, where D x is written (updateInPlace).
    this.share = op.Dw ? op.Dw.rowVectors[1] : new Float64Array(this.n);
    this.released = opts.noiseFree ? this.share : new Float64Array(this.n);
    this.inPlace = !this.mu && opts.noiseFree && side === 'primal' && this.form !== 'cg' ? op.Dw : undefined;
    this.t = new Float64Array(this.k);
    this.tmp = new Float64Array(this.k);
    // Last, so that a constructor that throws leaves no threads behind.
    op.startThreads(opts.threads ?? 0);
  }

  /** Threads used beside this one (0: none). */
  get threads(): number {
    return this.op.threads;
  }

  /** cholesky form: milliseconds of the last factorisation (Gram matrix and Cholesky). */
  get factorMs(): number {
    return this.chol?.factorMs ?? 0;
  }

  /** cg form: the last conjugate gradient solve's relative residual ||b - A x|| / ||b|| at its end. */
  get lastResidual(): number {
    return this.solver?.lastResidual ?? 0;
  }

  /** Stops the threads, if any (the x-update is not used again). */
  async close(): Promise<void> {
    this.cancelFactor();
    await this.op.close();
  }

  /**
   * cholesky form: the factorisation for `rho` on this thread a piece at a time (factorPieces,
   * some 20 ms each), giving the event loop a turn between pieces, so that the party keeps
   * answering the coordinator's heartbeats for the seconds it takes; with threads, they form
   * their parts of the Gram matrix and the factor meanwhile. Resolves with the number of
   * pieces on this thread (0: nothing to do, another form or already factored for `rho`, or
   * cancelled).
   */
  async factorInPieces(rho: number): Promise<number> {
    return this.chol ? this.chol.factorInPieces(rho, this.op.pool) : 0;
  }

  /**
   * Stop a factorisation under way (its set-up was abandoned: the connection was lost). Its
   * promise resolves with nothing factored; a later solve factors again.
   */
  cancelFactor(): void {
    this.chol?.cancel();
  }

  /** Back to the state before round 1: x = 0, b = 0, and a zero share. */
  reset(): void {
    this.x.fill(0);
    this.intercept = 0;
    this.share.fill(0);
    this.released.fill(0);
  }

  /**
   * Target of the next update: w = released - c, c as broadcast by the coordinator. With
   * `bounds` (privacy), the target is clipped to [-clip, clip] coordinate-wise and x is kept
   * in the ball ||x|| <= radius. Afterwards `released` holds the new share.
   */
  updateFromBroadcast(c: Float64Array, rho: number, bounds?: { clip: number; radius: number }): void {
    assertLength('c', c, this.n);
    if (!bounds && this.inPlace) return this.updateInPlace(this.inPlace, c, rho);
    const { released } = this;
    const wc = (this.wc ??= new Float64Array(this.n));
    if (bounds) {
      const b = bounds.clip;
      for (let i = 0; i < this.n; i++) {
        const w = released[i] - c[i];
        wc[i] = w > b ? b : w < -b ? -b : w;
      }
    } else for (let i = 0; i < this.n; i++) wc[i] = released[i] - c[i];
    this.solve(wc, rho, bounds?.radius);
    if (released !== this.share) released.set(this.share);
  }

  /**
   * Where the coordinator's vector for a round is best put: updateFromBroadcast then reads it
   * where it is (a sparse block's kernels' memory, WasmCsr.rowVectors); undefined for a dense
   * block, whose products read the caller's arrays.
   */
  get broadcastInto(): Float64Array | undefined {
    return this.op.Dw?.rowVectors[0];
  }

  /**
   * updateFromBroadcast without bounds where it may run in place (`inPlace`, Dw): D^T w is
   * formed from `released` and c where they are (WasmCsr.matTVecDiff; c is copied there first
   * unless it was put in broadcastInto) and D x is written into the share: the operations of
   * solve(), so the same bits, without three passes over N-vectors (forming w, and copying it
   * and D x into and out of the kernels' memory).
   */
  private updateInPlace(Dw: WasmCsr, c: Float64Array, rho: number): void {
    const { released, x } = this;
    if (!(rho > 0)) throw new RangeError(`rho must be > 0, got ${rho}`);
    const [input] = Dw.rowVectors;
    if (c !== input) input.set(c);
    if (this.form === 'primal') {
      Dw.matTVecDiff(this.tmp, released, input);
      this.solveEigenbasis(this.tmp, rho, Infinity);
    } else {
      const chol = this.chol!;
      if (rho !== chol.rho) chol.factor(rho);
      Dw.matTVecDiff(x, released, input);
      this.solveCholeskyPrimal(rho);
      this.lastIterations = 0;
    }
    Dw.matVec(this.share, x);
  }

  /**
   * x, intercept and share for target w (overwritten with the centred target), minimising
   * lambda/2 ||x||^2 + rho/2 ||D x + b - w||^2 over ||x|| <= radius. Outside the ball the
   * minimiser is that of the same problem with lambda + mu for the mu >= 0 that puts x on
   * the sphere (the KKT condition), found by Newton's method on 1/||x(mu)|| - 1/radius.
   */
  solve(w: Float64Array, rho: number, radius = Infinity): void {
    assertLength('w', w, this.n);
    if (!(rho > 0)) throw new RangeError(`rho must be > 0, got ${rho}`);
    if (!(radius > 0)) throw new RangeError(`radius must be > 0, got ${radius}`);
    const { n, x, mu } = this;
    let wm = 0;
    if (mu) {
      for (let i = 0; i < n; i++) wm += w[i];
      wm /= n;
      for (let i = 0; i < n; i++) w[i] -= wm;
    }
    if (this.form === 'cg') this.solveCg(w, rho, radius);
    else if (this.form === 'cholesky') this.solveCholesky(w, rho, radius);
    else this.solveFactored(w, rho, radius);
    this.op.mulD(this.share, x);
    if (mu) {
      this.intercept = wm - dot(mu, x);
      for (let i = 0; i < n; i++) this.share[i] += this.intercept;
    }
  }

  private solveFactored(w: Float64Array, rho: number, radius: number): void {
    // With a centred w, D~^T w = D^T w because 1^T w = 0.
    this.solveEigenbasis(this.form === 'primal' ? this.op.mulDT(this.tmp, w) : w, rho, radius);
  }

  /** solveFactored from D^T w (primal) or w (dual): the right-hand side in the eigenbasis, rho Q^T of it, then x. */
  private solveEigenbasis(v: Float64Array, rho: number, radius: number): void {
    const { n, d, k, t, tmp, x, lambda, mu } = this;
    const eigen = this.eigen!;
    const { q, ev } = eigen;
    matTVec(t, q, k, k, v);
    const muBall = Number.isFinite(radius) ? ballMultiplier(eigen, t, lambda, rho, radius) : 0;
    for (let j = 0; j < k; j++) t[j] *= shrink(lambda + muBall, rho, ev[j]);
    if (this.form === 'primal') matVec(x, q, k, k, t);
    else {
      // x = rho D~^T (lambda I + rho D~ D~^T)^-1 w~
      matVec(tmp, q, k, k, t);
      this.op.mulDT(x, tmp);
      if (mu) {
        let sa = 0;
        for (let i = 0; i < n; i++) sa += tmp[i];
        for (let j = 0; j < d; j++) x[j] -= mu[j] * sa;
      }
    }
  }

  /**
   * The cholesky form of solve: primal, x = (lambda I + rho D~^T D~)^-1 rho D~^T w~; dual,
   * x = rho D~^T (lambda I + rho D~ D~^T)^-1 w~. Outside the ball, the ball's multiplier as in
   * the cg form (solveBall), warm-started from the unconstrained x.
   */
  private solveCholesky(w: Float64Array, rho: number, radius: number): void {
    const { n, d, x, mu } = this;
    const chol = this.chol!;
    if (rho !== chol.rho) chol.factor(rho);
    if (this.side === 'primal') {
      this.op.mulDT(x, w); // w is centred, so D~^T w = D^T w
      this.solveCholeskyPrimal(rho);
    } else {
      const a = this.tmp;
      a.set(w);
      chol.solveInPlace(a);
      this.op.mulDT(x, a);
      let sa = 0;
      if (mu) for (let i = 0; i < n; i++) sa += a[i];
      for (let j = 0; j < d; j++) x[j] = rho * (x[j] - (mu ? mu[j] * sa : 0));
    }
    this.lastIterations = Number.isFinite(radius) && dot(x, x) > radius * radius ? solveBall(this.solver!, x, this.rhsOf(w, rho), rho, radius) : 0;
  }

  /** The primal cholesky solve from x = D^T w: x = (lambda I + rho D~^T D~)^-1 rho D^T w. */
  private solveCholeskyPrimal(rho: number): void {
    const { d, x } = this;
    for (let j = 0; j < d; j++) x[j] *= rho;
    this.chol!.solveInPlace(x);
  }

  /** rho D~^T w~ (w centred), the right-hand side of the d x d system. */
  private rhsOf(w: Float64Array, rho: number): Float64Array {
    const rhs = this.cgRhs ?? (this.cgRhs = new Float64Array(this.d));
    this.op.mulDT(rhs, w); // w is centred, so D~^T w = D^T w
    for (let j = 0; j < this.d; j++) rhs[j] *= rho;
    return rhs;
  }

  /**
   * The cg form of solve: rho D~^T w~ as the right-hand side, x from conjugate gradients
   * (warm-started from the previous x), then the ball (solveBall).
   */
  private solveCg(w: Float64Array, rho: number, radius: number): void {
    const solver = this.solver!;
    const rhs = this.rhsOf(w, rho);
    const iterations = solver.cg(this.x, rhs, 0, rho);
    this.lastIterations = iterations + (Number.isFinite(radius) ? solveBall(solver, this.x, rhs, rho, radius) : 0);
  }

  /** The paper's perturbation of `released` (eq. 17; see privacy-ball.ts, addModelNoise). Without an intercept only. */
  addModelNoise(sigma: number, normal: (out: Float64Array, sigma: number) => void): void {
    if (this.mu) throw new RangeError('the paper mechanism is not defined with an intercept');
    addModelNoise(this.released, this.op, this.eigen ?? { solver: this.solver!, lambda: this.lambda }, sigma, normal);
  }

  /**
   * Effective degrees of freedom of the fit for this rho: the trace of the map from w to the
   * share, sum_j rho ev_j / (lambda + rho ev_j), plus 1 for the intercept (factorised forms only).
   */
  hatTrace(rho: number): number {
    if (!this.eigen) throw new RangeError('hatTrace needs an eigendecomposition');
    const { ev } = this.eigen;
    let t = this.mu ? 1 : 0;
    for (let j = 0; j < this.k; j++) t += (rho * ev[j]) / (this.lambda + rho * ev[j]);
    return t;
  }

  /** ||x||^2 (the intercept is not penalised). */
  penaltySq(): number {
    return dot(this.x, this.x);
  }

  /** Scores D x + b for another feature matrix with the same columns (the test set). */
  scores(X: Csr | Dense): Float64Array {
    return predictScores(X, this.x, this.intercept);
  }
}
