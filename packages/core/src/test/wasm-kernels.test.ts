import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import wabtInit from 'wabt';
import {
  type Csr,
  WasmCholesky,
  WasmCsr,
  WasmPanel,
  choleskyInPlace,
  choleskySolveInPlace,
  csrFromDense,
  csrGramVec,
  csrMatTVec,
  csrMatVec,
  csrSelectRows,
} from '../index.js';
import { KERNELS_WASM } from '../wasm-kernels-bytes.js';
import { seeded } from './support.js';

/** The same doubles to the bit (Object.is tells -0 from 0). */
function same(a: Float64Array, b: Float64Array, what: string): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) assert.fail(`${what}: entry ${i} is ${b[i]}, the TypeScript gives ${a[i]}`);
}

/** rows x cols, entries in [-1, 1), a fraction `zeros` of them zero and some rows empty. */
function randomCsr(rand: () => number, rows: number, cols: number, zeros: number): Csr {
  const dense = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, () => (i % 5 === 3 || rand() < zeros ? 0 : 2 * rand() - 1)));
  return csrFromDense(dense, cols);
}

test('the committed WebAssembly is kernels.wat encoded (npm run wasm writes it)', async () => {
  const wabt = await wabtInit();
  const source = readFileSync(new URL('../../src/kernels/kernels.wat', import.meta.url), 'utf8');
  const { buffer } = wabt.parseWat('kernels.wat', source, { threads: true, simd: true }).toBinary({});
  assert.equal(Buffer.from(buffer).toString('base64'), KERNELS_WASM, 'wasm-kernels-bytes.ts is stale: run npm run wasm');
});

test('WasmCsr: D x, D^T w and D^T D v are those of csrMatVec, csrMatTVec and csrGramVec to the bit, and its csr is the matrix', () => {
  const rand = seeded(5);
  for (const [rows, cols, zeros] of [[1, 1, 0], [7, 3, 0.3], [40, 90, 0.9], [130, 17, 0.5], [5, 4, 1]] as const) {
    const a = randomCsr(rand, rows, cols, zeros);
    // A row selection and a view whose indptr does not start at 0 (as the file reader may give).
    const picked = csrSelectRows(a, Array.from({ length: rows }, (_, i) => rows - 1 - i));
    const shifted: Csr = { ...a, indptr: a.indptr.map((p) => p + 3), indices: Int32Array.from([9, 9, 9, ...a.indices]), values: Float64Array.from([7, 7, 7, ...a.values]) };
    for (const [name, m] of [['plain', a], ['rows reversed', picked], ['offset indptr', shifted]] as const) {
      const w = WasmCsr.from(m)!;
      assert.ok(w, `${name}: no instance`);
      assert.deepEqual([...w.csr.indptr], [...m.indptr].map((p) => p - m.indptr[0]), `${name}: indptr`);
      same(m.values.subarray(m.indptr[0], m.indptr[rows]), w.csr.values, `${name}: values`);
      const x = Float64Array.from({ length: cols }, () => rand() - 0.5);
      // Some zero weights: both skip those rows.
      const y = Float64Array.from({ length: rows }, (_, i) => (i % 3 === 0 ? 0 : rand() - 0.5));
      same(csrMatVec(new Float64Array(rows), m, x), w.matVec(new Float64Array(rows), x), `${name} ${rows}x${cols}: D x`);
      same(csrMatTVec(new Float64Array(cols), m, y), w.matTVec(new Float64Array(cols), y), `${name} ${rows}x${cols}: D^T w`);
      same(csrGramVec(new Float64Array(cols), m, x), w.gramVec(new Float64Array(cols), x), `${name} ${rows}x${cols}: D^T D v`);
      // A second product sees no trace of the first.
      const x2 = x.map((v) => -2 * v);
      same(csrGramVec(new Float64Array(cols), m, x2), w.gramVec(new Float64Array(cols), x2), `${name}: again`);
      assert.throws(() => w.matVec(new Float64Array(rows), new Float64Array(cols + 1)), /x has length/);
      assert.throws(() => w.matTVec(new Float64Array(cols + 1), y), /out has length/);
    }
  }
});

test('WasmCsr.fromRows selects rows straight into WebAssembly memory: the arrays of csrSelectRows, and a row out of range is refused', () => {
  const rand = seeded(6);
  const a = randomCsr(rand, 30, 12, 0.6);
  for (const order of [[], [0], [29, 3, 3, 17, 0], Array.from({ length: 30 }, (_, i) => (i * 7) % 30)]) {
    const want = csrSelectRows(a, order);
    const got = WasmCsr.fromRows(a, order)!.csr;
    assert.deepEqual([got.rows, got.cols, [...got.indptr], [...got.indices]], [want.rows, want.cols, [...want.indptr], [...want.indices]], `rows ${order}`);
    same(want.values, got.values, `rows ${order}: values`);
  }
  assert.throws(() => WasmCsr.fromRows(a, [0, 30]), /row 30 out of range 0..29/);
});

test('WasmPanel and WasmCholesky: the preconditioner panel and the triangular solves are the TypeScript to the bit', () => {
  const rand = seeded(8);
  const [cols, len] = [5, 33];
  const u = Float32Array.from({ length: cols * len }, () => rand() - 0.5);
  const panel = WasmPanel.from(u, cols, len)!;
  const r = Float64Array.from({ length: len }, () => rand() - 0.5);
  const coef = new Float64Array(cols);
  const z = r.map((v) => 2 * v);
  for (let c = 0; c < cols; c++) {
    let acc = 0;
    for (let j = 0; j < len; j++) acc += u[c * len + j] * r[j];
    coef[c] = acc;
  }
  same(coef, panel.dots(new Float64Array(cols), r), 'U^T r');
  const expect = z.slice();
  for (let c = 0; c < cols; c++) for (let j = 0; j < len; j++) expect[j] += coef[c] * u[c * len + j];
  same(expect, panel.add(z, coef), 'z + U coef');
  assert.throws(() => WasmPanel.from(u, cols, len + 1), /panel has length/);

  for (const n of [1, 2, 3, 50, 51]) {
    const g = new Float64Array((n * (n + 1)) / 2); // packed
    for (let i = 0, r = 0; i < n; r += ++i)
      for (let j = 0; j <= i; j++) {
        let s = i === j ? n : 0;
        for (let k = 0; k < 3; k++) s += Math.sin(i + k) * Math.cos(j * k + 1);
        g[r + j] = s;
      }
    choleskyInPlace(g, n);
    const chol = WasmCholesky.zeros(n)!;
    assert.ok(chol.data.buffer instanceof SharedArrayBuffer, 'the factor is in shared memory (the threads form it in place)');
    chol.data.set(g);
    const b = Float64Array.from({ length: n }, () => rand() - 0.5);
    const x = b.slice();
    choleskySolveInPlace(g, n, x);
    same(x, chol.solveInPlace(b.slice()), `n = ${n}: (L L^T)^-1 b`);
  }
});

test('data too large for WebAssembly memory gets no instance (the TypeScript loops run instead), without allocating', () => {
  const huge: Csr = { rows: 1, cols: 4, indptr: Int32Array.from([0, 2 ** 30]), indices: new Int32Array(0), values: new Float64Array(0) };
  assert.equal(WasmCsr.from(huge), undefined);
});
