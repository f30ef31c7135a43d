import {
  type Csc,
  type Csr,
  cscMatTVec,
  csrToCsc,
  assertLength,
  csrColumnMeans,
  csrGram,
  csrMatVec,
  csrOuterGram,
  dot,
  matTVec,
  matVec,
  symmetricEigen,
} from '@admm-share/core';

/**
 * The party's x-update for R(x) = ||x||^2 / 2, in the form both ADMM variants share:
 *
 *   x_m = argmin_x  lambda/2 ||x||^2 + rho/2 ||D_m x + b 1 - w||^2,   w = s_m - c
 *
 * (exact sharing: Boyd et al. 2011 eq. 7.12 with c = mean(s) - zbar + u; the paper's
 * Algorithm 1 eq. 7 with c = sum(s) - z + y/rho). b is an optional unpenalised intercept.
 *
 * The factorisation is computed once: an eigendecomposition of the (column-centred, with
 * an intercept) Gram matrix D^T D, d x d, or of D D^T, N x N, when d > N. With it the
 * solve costs two dense products per round for any rho, so rho can adapt without
 * refactoring. Eliminating b: b = mean(w - D x), and x solves the ridge problem on the
 * centred matrix D~ = D - 1 mu^T and centred target w~.
 */
export class RidgeXUpdate {
  readonly n: number;
  readonly d: number;
  readonly form: 'primal' | 'dual';
  /** Coefficients (without the intercept). */
  readonly x: Float64Array;
  intercept = 0;
  /** The share s_m = D_m x + b. */
  readonly share: Float64Array;

  private readonly mu: Float64Array | undefined;
  /** D by columns, for the D^T w product of every round. */
  private readonly Dc: Csc;
  private readonly q: Float64Array;
  private readonly ev: Float64Array;
  private readonly k: number;
  private readonly wc: Float64Array;
  private readonly t: Float64Array;
  private readonly tmp: Float64Array;

  constructor(
    private readonly D: Csr,
    private readonly lambda: number,
    readonly withIntercept: boolean,
  ) {
    if (!(lambda >= 0)) throw new RangeError(`lambda must be >= 0, got ${lambda}`);
    this.n = D.rows;
    this.d = D.cols;
    this.form = this.d <= this.n ? 'primal' : 'dual';
    this.mu = withIntercept ? csrColumnMeans(D) : undefined;
    this.Dc = csrToCsc(D);
    let gram: Float64Array;
    if (this.form === 'primal') {
      this.k = this.d;
      gram = csrGram(D);
      if (this.mu) {
        // (D - 1 mu^T)^T (D - 1 mu^T) = D^T D - N mu mu^T
        const { mu, n, d } = this;
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) gram[i * d + j] -= n * mu[i] * mu[j];
      }
    } else {
      this.k = this.n;
      gram = csrOuterGram(D);
      if (this.mu) centreSymmetric(gram, this.n);
    }
    const { values, vectors } = symmetricEigen(gram, this.k);
    const top = values.reduce((a, v) => Math.max(a, v), 0);
    // Rounding leaves eigenvalues of a PSD matrix slightly negative or tiny positive;
    // treat those as exact zeros (their directions are the null space).
    this.ev = values.map((v) => (v > 1e-12 * top ? v : 0));
    this.q = vectors;
    this.x = new Float64Array(this.d);
    this.share = new Float64Array(this.n);
    this.wc = new Float64Array(this.n);
    this.t = new Float64Array(this.k);
    this.tmp = new Float64Array(this.k);
  }

  /** Target of the next update: w = s_m - c, c as broadcast by the coordinator. */
  updateFromBroadcast(c: Float64Array, rho: number): void {
    assertLength('c', c, this.n);
    const { wc, share } = this;
    for (let i = 0; i < this.n; i++) wc[i] = share[i] - c[i];
    this.solve(wc, rho);
  }

  /** x, intercept and share for target w (overwritten with the centred target). */
  solve(w: Float64Array, rho: number): void {
    assertLength('w', w, this.n);
    if (!(rho > 0)) throw new RangeError(`rho must be > 0, got ${rho}`);
    const { n, d, k, q, ev, t, tmp, x, lambda, mu, D } = this;
    let wm = 0;
    if (mu) {
      for (let i = 0; i < n; i++) wm += w[i];
      wm /= n;
      for (let i = 0; i < n; i++) w[i] -= wm;
    }
    // With a centred w, D~^T w = D^T w because 1^T w = 0.
    if (this.form === 'primal') {
      cscMatTVec(tmp, this.Dc, w);
      matTVec(t, q, k, k, tmp);
      for (let j = 0; j < k; j++) t[j] *= shrink(lambda, rho, ev[j]);
      matVec(x, q, k, k, t);
    } else {
      // x = rho D~^T (lambda I + rho D~ D~^T)^-1 w~
      matTVec(t, q, k, k, w);
      for (let j = 0; j < k; j++) t[j] *= shrink(lambda, rho, ev[j]);
      matVec(tmp, q, k, k, t);
      cscMatTVec(x, this.Dc, tmp);
      if (mu) {
        let sa = 0;
        for (let i = 0; i < n; i++) sa += tmp[i];
        for (let j = 0; j < d; j++) x[j] -= mu[j] * sa;
      }
    }
    csrMatVec(this.share, D, x);
    if (mu) {
      this.intercept = wm - dot(mu, x);
      for (let i = 0; i < n; i++) this.share[i] += this.intercept;
    }
  }

  /** ||x||^2 (the intercept is not penalised). */
  penaltySq(): number {
    return dot(this.x, this.x);
  }

  /** Scores D x + b for another feature matrix with the same columns (the test set). */
  scores(X: Csr): Float64Array {
    const out = csrMatVec(new Float64Array(X.rows), X, this.x);
    if (this.intercept !== 0) for (let i = 0; i < out.length; i++) out[i] += this.intercept;
    return out;
  }
}

/** rho / (lambda + rho * ev); a zero eigenvalue with lambda = 0 gives the minimum-norm solution. */
function shrink(lambda: number, rho: number, ev: number): number {
  const den = lambda + rho * ev;
  return den > 0 ? rho / den : 0;
}

/** K <- C K C with C = I - 1 1^T / n (double centring), in place. */
function centreSymmetric(k: Float64Array, n: number): void {
  const rowMean = new Float64Array(n);
  let all = 0;
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let j = 0; j < n; j++) s += k[i * n + j];
    rowMean[i] = s / n;
    all += s;
  }
  all /= n * n;
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) k[i * n + j] += all - rowMean[i] - rowMean[j];
}
