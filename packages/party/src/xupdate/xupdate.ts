import { availableParallelism } from 'node:os';
import { setImmediate as nextTurn } from 'node:timers/promises';
import seedrandom from 'seedrandom';
import {
  type Csr,
  type Dense,
  ConfigError,
  DenseThreads,
  assertLength,
  choleskyRows,
  choleskySolveInPlace,
  csrColumnMeans,
  csrGramRows,
  csrGramVec,
  csrMatTVec,
  csrMatVec,
  csrOuterGramRows,
  csrToDense,
  denseColumnMeans,
  denseGramRows,
  denseMatTVec,
  denseMatVec,
  denseOuterGramRows,
  gramPanel,
  dot,
  isDense,
  packedAt,
  packedLength,
  unpackSymmetric,
  matTVec,
  matVec,
  PANEL_ROWS,
  predictScores,
  preferDense,
  sharedFloat64,
  symmetricEigen,
  WasmCsr,
  WasmCholesky,
  WasmPanel,
} from '@admm-share/core';

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
 * refactors); beyond that, or when rho varies, conjugate gradients. A block with at least
 * half its entries non-zero is kept dense (row-major) and multiplied as such; a sparse one as
 * CSR only (D^T w scatters over its rows). Eliminating b: b = mean(w - D x), and x solves the ridge problem on the
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
  /** cholesky form: milliseconds of the last factorisation (Gram matrix and Cholesky). */
  factorMs = 0;
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

  private readonly mu: Float64Array | undefined;
  /** cg form: squared norms of the (centred) columns, the preconditioner's diagonal. */
  private readonly colSq: Float64Array;
  /** cg form: conjugate gradient iterations of the last solve. */
  lastIterations = 0;
  /**
   * cg form: the leading eigenvectors of D~^T D~ (column-major, d each) and their eigenvalues,
   * for the deflation preconditioner (see cg); undefined for a small d, when turned off, or
   * when WebAssembly memory for them is refused.
   */
  private readonly deflation: Deflation | undefined;
  /** A deflated solve needed more than DEFLATION_GIVE_UP iterations: Jacobi from then on. */
  private deflationFailed = false;
  /** cg form: the last conjugate gradient solve's relative residual ||b - A x|| / ||b|| at its end. */
  lastResidual = 0;
  /** A sparse block, by rows: D x gathers and D^T w scatters over the same arrays (no column copy). */
  private readonly Dr: Csr | undefined;
  /** The sparse block's products in WebAssembly (Dr views its memory); undefined if it did not fit there. */
  private readonly Dw: WasmCsr | undefined;
  /** A dense block, row-major. */
  private readonly Dd: Dense | undefined;
  /** Threads beside this one for the dense block's products and Gram matrix (threadsFor), if any. */
  private readonly pool: DenseThreads | undefined;
  /** cholesky form: the lower triangle holds L, L L^T = lambda I + rho times the Gram matrix, for cholRho. */
  private chol: Float64Array | undefined;
  /** The factor's solves in WebAssembly (chol views its memory); undefined if it did not fit there. */
  private cholW: WasmCholesky | undefined;
  private cholRho = NaN;
  private readonly q: Float64Array;
  private readonly ev: Float64Array;
  private readonly k: number;
  /**
   * The block's kernels when updateFromBroadcast may run in place without bounds (updateInPlace):
   * a sparse block in their memory, a primal form (the eigenbasis or Cholesky, whose first
   * product is D^T w), no intercept (w is not centred), and the share released as it is.
   */
  private readonly inPlace: WasmCsr | undefined;
  /** The target w of updateFromBroadcast when it is formed (not by updateInPlace); made at its first use. */
  private wc: Float64Array | undefined;
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
    const D = block instanceof WasmCsr ? block.csr : block;
    this.n = D.rows;
    this.d = D.cols;
    const k = Math.min(this.d, this.n);
    this.side = this.d <= this.n ? 'primal' : 'dual';
    this.form =
      k <= (opts.eigenLimit ?? EIGEN_LIMIT)
        ? this.side
        : lambda > 0 && k <= (opts.choleskyLimit ?? CHOLESKY_LIMIT)
          ? 'cholesky'
          : 'cg';
    if (this.form === 'cg') this.side = 'primal';
    // A CSR block with at least half its entries non-zero is kept dense too.
    this.dense = isDense(D) || preferDense(D);
    if (isDense(D)) this.Dd = D;
    else if (this.dense) this.Dd = csrToDense(D);
    else {
      this.Dw = block instanceof WasmCsr ? block : WasmCsr.from(D);
      this.Dr = this.Dw?.csr ?? D;
    }
    this.mu = withIntercept ? (this.Dd ? denseColumnMeans(this.Dd) : csrColumnMeans(this.Dr!)) : undefined;
    if (this.form === 'cg' || this.form === 'cholesky') {
      // cg: preconditioned by deflation (or the diagonal of lambda I + rho D~^T D~); cholesky:
      // Jacobi-preconditioned conjugate gradients find the ball's multiplier when the ball binds (solveBall).
      this.k = this.form === 'cholesky' ? (this.side === 'primal' ? this.d : this.n) : 0;
      this.q = new Float64Array(0);
      this.ev = new Float64Array(0);
      this.colSq = this.columnSquares();
      if (this.form === 'cholesky' && opts.rho !== undefined) this.factor(opts.rho);
      // cg: the deflation preconditioner when the block is wide enough for it and its set-up
      // (on this thread, before the party answers setup) stays within DEFLATION_BUDGET.
      const rank = opts.deflationRank ?? DEFLATION_RANK;
      if (this.form === 'cg' && rank > 0 && this.deflationPays(rank)) this.deflation = this.topEigenvectors(rank);
    } else {
      this.k = k;
      const gram = centredGram(this.source(), this.side, this.mu);
      const { values, vectors } = symmetricEigen(gram, this.k);
      const top = values.reduce((a, v) => Math.max(a, v), 0);
      // Rounding leaves eigenvalues of a PSD matrix slightly negative or tiny positive;
      // treat those as exact zeros (their directions are the null space).
      this.ev = values.map((v) => (v > 1e-12 * top ? v : 0));
      this.q = vectors;
      this.colSq = new Float64Array(0);
    }
    this.x = new Float64Array(this.d);
    // A sparse block's share is in its kernels' memory, where D x is written (updateInPlace).
    this.share = this.Dw ? this.Dw.rowVectors[1] : new Float64Array(this.n);
    this.released = opts.noiseFree ? this.share : new Float64Array(this.n);
    this.inPlace = !this.mu && opts.noiseFree && this.side === 'primal' && this.form !== 'cg' ? this.Dw : undefined;
    this.t = new Float64Array(this.k);
    this.tmp = new Float64Array(this.k);
    // Last, so that a constructor that throws leaves no threads behind.
    const threads = this.Dd ? threadsFor(opts.threads ?? 0, this.Dd) : 0;
    this.pool = threads > 0 ? DenseThreads.start(this.Dd!, threads) : undefined;
  }

  /** Threads used beside this one (0: none). */
  get threads(): number {
    return this.pool?.threads ?? 0;
  }

  /** Stops the threads, if any (the x-update is not used again). */
  async close(): Promise<void> {
    this.cancelFactor();
    await this.pool?.close();
  }

  /** out = D v (length N). */
  private mulD(out: Float64Array, v: Float64Array): Float64Array {
    if (this.pool) return this.pool.matVec(out, v);
    return this.Dd ? denseMatVec(out, this.Dd, v) : this.Dw ? this.Dw.matVec(out, v) : csrMatVec(out, this.Dr!, v);
  }

  /** out = D^T w (length d). */
  private mulDT(out: Float64Array, w: Float64Array): Float64Array {
    if (this.pool) return this.pool.matTVec(out, w);
    return this.Dd ? denseMatTVec(out, this.Dd, w) : this.Dw ? this.Dw.matTVec(out, w) : csrMatTVec(out, this.Dr!, w);
  }

  /** The block as the factorisation reads it: its dense array, or its CSR arrays. */
  private source(): BlockSource {
    return this.Dd ? { dense: this.Dd } : { csr: this.Dr! };
  }

  /** What factorSystem needs to form the factor for `rho` in `into`. */
  private factorInput(rho: number, into: Float64Array): FactorInput {
    return { ...this.source(), side: this.side, mu: this.mu, lambda: this.lambda, rho, into };
  }

  /**
   * Zeros for a k x k factor (packed: packedLength(k)), formed where the solves read it:
   * WebAssembly memory, or (when it does not fit there) an array of its own. Both are shared
   * memory, so threads (DenseThreads) form the factor in place.
   */
  private factorTarget(): { cholW: WasmCholesky | undefined; chol: Float64Array } {
    const cholW = WasmCholesky.zeros(this.k);
    return { cholW, chol: cholW?.data ?? sharedFloat64(packedLength(this.k)) };
  }

  /** Squared norms of the centred columns. */
  private columnSquares(): Float64Array {
    const { n, d, mu } = this;
    const sq = new Float64Array(d);
    if (this.Dd) {
      const data = this.Dd.data;
      for (let i = 0; i < n; i++) for (let j = 0, r = i * d; j < d; j++) sq[j] += data[r + j] * data[r + j];
    } else {
      const { indices, values } = this.Dr!;
      for (let p = 0; p < values.length; p++) sq[indices[p]] += values[p] ** 2;
    }
    if (mu) for (let j = 0; j < d; j++) sq[j] -= n * mu[j] * mu[j];
    return sq;
  }

  /** cholesky form: factor lambda I + rho G~ for this rho (the Gram matrix is formed again; it is not kept). */
  private factor(rho: number): void {
    const t0 = performance.now();
    this.chol = this.cholW = undefined; // the old factor can go before the new one is formed
    this.cholRho = NaN;
    const target = this.factorTarget();
    factorSystem(this.factorInput(rho, target.chol));
    this.factored(target, rho, t0);
  }

  /** cholesky form: `target` holds the factor for `rho`, begun at `t0`. */
  private factored(target: { cholW: WasmCholesky | undefined; chol: Float64Array }, rho: number, t0: number): void {
    this.cholW = target.cholW;
    this.chol = target.chol;
    this.cholRho = rho;
    this.factorMs = performance.now() - t0;
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
    if (this.form !== 'cholesky' || rho === this.cholRho) return 0;
    const t0 = performance.now();
    this.chol = this.cholW = undefined;
    this.cholRho = NaN;
    const target = this.factorTarget();
    const token = Symbol('factorisation');
    this.factoring = token;
    let pieces = 0;
    try {
      for (const step of factorPieces(this.factorInput(rho, target.chol), PIECE_WORK, this.pool)) {
        pieces++;
        await (step ?? nextTurn());
        if (this.factoring !== token) return 0; // cancelled: nothing factored
      }
    } finally {
      if (this.factoring === token) this.factoring = undefined;
    }
    this.factored(target, rho, t0);
    return pieces;
  }

  /** The factorisation under way, if any. */
  private factoring: symbol | undefined;

  /**
   * Stop a factorisation under way (its set-up was abandoned: the connection was lost). Its
   * promise resolves with nothing factored; a later solve factors again.
   */
  cancelFactor(): void {
    this.factoring = undefined;
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
    return this.Dw?.rowVectors[0];
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
      if (rho !== this.cholRho) this.factor(rho);
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
    this.mulD(this.share, x);
    if (mu) {
      this.intercept = wm - dot(mu, x);
      for (let i = 0; i < n; i++) this.share[i] += this.intercept;
    }
  }

  private solveFactored(w: Float64Array, rho: number, radius: number): void {
    // With a centred w, D~^T w = D^T w because 1^T w = 0.
    this.solveEigenbasis(this.form === 'primal' ? this.mulDT(this.tmp, w) : w, rho, radius);
  }

  /** solveFactored from D^T w (primal) or w (dual): the right-hand side in the eigenbasis, rho Q^T of it, then x. */
  private solveEigenbasis(v: Float64Array, rho: number, radius: number): void {
    const { n, d, k, q, ev, t, tmp, x, lambda, mu } = this;
    matTVec(t, q, k, k, v);
    const muBall = Number.isFinite(radius) ? this.ballMultiplier(rho, radius) : 0;
    for (let j = 0; j < k; j++) t[j] *= shrink(lambda + muBall, rho, ev[j]);
    if (this.form === 'primal') matVec(x, q, k, k, t);
    else {
      // x = rho D~^T (lambda I + rho D~ D~^T)^-1 w~
      matVec(tmp, q, k, k, t);
      this.mulDT(x, tmp);
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
    if (rho !== this.cholRho) this.factor(rho);
    if (this.side === 'primal') {
      this.mulDT(x, w); // w is centred, so D~^T w = D^T w
      this.solveCholeskyPrimal(rho);
    } else {
      const a = this.tmp;
      a.set(w);
      this.cholSolve(a);
      this.mulDT(x, a);
      let sa = 0;
      if (mu) for (let i = 0; i < n; i++) sa += a[i];
      for (let j = 0; j < d; j++) x[j] = rho * (x[j] - (mu ? mu[j] * sa : 0));
    }
    this.lastIterations = Number.isFinite(radius) && dot(x, x) > radius * radius ? this.solveBall(this.rhsOf(w, rho), rho, radius) : 0;
  }

  /** The primal cholesky solve from x = D^T w: x = (lambda I + rho D~^T D~)^-1 rho D^T w. */
  private solveCholeskyPrimal(rho: number): void {
    const { d, x } = this;
    for (let j = 0; j < d; j++) x[j] *= rho;
    this.cholSolve(x);
  }

  /** b = (L L^T)^-1 b with the factor (k x k), in WebAssembly when it is there. */
  private cholSolve(b: Float64Array): void {
    if (this.cholW) this.cholW.solveInPlace(b);
    else choleskySolveInPlace(this.chol!, this.k, b);
  }

  /** rho D~^T w~ (w centred), the right-hand side of the d x d system. */
  private rhsOf(w: Float64Array, rho: number): Float64Array {
    const rhs = this.cgRhs ?? (this.cgRhs = new Float64Array(this.d));
    this.mulDT(rhs, w); // w is centred, so D~^T w = D^T w
    for (let j = 0; j < this.d; j++) rhs[j] *= rho;
    return rhs;
  }

  /**
   * The cg form of solve: rho D~^T w~ as the right-hand side, x from conjugate gradients
   * (warm-started from the previous x), then the ball (solveBall).
   */
  private solveCg(w: Float64Array, rho: number, radius: number): void {
    const rhs = this.rhsOf(w, rho);
    const iterations = this.cg(this.x, rhs, 0, rho);
    this.lastIterations = iterations + (Number.isFinite(radius) ? this.solveBall(rhs, rho, radius) : 0);
  }

  /**
   * x (the unconstrained minimiser on entry) kept in the ball: outside it, Newton's method on
   * 1/||x(m)|| - 1/radius as in ballMultiplier, with ||x(m)||^2 and its derivative
   * -2 x^T ((lambda + m) I + rho D~^T D~)^-1 x each from one conjugate gradient solve.
   * Returns the iterations.
   */
  private solveBall(rhs: Float64Array, rho: number, radius: number): number {
    const { d, x } = this;
    let iterations = 0;
    let f = dot(x, x);
    if (f > radius * radius) {
      const y = new Float64Array(d);
      let m = 0;
      for (let it = 0; it < 100; it++) {
        y.set(x);
        iterations += this.cg(y, x, m, rho);
        const df = -2 * dot(x, y);
        const step = (1 / Math.sqrt(f) - 1 / radius) / (-0.5 * df * f ** -1.5);
        m = Math.max(0, m - step);
        iterations += this.cg(x, rhs, m, rho);
        f = dot(x, x);
        if (Math.abs(step) <= 1e-12 * Math.max(1, m)) break;
      }
      // The solves are accurate to 1e-12, not exact: never leave x outside the ball.
      if (f > radius * radius) {
        const scale = radius / Math.sqrt(f);
        for (let j = 0; j < d; j++) x[j] *= scale;
      }
    }
    return iterations;
  }

  /**
   * ((lambda + shift) I + rho D~^T D~) out = rhs by preconditioned conjugate gradients (deflation or Jacobi),
   * warm-started from `out`, until the residual is below 1e-12 of the right-hand side
   * (numerically the exact solution). D~ v = D v - (mu^T v) 1 is applied implicitly.
   * Returns the iterations.
   */
  private cg(out: Float64Array, rhs: Float64Array, shift: number, rho: number): number {
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
    const { d, colSq, deflation } = this;
    const diag = this.lambda + shift;
    const [r, z, p, ap] = this.cgVectors ?? (this.cgVectors = [0, 1, 2, 3].map(() => new Float64Array(d)) as [Float64Array, Float64Array, Float64Array, Float64Array]);
    const apply = (res: Float64Array, v: Float64Array) => {
      this.gramTimes(res, v);
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
    const { d } = this;
    const k = rank + DEFLATION_OVERSAMPLING;
    const gramCost = this.Dr ? 2 * this.Dr.values.length : 2 * this.n * d;
    const setup = (DEFLATION_POWER + 1) * (k * gramCost + 2 * k * k * d) + k * k * d + rank * k * d;
    return d >= 2 * k && 2 * rank * d <= gramCost && setup <= DEFLATION_BUDGET;
  }

  /** res = D~^T D~ v (length d), D~ v = D v - (mu^T v) 1 applied implicitly. */
  private gramTimes(res: Float64Array, v: Float64Array): void {
    const { n, d, mu } = this;
    if (this.Dr) {
      // D~^T D~ v = D^T D v - N (mu^T v) mu, one pass over the rows.
      if (this.Dw) this.Dw.gramVec(res, v);
      else csrGramVec(res, this.Dr, v);
      if (mu) {
        const centre = n * dot(mu, v);
        for (let j = 0; j < d; j++) res[j] -= centre * mu[j];
      }
    } else {
      const scratchN = this.wcg ?? (this.wcg = new Float64Array(n));
      this.mulD(scratchN, v);
      if (mu) {
        const centre = dot(mu, v);
        for (let i = 0; i < n; i++) scratchN[i] -= centre;
      }
      this.mulDT(res, scratchN); // 1^T D~ v = 0, so no mu correction here
    }
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
    const { d } = this;
    const k = rank + DEFLATION_OVERSAMPLING;
    const rng = seedrandom('admm-share deflation');
    let Q = Float64Array.from({ length: k * d }, () => rng() - 0.5);
    orthonormaliseColumns(Q, d, k);
    const times = (V: Float64Array) => {
      const out = new Float64Array(k * d);
      for (let c = 0; c < k; c++) this.gramTimes(out.subarray(c * d, (c + 1) * d), V.subarray(c * d, (c + 1) * d));
      return out;
    };
    for (let it = 0; it < DEFLATION_POWER; it++) {
      Q = times(Q);
      orthonormaliseColumns(Q, d, k);
    }
    const Y = times(Q);
    const T = new Float64Array(k * k);
    for (let a = 0; a < k; a++)
      for (let b = 0; b <= a; b++) {
        let acc = 0;
        for (let j = 0; j < d; j++) acc += Q[a * d + j] * Y[b * d + j] + Q[b * d + j] * Y[a * d + j];
        T[a * k + b] = T[b * k + a] = acc / 2;
      }
    const { values, vectors } = symmetricEigen(T, k);
    const order = [...values.keys()].sort((a, b) => values[b] - values[a]).slice(0, rank);
    const U = new Float64Array(rank * d);
    order.forEach((e, pos) => {
      for (let c = 0; c < k; c++) {
        const v = vectors[c * k + e];
        for (let j = 0; j < d; j++) U[pos * d + j] += v * Q[c * d + j];
      }
    });
    // Single precision halves the preconditioner's traffic each iteration. U is then
    // orthonormal only to about rank * 2^-24, which the clamp on theta in cg allows for, so the
    // preconditioner stays symmetric positive definite and the solution is as exact as before.
    // The panel lives in WebAssembly memory; if that is refused, the block keeps Jacobi.
    const panel = WasmPanel.from(Float32Array.from(U), rank, d);
    return panel && { panel, lam: Float64Array.from(order, (e) => Math.max(values[e], 0)) };
  }

  private cgRhs: Float64Array | undefined;
  private wcg: Float64Array | undefined;
  private cgVectors: [Float64Array, Float64Array, Float64Array, Float64Array] | undefined;

  /**
   * ||x(m)||^2 = sum_j g_j (t_j s_j(m))^2 with s_j(m) = rho / (lambda + m + rho ev_j), g_j = 1
   * (primal) or ev_j (dual: ||D^T a||^2 = a^T D D^T a); returns the m >= 0 that makes it
   * radius^2, or 0 when the unconstrained minimiser is inside the ball.
   */
  private ballMultiplier(rho: number, radius: number): number {
    const { k, ev, t, lambda } = this;
    const primal = this.form === 'primal';
    const normSq = (m: number): [number, number] => {
      let f = 0;
      let df = 0;
      for (let j = 0; j < k; j++) {
        const g = primal ? 1 : ev[j];
        const den = lambda + m + rho * ev[j];
        if (!(den > 0) || g === 0) continue;
        const a = (rho * t[j]) / den;
        f += g * a * a;
        df -= (2 * g * a * a) / den;
      }
      return [f, df];
    };
    let [f, df] = normSq(0);
    if (f <= radius * radius) return 0;
    // phi(m) = 1/sqrt(f(m)) - 1/radius is increasing and concave: Newton from m = 0 rises
    // monotonically to the root (More and Sorensen 1983).
    let m = 0;
    for (let it = 0; it < 100; it++) {
      const phi = 1 / Math.sqrt(f) - 1 / radius;
      const dphi = -0.5 * df * f ** -1.5;
      const step = phi / dphi;
      m -= step;
      if (m < 0) m = 0;
      [f, df] = normSq(m);
      if (Math.abs(step) <= 1e-15 * Math.max(1, m)) break;
    }
    return m;
  }

  /**
   * The paper's perturbation (eq. 17): released += D xi with xi ~ N(0, sigma^2 (D^T D)^-1),
   * sampled through the cached eigendecomposition D^T D = Q diag(ev) Q^T as
   * xi = sigma Q diag(ev^-1/2) u (directions with ev = 0 get none: the pseudo-inverse).
   * In the N x N form, D xi = sigma sum_j q_j u_j over the non-zero eigenvalues of D D^T.
   * Without an eigendecomposition (cholesky and cg forms), the same distribution as D xi =
   * sigma P u, u ~ N(0, I_N), P = D (D^T D)^+ D^T the projection on D's column space (its
   * covariance is sigma^2 P, as D (D^T D)^+ D^T is): y solves D^T D y = D^T u by conjugate
   * gradients (consistent, so they converge), and D y = P u. Without an intercept only.
   */
  addModelNoise(sigma: number, normal: (out: Float64Array, sigma: number) => void): void {
    if (this.mu) throw new RangeError('the paper mechanism is not defined with an intercept');
    const { k, q, ev, n } = this;
    if (this.form === 'cholesky' || this.form === 'cg') {
      const u = new Float64Array(n);
      normal(u, sigma);
      const rhs = this.mulDT(new Float64Array(this.d), u);
      const y = new Float64Array(this.d);
      // (lambda - lambda) I + 1 D^T D: the squared condition number of D, singular when D's
      // columns are dependent (the system is consistent, so conjugate gradients still converge
      // where rounding allows). Not converged is refused: D y would miss part of the noise.
      this.cg(y, rhs, -this.lambda, 1);
      if (!(this.lastResidual <= CG_TOLERANCE))
        throw new ConfigError(`the paper mechanism's noise D xi, xi ~ N(0, sigma^2 (D^T D)^-1), did not converge in ${CG_MAX_ITERATIONS} conjugate gradient iterations on this ${this.n} x ${this.d} block (D^T D is too ill-conditioned): use --mechanism gaussian-share`);
      const py = this.mulD(new Float64Array(n), y);
      for (let i = 0; i < n; i++) this.released[i] += py[i];
      return;
    }
    const u = new Float64Array(k);
    normal(u, sigma);
    if (this.form === 'primal') {
      for (let j = 0; j < k; j++) u[j] = ev[j] > 0 ? u[j] / Math.sqrt(ev[j]) : 0;
      const xi = new Float64Array(k);
      matVec(xi, q, k, k, u);
      const dxi = this.mulD(new Float64Array(n), xi);
      for (let i = 0; i < n; i++) this.released[i] += dxi[i];
    } else {
      for (let j = 0; j < k; j++) if (ev[j] === 0) u[j] = 0;
      const dxi = new Float64Array(n);
      matVec(dxi, q, k, k, u);
      for (let i = 0; i < n; i++) this.released[i] += dxi[i];
    }
  }

  /**
   * Effective degrees of freedom of the fit for this rho: the trace of the map from w to the
   * share, sum_j rho ev_j / (lambda + rho ev_j), plus 1 for the intercept (factorised forms only).
   */
  hatTrace(rho: number): number {
    if (this.form === 'cg' || this.form === 'cholesky') throw new RangeError('hatTrace needs an eigendecomposition');
    let t = this.mu ? 1 : 0;
    for (let j = 0; j < this.k; j++) t += (rho * this.ev[j]) / (this.lambda + rho * this.ev[j]);
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

/** A party's block: dense (row-major) or CSR. */
type BlockSource = { dense: Dense; csr?: undefined } | { csr: Csr; dense?: undefined };

/** What the Cholesky factorisation needs: the block, and `into`, packedLength(k) zeros where the factor is formed (packed). */
type FactorInput = BlockSource & { side: 'primal' | 'dual'; mu: Float64Array | undefined; lambda: number; rho: number; into: Float64Array };

/** The side's Gram matrix of the centred block: D~^T D~ (d x d) or D~ D~^T (N x N), square and row-major. */
function centredGram(src: BlockSource, side: 'primal' | 'dual', mu: Float64Array | undefined): Float64Array {
  const k = side === 'primal' ? blockCols(src) : blockRows(src);
  const gram = new Float64Array(packedLength(k));
  for (const _ of centredGramPieces(src, side, mu, gram, Infinity));
  return unpackSymmetric(gram, k);
}

const blockRows = (src: BlockSource): number => (src.dense ? src.dense.rows : src.csr.rows);
const blockCols = (src: BlockSource): number => (src.dense ? src.dense.cols : src.csr.cols);

/** Multiply-adds in a piece of factorPieces: some 20 ms at the kernels' 1.5-2e9 a second. */
const PIECE_WORK = 2 ** 25;

/**
 * Entries of a dense block from which `threads: 'auto'` uses threads: 2^23 (64 MiB), where one
 * product takes some 14 ms on one thread. Each thread costs about 10 MB (its own V8 heap): on
 * the gisette-shaped set, one thread took the 1000-feature party (46 MB, under this limit)
 * over 3x its block (docs/scaling.md, "Threads for a large dense block").
 */
export const THREADS_MIN_ENTRIES = 2 ** 23;
/**
 * Most threads beside the party's own that 'auto' takes. The products stream the block through
 * memory, whose bandwidth the cores share; 2 threads in all measured 1.9-2x one on 2 cores
 * (`npm run bench:threads`); more was not measured here.
 */
export const MAX_AUTO_THREADS = 3;

/**
 * Threads beside the party's own for a dense block: a number as given, or 'auto': none for a
 * block under THREADS_MIN_ENTRIES or outside shared memory, else one less than the cores this
 * process may use (at most MAX_AUTO_THREADS). Parties that share a machine (admm-share
 * simulate) should say how many.
 */
export function threadsFor(setting: number | 'auto', block: Dense): number {
  if (setting !== 'auto') {
    if (!(Number.isInteger(setting) && setting >= 0)) throw new RangeError(`threads must be a whole number or 'auto', got ${setting}`);
    return setting;
  }
  // Threads read the block where it is: only a block in shared memory (as the party's readers make it) can have them.
  if (!(block.data.buffer instanceof SharedArrayBuffer) || block.rows * block.cols < THREADS_MIN_ENTRIES) return 0;
  return Math.max(0, Math.min(availableParallelism() - 1, MAX_AUTO_THREADS));
}

/**
 * run(from, to) over [0, count) in ranges of about `work` multiply-adds (cost(i) those of item
 * i), each range's end a multiple of `align` (or count), yielding after each.
 */
function* inPieces(count: number, work: number, cost: (i: number) => number, run: (from: number, to: number) => void, align = 1): Generator<void, void, void> {
  for (let from = 0; from < count; ) {
    let to = from;
    for (let w = 0; to < count && w < work; to++) w += cost(to);
    to = Math.min(count, Math.ceil(to / align) * align);
    run(from, to);
    from = to;
    yield;
  }
}

/**
 * The centred Gram matrix in pieces of about `work` multiply-adds (inPieces), formed packed in
 * `gram` (zeros). With `pool` (a dense block's threads; `gram` in shared memory) the threads
 * form their parts meanwhile, and the last yield is a promise of their end.
 */
function* centredGramPieces(src: BlockSource, side: 'primal' | 'dual', mu: Float64Array | undefined, gram: Float64Array, work: number, pool?: DenseThreads): Generator<Promise<void> | void, void, void> {
  const n = blockRows(src);
  const d = blockCols(src);
  const { dense, csr } = src;
  const nnz = (i: number): number => (csr ? csr.indptr[i + 1] - csr.indptr[i] : d);
  if (pool && dense) yield* pool.gram(gram, side, work);
  else if (side === 'primal') {
    if (dense) {
      const panel = gramPanel(d);
      yield* inPieces(n, work, () => (d * d) / 2, (from, to) => denseGramRows(dense, gram, from, to, panel), PANEL_ROWS);
    } else yield* inPieces(n, work, (i) => nnz(i) ** 2 / 2, (from, to) => csrGramRows(csr!, gram, from, to));
  } else if (dense) {
    // Row i of D D^T is its dot products with rows i..n-1.
    yield* inPieces(n, work, (i) => (n - i) * d, (from, to) => denseOuterGramRows(dense, gram, from, to), 2);
  } else {
    const scratch = new Float64Array(d);
    yield* inPieces(n, work, (i) => (n - i) * nnz(i), (from, to) => csrOuterGramRows(csr!, gram, from, to, scratch));
  }
  if (!mu) return;
  // (D - 1 mu^T)^T (D - 1 mu^T) = D^T D - N mu mu^T; C D D^T C with C = I - 1 1^T / N.
  if (side === 'primal') for (let i = 0, r = 0; i < d; r += ++i) for (let j = 0; j <= i; j++) gram[r + j] -= n * mu[i] * mu[j];
  else centreSymmetric(gram, n);
}

/**
 * The Cholesky factor (lower triangle) of lambda I + rho G~, G~ the side's centred Gram
 * matrix, formed in `input.into`, in pieces of about `work` multiply-adds (some 20 ms by
 * default; inPieces): the caller runs them all at once (factorSystem) or gives its event loop
 * a turn between them (RidgeXUpdate.factorInPieces). With `pool`, threads form parts of a
 * dense block's Gram matrix and factor (DenseThreads), and a yielded promise is awaited before
 * going on.
 */
export function* factorPieces(input: FactorInput, work = PIECE_WORK, pool?: DenseThreads): Generator<Promise<void> | void, void, void> {
  const { side, mu, lambda, rho, into: a } = input;
  const k = side === 'primal' ? blockCols(input) : blockRows(input);
  assertLength('factor', a, packedLength(k));
  // Threads work on a dense block's matrix where it is formed (`into` in shared memory).
  const threads = pool && input.dense ? pool : undefined;
  yield* centredGramPieces(input, side, mu, a, work, threads);
  for (let i = 0; i < a.length; i++) a[i] *= rho;
  for (let i = 0; i < k; i++) a[packedAt(i) + i] += lambda;
  const notDefinite = (): ConfigError =>
    new ConfigError(`the x-update's system (${k} x ${k}, lambda ${lambda}, rho ${rho}) is not positive definite to working precision: lambda is too small for the scale of this block's features (raise --lambda, or scale the features)`);
  if (threads) {
    if (!(yield* threads.cholesky(a, k, work))) throw notDefinite();
    return;
  }
  // Row i of the factor costs about i^2 / 2 multiply-adds.
  yield* inPieces(
    k,
    work,
    (i) => (i * i) / 2 + 1,
    (from, to) => {
      if (!choleskyRows(a, k, from, to)) throw notDefinite();
    },
  );
}

/** factorPieces all at once. */
function factorSystem(input: FactorInput): void {
  for (const _ of factorPieces(input, Infinity));
}

/**
 * The deflation preconditioner (see cg): the leading eigenvectors of G~ (a panel of columns of
 * length d, in single precision, in WebAssembly memory) and their eigenvalues.
 */
interface Deflation {
  panel: WasmPanel;
  lam: Float64Array;
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

/** Orthonormalise the k columns (column-major, d each) of Q in place: classical Gram-Schmidt, twice per column. */
function orthonormaliseColumns(Q: Float64Array, d: number, k: number): void {
  const h = new Float64Array(k);
  for (let c = 0; c < k; c++) {
    const q = Q.subarray(c * d, (c + 1) * d);
    for (let pass = 0; pass < 2; pass++) {
      for (let b = 0; b < c; b++) h[b] = dot(Q.subarray(b * d, (b + 1) * d), q);
      for (let b = 0; b < c; b++) {
        const hb = h[b];
        for (let j = 0, o = b * d; j < d; j++) q[j] -= hb * Q[o + j];
      }
    }
    const norm = Math.sqrt(dot(q, q));
    if (norm > 0) for (let j = 0; j < d; j++) q[j] /= norm;
  }
}

/**
 * Largest min(d, N) factored by an eigendecomposition: it costs min(d, N)^3 (about 3 s at 600
 * and 13 s at 1000 on a 2-core machine), and pays where rho varies (the privacy ball's
 * multiplier, the one-shot fits' penalty path) or the block is small.
 */
export const EIGEN_LIMIT = 600;
/**
 * Largest min(d, N) factored by Cholesky: min(d, N)^2 doubles (50 MB at 2500) and, to form and
 * factor, N d^2 / 2 + d^3 / 3 multiply-adds (a few seconds at 2000; docs/scaling.md). Larger
 * blocks solve each round by conjugate gradients.
 */
export const CHOLESKY_LIMIT = 2500;
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
const CG_TOLERANCE = 1e-12;
const CG_MAX_ITERATIONS = 2000;

/** rho / (lambda + rho * ev); a zero eigenvalue with lambda = 0 gives the minimum-norm solution. */
function shrink(lambda: number, rho: number, ev: number): number {
  const den = lambda + rho * ev;
  return den > 0 ? rho / den : 0;
}

/** K <- C K C with C = I - 1 1^T / n (double centring), in place, K symmetric and packed. */
function centreSymmetric(k: Float64Array, n: number): void {
  const rowMean = new Float64Array(n);
  for (let i = 0, r = 0; i < n; r += ++i) {
    for (let j = 0; j < i; j++) {
      rowMean[i] += k[r + j];
      rowMean[j] += k[r + j];
    }
    rowMean[i] += k[r + i];
  }
  let all = 0;
  for (let i = 0; i < n; i++) all += rowMean[i];
  all /= n * n;
  for (let i = 0; i < n; i++) rowMean[i] /= n;
  for (let i = 0, r = 0; i < n; r += ++i) for (let j = 0; j <= i; j++) k[r + j] += all - rowMean[i] - rowMean[j];
}
