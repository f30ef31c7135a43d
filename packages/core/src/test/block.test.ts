import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Csr, type Dense, DenseRows, PROBE_ROWS, isDense, packIds, readCsvFeatures, readFeatureBlock, readLibsvm } from '../index.js';
import { seeded, tempDir } from './support.js';

const dir = tempDir({ after }, 'admm-core-block-');

let counter = 0;
function file(text: string, ext = 'libsvm'): string {
  const p = join(dir, `f${counter++}.${ext}`);
  writeFileSync(p, text);
  return p;
}

/** A matrix as rows of numbers, whatever its form. */
function rowsOf(X: Csr | Dense): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < X.rows; i++) {
    const row = new Array<number>(X.cols).fill(0);
    if (isDense(X)) for (let j = 0; j < X.cols; j++) row[j] = X.data[i * X.cols + j];
    else for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) row[X.indices[k]] = X.values[k];
    out.push(row);
  }
  return out;
}

/** A matrix's shape and non-zero entries row by row (as [column, value]), whatever its form. */
function entriesOf(X: Csr | Dense): { rows: number; cols: number; entries: [number, number][][] } {
  const entries: [number, number][][] = [];
  for (let i = 0; i < X.rows; i++) {
    const row: [number, number][] = [];
    if (isDense(X)) for (let j = 0; j < X.cols; j++) X.data[i * X.cols + j] !== 0 && row.push([j, X.data[i * X.cols + j]]);
    else for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) row.push([X.indices[k], X.values[k]]);
    entries.push(row);
  }
  return { rows: X.rows, cols: X.cols, entries };
}

/** LIBSVM lines with ids, entry (i, j) from `value` (0: not written). */
function libsvm(rows: number, cols: (i: number) => number, value: (i: number, j: number) => number, digits: (i: number) => number = () => 3): string {
  const lines: string[] = [];
  for (let i = 0; i < rows; i++) {
    const toks = [`id${i}`];
    for (let j = 0; j < cols(i); j++) {
      const v = value(i, j);
      if (v !== 0) toks.push(`${j + 1}:${v.toFixed(digits(i))}`);
    }
    lines.push(toks.join(' '));
  }
  return lines.join('\n') + '\n';
}

test('readFeatureBlock: a dense file comes back dense with the same entries as the CSR reader, through growing and widening', () => {
  const rand = seeded('block-dense');
  const n = 5 * PROBE_ROWS;
  // The probe's rows are long (12 digits a value), the rest short (1 digit): the capacity
  // estimated from the probe is too small and the array grows. Rows after the probe have
  // two more columns: the array widens. Some entries are 0 (left out of the text).
  const path = file(libsvm(n, (i) => (i < PROBE_ROWS ? 30 : 32), (i, j) => (rand() < 0.1 ? 0 : 1 + Math.floor(rand() * 9)), (i) => (i < PROBE_ROWS ? 12 : 0)));
  const block = readFeatureBlock(path, { ids: 'first' });
  const csr = readLibsvm(path, { ids: 'first' });
  assert.ok(isDense(block.X), 'dense');
  assert.equal(block.X.rows, n);
  assert.equal(block.X.cols, 32);
  assert.deepEqual(rowsOf(block.X), rowsOf(csr.X));
  assert.deepEqual(block.ids, packIds(csr.ids));
  // A declared number of features beyond the largest index widens the result.
  const wide = readFeatureBlock(path, { ids: 'first', features: 40 });
  assert.equal(wide.X.cols, 40);
  assert.deepEqual(rowsOf(wide.X), rowsOf(readLibsvm(path, { ids: 'first', features: 40 }).X));
});

test('readFeatureBlock: sparse files, and files whose density changes after the probe, come back as the CSR reader reads them', () => {
  const rand = seeded('block-sparse');
  const n = 3 * PROBE_ROWS;
  const cases = {
    sparse: libsvm(n, () => 50, () => (rand() < 0.9 ? 0 : 1)),
    // Dense in the probe's rows, then nearly empty rows: CSR at the end.
    'dense, then sparse': libsvm(n, () => 20, (i) => (i < PROBE_ROWS || rand() < 0.05 ? 2 : 0)),
    // Sparse in the probe, dense after: kept CSR (the form is decided on the probe).
    'sparse, then dense': libsvm(n, () => 20, (i) => (i >= PROBE_ROWS || rand() < 0.05 ? 3 : 0)),
    // Dense in the probe's 5 columns, then rows with indices up to 16 million: CSR from the first
    // such row on (a dense array that wide would take 128 MB a row).
    'dense, then wide': libsvm(n, (i) => (i < PROBE_ROWS ? 5 : 3), (i, j) => 1 + j).replace(/\n(id1[0-9][0-9] [^\n]*)/g, (_, line: string) => `\n${line} ${16_000_000 + (line.length % 10)}:7`),
    // Fewer rows than the probe, dense: decided at the end.
    short: libsvm(PROBE_ROWS - 1, () => 5, () => 1.5),
  };
  for (const [what, text] of Object.entries(cases)) {
    const path = file(text);
    const block = readFeatureBlock(path, { ids: 'first' });
    assert.equal(isDense(block.X), what === 'short', what);
    assert.deepEqual(entriesOf(block.X), entriesOf(readLibsvm(path, { ids: 'first' }).X), what);
  }
});

test('readFeatureBlock: a dense CSV file comes back dense with the CSV reader\'s entries', () => {
  const rand = seeded('block-csv');
  const lines = ['id,a,b,c'];
  for (let i = 0; i < 2 * PROBE_ROWS + 3; i++) lines.push(`r${i},${(rand() * 10).toFixed(2)},${rand() < 0.3 ? 0 : 1},-${(rand() * 5).toFixed(1)}`);
  const path = file(lines.join('\r\n') + '\r\n', 'csv');
  const block = readFeatureBlock(path);
  const csr = readCsvFeatures(path);
  assert.ok(isDense(block.X));
  assert.deepEqual(rowsOf(block.X), rowsOf(csr.X));
  assert.deepEqual(block.featureNames, ['a', 'b', 'c']);
});

test('DenseRows: selecting rows in place, again in another order, gives the rows asked for; CSR selections and changes through the whole matrix follow the moves', () => {
  const rand = seeded('dense-rows');
  const rows = 37;
  const cols = 5;
  const data = Float64Array.from({ length: rows * cols }, () => rand() * 2 - 1);
  const original = rowsOf({ rows, cols, data: data.slice() });
  const m = new DenseRows({ rows, cols, data });
  const shuffle = (k: number) => {
    const all = Array.from({ length: rows }, (_, i) => i);
    for (let i = rows - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [all[i], all[j]] = [all[j], all[i]];
    }
    return all.slice(0, k);
  };
  for (const k of [20, 37, 5, 30]) {
    const order = shuffle(k);
    const block = m.front(order);
    assert.equal(block.rows, k);
    assert.equal(block.data.buffer, data.buffer, 'a view, not a copy');
    assert.deepEqual(rowsOf(block), order.map((r) => original[r]));
    // Selected as CSR by the file's numbering, whatever the moves so far.
    const other = shuffle(7);
    assert.deepEqual(rowsOf(m.selectCsr(other)), other.map((r) => original[r]));
  }
  assert.throws(() => m.front([1, 1]), /selected twice/);
  assert.throws(() => m.front([rows]), /out of range/);
  // A change to every row through `matrix` (in place, wherever the rows are now) is seen by the file's numbering.
  assert.equal(m.matrix.data.buffer, data.buffer);
  m.matrix.data.forEach((v, j, d) => (d[j] = 2 * v));
  const all = Array.from({ length: rows }, (_, i) => i);
  assert.deepEqual(rowsOf(m.selectCsr(all)), original.map((r) => r.map((v) => 2 * v)));
});
