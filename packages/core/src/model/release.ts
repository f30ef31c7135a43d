/**
 * The noise-aware side of the one-shot private training (docs/privacy.md, section 9): what
 * the label holder does with a passive party's single noised release r = v + e, e ~ N(0,
 * sigma^2 I), where v is the party's clipped score vector. Everything here is post-processing
 * of the release, so it costs the passive party nothing.
 */
import { type Csr, assertLength } from '../linalg/csr.js';

export interface Denoised {
  /** The column the combined model is fitted on: fitted + shrink (r - fitted). */
  column: Float64Array;
  /** tau^2 / (tau^2 + sigma^2): how much of the residual is kept. */
  shrink: number;
  /** tau^2, the estimated variance of the signal left after `fitted` (0 when the noise explains it all). */
  signalVariance: number;
}

/**
 * Regression calibration (Carroll et al., "Measurement Error in Nonlinear Models", ch. 4):
 * `fitted` is r's projection on what the fitter already knows (its own features and a
 * constant, with `df` effective degrees of freedom; just the mean, df = 1, without
 * features). The residual's variance is signal plus noise, tau^2 + sigma^2, so its signal
 * share tau^2 / (tau^2 + sigma^2) is the best linear estimate of v's residual from r's: the
 * column is an estimate of E[v | r, own features], and a model fitted on it may be applied
 * to the true scores v of new rows.
 *
 * tau^2 is the residual's variance less sigma^2: unbiased, but with a sampling error of about
 * sigma^2 sqrt(2/N), which can swamp a weak signal (on 6,400 rows at sigma 3 it is 0.16 against a
 * signal near 0.07), and a negative estimate clamps the shrink to 0, dropping the party's release
 * altogether. So when that estimate is below twice its own error and `target` is given (the
 * labels' residual on the same basis, divided by 1 - 2p under label flips), tau^2 is the
 * residual's covariance with it instead. The noise is independent of the labels, so only the
 * signal covaries, with an error of about sigma std(t) / sqrt(N) (0.03 above); and since the
 * release is a ridge fit of the labels (v = H t, 0 <= H <= I) the covariance is at least the
 * signal's variance (by t^T H (I - H) t when the party's and the fitter's features are
 * unrelated): it errs towards keeping more of the residual, which makes the party's weight
 * smaller, never larger. Where the variance is well determined (a9a at epsilon 10) that bias
 * costs more than the noise it saves, hence the switch.
 */
export function denoiseRelease(r: Float64Array, fitted: Float64Array, df: number, sigma: number, target?: Float64Array): Denoised {
  const n = r.length;
  assertLength('fitted', fitted, n);
  if (!(n > df)) throw new RangeError(`denoising needs more rows (${n}) than degrees of freedom (${df})`);
  let rss = 0;
  for (let i = 0; i < n; i++) rss += (r[i] - fitted[i]) ** 2;
  // The unbiased estimate, unless its sampling error could account for it (see above).
  const byVariance = rss / (n - df) - sigma * sigma;
  let signalVariance = Math.max(0, byVariance);
  if (target && byVariance < 2 * sigma * sigma * Math.sqrt(2 / (n - df))) {
    assertLength('target', target, n);
    let cov = 0;
    for (let i = 0; i < n; i++) cov += (r[i] - fitted[i]) * target[i];
    signalVariance = Math.max(0, cov / (n - df));
  }
  const shrink = signalVariance / (signalVariance + sigma * sigma);
  const column = new Float64Array(n);
  for (let i = 0; i < n; i++) column[i] = fitted[i] + shrink * (r[i] - fitted[i]);
  return { column, shrink, signalVariance };
}

/** The columns [X, c_1, ..., c_k] (X may be absent: just the dense columns), as a CSR matrix. */
export function csrWithColumns(X: Csr | undefined, n: number, columns: readonly Float64Array[]): Csr {
  if (X && X.rows !== n) throw new RangeError(`X has ${X.rows} rows, expected ${n}`);
  for (const [j, c] of columns.entries()) assertLength(`column ${j}`, c, n);
  const base = X?.cols ?? 0;
  const k = columns.length;
  const nnz = (X?.values.length ?? 0) + n * k;
  const indptr = new Int32Array(n + 1);
  const indices = new Int32Array(nnz);
  const values = new Float64Array(nnz);
  let p = 0;
  for (let i = 0; i < n; i++) {
    if (X)
      for (let q = X.indptr[i]; q < X.indptr[i + 1]; q++) {
        indices[p] = X.indices[q];
        values[p++] = X.values[q];
      }
    for (let j = 0; j < k; j++) {
      indices[p] = base + j;
      values[p++] = columns[j][i];
    }
    indptr[i + 1] = p;
  }
  return { rows: n, cols: base + k, indptr, indices, values };
}
