import { type Csr, type Dense, assertLength, dot, predictScores } from '@admm-share/core';

/**
 * The party's side of mini-batch SGD over vertically partitioned data (FDML, Hu et al.
 * 2019): it scores a batch with its own block, and when the coordinator returns the loss
 * derivative with respect to each summed score it takes a gradient step on its own
 * coefficients, x -= lr (D_B^T g / |B| + lambda x) (the intercept is not penalised).
 */
export class SgdModel {
  readonly n: number;
  readonly d: number;
  readonly x: Float64Array;
  intercept = 0;
  private readonly grad: Float64Array;

  constructor(
    private readonly D: Csr,
    private readonly lambda: number,
    readonly withIntercept: boolean,
  ) {
    this.n = D.rows;
    this.d = D.cols;
    this.x = new Float64Array(this.d);
    this.grad = new Float64Array(this.d);
  }

  /** Scores D_B x + b on the given rows. */
  scoresFor(rows: Uint32Array): Float64Array {
    const { D, x } = this;
    const out = new Float64Array(rows.length);
    for (let k = 0; k < rows.length; k++) {
      const i = rows[k];
      let acc = this.intercept;
      for (let p = D.indptr[i]; p < D.indptr[i + 1]; p++) acc += D.values[p] * x[D.indices[p]];
      out[k] = acc;
    }
    return out;
  }

  /** One step on the batch `rows` with per-row loss derivatives `g`. */
  apply(rows: Uint32Array, g: Float64Array, lr: number): void {
    assertLength('gradient', g, rows.length);
    if (rows.length === 0) return;
    const { D, x, grad, lambda } = this;
    grad.fill(0);
    let gSum = 0;
    for (let k = 0; k < rows.length; k++) {
      const i = rows[k];
      const gi = g[k];
      gSum += gi;
      for (let p = D.indptr[i]; p < D.indptr[i + 1]; p++) grad[D.indices[p]] += D.values[p] * gi;
    }
    const scale = 1 / rows.length;
    for (let j = 0; j < this.d; j++) x[j] -= lr * (grad[j] * scale + lambda * x[j]);
    if (this.withIntercept) this.intercept -= lr * gSum * scale;
  }

  /** The full share D x + b. */
  share(): Float64Array {
    return predictScores(this.D, this.x, this.intercept);
  }

  penaltySq(): number {
    return dot(this.x, this.x);
  }

  scores(X: Csr | Dense): Float64Array {
    return predictScores(X, this.x, this.intercept);
  }
}
