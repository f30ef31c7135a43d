// Small dense matrices as row-major arrays: the symmetric eigendecomposition (ml-matrix) and
// the products with its vectors (the x-update's eigen form and deflation, the party's release).
import { EigenvalueDecomposition, Matrix } from 'ml-matrix';

/** Eigendecomposition of a symmetric n x n row-major matrix: A = Q diag(values) Q^T. */
export function symmetricEigen(a: Float64Array, n: number): { values: Float64Array; vectors: Float64Array } {
  const m = new Matrix(n, n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) m.set(i, j, a[i * n + j]);
  const evd = new EigenvalueDecomposition(m, { assumeSymmetric: true });
  const q = evd.eigenvectorMatrix;
  const vectors = new Float64Array(n * n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) vectors[i * n + j] = q.get(i, j);
  return { values: Float64Array.from(evd.realEigenvalues), vectors };
}

/** out = Q^T v for row-major n x k Q. */
export function matTVec(out: Float64Array, q: Float64Array, n: number, k: number, v: Float64Array): void {
  out.fill(0, 0, k);
  for (let i = 0; i < n; i++) {
    const vi = v[i];
    if (vi === 0) continue;
    const row = i * k;
    for (let j = 0; j < k; j++) out[j] += q[row + j] * vi;
  }
}

/** out = Q t for row-major n x k Q. */
export function matVec(out: Float64Array, q: Float64Array, n: number, k: number, t: Float64Array): void {
  for (let i = 0; i < n; i++) {
    let acc = 0;
    const row = i * k;
    for (let j = 0; j < k; j++) acc += q[row + j] * t[j];
    out[i] = acc;
  }
}

export function dot(a: Float64Array, b: Float64Array): number {
  let acc = 0;
  for (let i = 0; i < a.length; i++) acc += a[i] * b[i];
  return acc;
}
