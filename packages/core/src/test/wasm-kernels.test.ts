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
  classWeighted,
  choleskySolveInPlace,
  csrFromDense,
  csrGramVec,
  csrMatTVec,
  csrMatVec,
  csrSelectRows,
  expFlushed,
  flipCorrectedLogistic,
  flipCorrection,
  log1pUnit,
  logistic,
  logisticProxParams,
  vectorLayout,
  vectorMemory,
} from '../index.js';
import { KERNELS_WASM, KERNELS_WASM_UNSHARED } from '../kernels/wasm-kernels-bytes.js';
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

test('the committed WebAssembly is kernels.wat encoded, on shared memory and on memory that is not (npm run wasm writes it)', async () => {
  const wabt = await wabtInit();
  const source = readFileSync(new URL('../../src/kernels/kernels.wat', import.meta.url), 'utf8');
  const encode = (wat: string) => Buffer.from(wabt.parseWat('kernels.wat', wat, { threads: true, simd: true }).toBinary({}).buffer).toString('base64');
  const sharedImport = '(import "env" "memory" (memory 1 32768 shared))';
  assert.ok(source.includes(sharedImport));
  assert.equal(encode(source), KERNELS_WASM, 'wasm-kernels-bytes.ts is stale: run npm run wasm');
  assert.equal(encode(source.replace(sharedImport, '(import "env" "memory" (memory 1 32768))')), KERNELS_WASM_UNSHARED, 'wasm-kernels-bytes.ts is stale: run npm run wasm');
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

test('WasmCsr in place: D x into a row vector and D^T (a - b) of two are the copying products to the bit, and other arrays are refused', () => {
  const rand = seeded(11);
  for (const [rows, cols, zeros] of [[1, 1, 0], [9, 4, 0.3], [130, 17, 0.5], [6, 5, 1]] as const) {
    const m = randomCsr(rand, rows, cols, zeros);
    const w = WasmCsr.from(m)!;
    const [a, b] = w.rowVectors;
    // Not shared: V8 copies into a SharedArrayBuffer at another alignment a byte at a time.
    assert.ok(!(a.buffer instanceof SharedArrayBuffer) && a.buffer === w.csr.values.buffer, 'the row vectors are in the instance\'s memory, not shared');
    assert.equal(a.length, rows);
    assert.equal(b.length, rows);
    const x = Float64Array.from({ length: cols }, () => rand() - 0.5);
    const want = csrMatVec(new Float64Array(rows), m, x);
    assert.equal(w.matVec(b, x), b, 'D x is written into the row vector itself');
    same(want, b, `${rows}x${cols}: D x in place`);
    // Some rows with a - b = 0, which both skip.
    for (let i = 0; i < rows; i++) a[i] = i % 3 === 0 ? b[i] : rand() - 0.5;
    const diff = a.map((v, i) => v - b[i]);
    same(csrMatTVec(new Float64Array(cols), m, diff), w.matTVecDiff(new Float64Array(cols), a, b), `${rows}x${cols}: D^T (a - b)`);
    same(csrMatTVec(new Float64Array(cols), m, diff.map((v) => -v)), w.matTVecDiff(new Float64Array(cols), b, a), `${rows}x${cols}: D^T (b - a)`);
    // The row vectors are left as they were, and a copying D x still reads nothing of them.
    same(csrMatVec(new Float64Array(rows), m, x), w.matVec(new Float64Array(rows), x), 'D x into an array of the caller');
    same(want, b, 'the row vector after a copying product');
    assert.throws(() => w.matTVecDiff(new Float64Array(cols), a, diff), /rowVectors/);
    assert.throws(() => w.matTVecDiff(new Float64Array(cols), a.subarray(0), b), /rowVectors/);
    assert.throws(() => w.matTVecDiff(new Float64Array(cols + 1), a, b), /out has length/);
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

/** Distance in units in the last place of `want` (0 when equal). */
function ulps(got: number, want: number): number {
  if (Object.is(got, want)) return 0;
  return Math.abs(got - want) / 2 ** (Math.floor(Math.log2(Math.abs(want))) - 52);
}

test('expFlushed is Math.exp within an ulp where e^x is a normal double, 0 and Infinity beyond; log1pUnit is Math.log1p within an ulp on [0, 1]', () => {
  const rand = seeded('exp-log');
  for (let j = 0; j < 200_000; j++) {
    const x = j % 2 ? 1416 * rand() - 708 : 8 * rand() - 4;
    const u = ulps(expFlushed(x), Math.exp(x));
    if (u > 1) assert.fail(`expFlushed(${x}) = ${expFlushed(x)}, Math.exp ${Math.exp(x)}: ${u} ulps`);
    const e = j % 2 ? rand() : Math.exp(-40 * rand());
    const v = ulps(log1pUnit(e), Math.log1p(e));
    if (v > 1) assert.fail(`log1pUnit(${e}) = ${log1pUnit(e)}, Math.log1p ${Math.log1p(e)}: ${v} ulps`);
  }
  for (const x of [0, -0, 1e-300, -1e-300, 708, -708, Math.LN2 / 2, -Math.LN2 / 2]) assert.ok(ulps(expFlushed(x), Math.exp(x)) <= 1, `expFlushed(${x})`);
  for (const x of [708.001, 709.7, 1000, Infinity]) assert.equal(expFlushed(x), Infinity, `expFlushed(${x})`);
  for (const x of [-708.001, -745, -1000, -Infinity]) assert.equal(expFlushed(x), 0, `expFlushed(${x})`);
  for (const e of [0, 1e-300, 1e-17, 0.41421356237309503, 0.4142135623730951, 0.5, 1]) assert.ok(ulps(log1pUnit(e), Math.log1p(e)) <= 1, `log1pUnit(${e})`);
  assert.equal(log1pUnit(1), Math.LN2);
});

test('the step kernels: logisticProx and logisticLoss are logistic.proxInto and loss.value to the bit, exponentials counted alike, plain, flip-corrected and class-weighted, over odd ranges, far starts and margins beyond 708', () => {
  const rand = seeded('logistic-kernels');
  const n = 1001;
  const { at, bytes } = vectorLayout(Array<number>(6).fill(8 * n));
  const wasm = vectorMemory(bytes);
  assert.ok(wasm, 'WebAssembly memory');
  const [y, a, t, slope, curvature, out] = at.map((o) => new Float64Array(wasm.memory.buffer, o, n));
  for (let i = 0; i < n; i++) {
    y[i] = rand() < 0.5 ? -1 : 1;
    // Margins mostly moderate, some beyond the exponential's range.
    a[i] = i % 17 === 0 ? 3000 * (rand() - 0.5) : 12 * (rand() - 0.5);
    t[i] = i % 5 === 0 ? 2000 * (rand() - 0.5) : a[i];
  }
  const weights = { negative: 0.55, positive: 5.5 };
  for (const loss of [logistic, flipCorrectedLogistic(0.2), classWeighted(logistic, weights), classWeighted(flipCorrectedLogistic(0.2), weights)]) {
    const c = flipCorrection(loss.labelFlip ?? 0);
    const w = loss.classWeights ?? { negative: 1, positive: 1 };
    for (const [kappa, weight] of [[1, 1], [1e-3, 1 / n], [50, 1]]) {
      // Each class's constants: the weight times the class's weight.
      const neg = logisticProxParams(kappa, weight * w.negative, c);
      const pos = logisticProxParams(kappa, weight * w.positive, c);
      for (const [from, to] of [[0, n], [3, 10], [7, 8], [0, 1]]) {
        const tt = t.slice(from, to);
        const ss = new Float64Array(to - from);
        const cc = new Float64Array(to - from);
        const start = t.slice();
        const want = loss.proxInto(tt, ss, cc, y.slice(from, to), a.slice(from, to), kappa, weight);
        const got = wasm.kernels.logisticProx(from, to, t.byteOffset, slope.byteOffset, curvature.byteOffset, y.byteOffset, a.byteOffset, neg.R, neg.shift, neg.errScale, pos.R, pos.shift, pos.errScale);
        const what = `flip ${loss.labelFlip ?? 0}, class weights ${w.negative}/${w.positive}, kappa ${kappa}, weight ${weight}, [${from}, ${to})`;
        same(tt, t.slice(from, to), `${what}: t`);
        same(ss, slope.slice(from, to), `${what}: slope`);
        same(cc, curvature.slice(from, to), `${what}: curvature`);
        assert.equal(got, want, `${what}: exponentials`);
        // Nothing outside the range is touched.
        same(start.subarray(0, from), t.subarray(0, from), `${what}: t before the range`);
        same(start.subarray(to), t.subarray(to), `${what}: t after the range`);
        t.set(start);
      }
    }
    // The loss at scores up to far beyond the exponential's range, over an odd range.
    wasm.kernels.logisticLoss(0, n, y.byteOffset, t.byteOffset, c, out.byteOffset);
    // The kernel's loss is unweighted; the step weighs it by class (lossRange), as loss.value does.
    same(Float64Array.from(t, (s, i) => loss.value(y[i], s)), Float64Array.from(out, (l, i) => (loss.classWeights ? (y[i] > 0 ? w.positive : w.negative) * l : l)), `loss, flip ${loss.labelFlip ?? 0}, weighted ${loss.classWeights !== undefined}`);
    out.fill(7);
    wasm.kernels.logisticLoss(4, 9, y.byteOffset, t.byteOffset, c, out.byteOffset);
    assert.deepEqual([out[3], out[9]], [7, 7], 'nothing written outside [4, 9)');
  }
  assert.ok(t.some((v) => Math.abs(v) > 708), 'some margins beyond 708');
});
