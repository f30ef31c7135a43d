// io: LIBSVM text written from a matrix (formatLibsvmViews, formatLibsvmWithIds), against the
// formatter it replaced: a template string per line over csrSliceColumns and csrSelectRows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Csr, csrSelectRows, csrSliceColumns, formatLibsvmViews, formatLibsvmWithIds, randomPermutation, readLibsvm } from '../index.js';
import { testFiles } from './io-support.js';

const { file } = testFiles('admm-core-io-libsvm-format-');

/** Bytes as latin1 text: compared exactly, with a readable difference. */
const bytes = (b: Buffer | string) => (typeof b === 'string' ? Buffer.from(b, 'utf8') : b).toString('latin1');

/** What predict and split wrote before (as UTF-8): `${value}` per entry, rows sliced and reordered first. */
function oldText(ids: readonly string[], X: Csr, columns: readonly [number, number], rows: ArrayLike<number>): string {
  const Y = csrSelectRows(csrSliceColumns(X, columns[0], columns[1]), rows);
  const out: string[] = [];
  for (let r = 0; r < Y.rows; r++) {
    let line = ids[rows[r]];
    for (let k = Y.indptr[r]; k < Y.indptr[r + 1]; k++) line += ` ${Y.indices[k] + 1}:${Y.values[k]}`;
    out.push(line);
  }
  return out.join('\n') + '\n';
}

/** A seeded stream in [0, 1) (mulberry32): the same data every run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Values at the edges of the arithmetic path and of String's notations, all within the readers' 1e100. */
const AWKWARD = [
  1, -1, 7, 1000, 123456789012345, 999999999999999, 1e15, 1e15 + 2, 1234567890123456, 2 ** 53, 2 ** 53 + 2, 1e20, 1e21, 1e100, -1e100,
  0.1 + 0.2, 1 / 3, -2 / 3, 0.5, 0.986, -0.096, 12345678.9, 9007199254740.993, 0.000001, 1e-6 * (1 + 2 ** -52), 9.99999e-7, 1e-7,
  0.000001234, 1.5e-5, 1e-300, -1e-300, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e100, 0.30000000000000004, 4.35, 2.675,
  1.005, 100.1, 1e-22, 1e22, 1e23, 123e-20, 0.1, 0.7, 1.1, 8.41e21,
];

/** A value of a random kind: a short decimal, a random double of any magnitude, an integer, or an awkward one. */
function value(rand: () => number): number {
  const sign = rand() < 0.5 ? -1 : 1;
  const kind = rand();
  if (kind < 0.25) return (sign * Math.round(rand() * 1e6)) / 10 ** Math.floor(rand() * 10);
  // Up to 16 digits anywhere from 1e-22 on: both sides of the 15 digits the arithmetic path takes.
  if (kind < 0.35) return (sign * Math.round(rand() * 10 ** Math.ceil(rand() * 16))) / 10 ** Math.floor(rand() * 23);
  if (kind < 0.6) return sign * rand() * 10 ** Math.floor(rand() * 400 - 300);
  if (kind < 0.75) return sign * Math.floor(rand() * 1e4);
  if (kind < 0.8) return sign * (rand() < 0.5 ? 0 : -0);
  return AWKWARD[Math.floor(rand() * AWKWARD.length)] * sign;
}

/** rows x cols, each entry stored with probability `density` (zeros and -0 among them), columns increasing. */
function matrix(rows: number, cols: number, density: number, seed: number): Csr {
  const rand = random(seed);
  const indptr = new Int32Array(rows + 1);
  const indices: number[] = [];
  const values: number[] = [];
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++)
      if (rand() < density) {
        indices.push(j);
        values.push(value(rand));
      }
    indptr[i + 1] = indices.length;
  }
  return { rows, cols, indptr, indices: Int32Array.from(indices), values: Float64Array.from(values) };
}

/** Ids, a fifth of them not ASCII, and pairs of ids that end and start with half of a surrogate pair (U+FFFD each, never the pair's character). */
const ids = (n: number, rand: () => number) =>
  Array.from({ length: n }, (_, i) => {
    const u = rand();
    return u < 0.2 ? `ü-${i}-日本` : u < 0.25 ? (i % 2 === 0 ? `hi${i}\uD83D` : `\uDE00lo${i}`) : `id${i}`;
  });

test('formatLibsvmViews writes what the old formatter wrote, byte for byte: every view of random data with awkward values, in a random row order of its own', () => {
  const X = matrix(3000, 40, 0.3, 1);
  const names = ids(X.rows, random(2));
  const views = [[0, 13], [13, 14], [14, 40], [0, 40]].map((c) => ({ columns: c as [number, number], lineOfRow: randomPermutation(X.rows) }));
  const seen: number[] = [];
  formatLibsvmViews(names, X, views, (chunks, v) => {
    seen.push(v);
    const rows = new Uint32Array(X.rows);
    views[v].lineOfRow.forEach((r, i) => (rows[r] = i));
    assert.equal(bytes(Buffer.concat(chunks)), bytes(oldText(names, X, views[v].columns, rows)), `view ${v}`);
  });
  assert.deepEqual(seen, [0, 1, 2, 3]);
  // As split.ts writes them: columns only, rows in the matrix's order.
  const identity = Uint32Array.from({ length: X.rows }, (_, i) => i);
  formatLibsvmViews(names, X, [{ columns: [0, 13] }, { columns: [13, 40] }], (chunks, v) =>
    assert.equal(bytes(Buffer.concat(chunks)), bytes(oldText(names, X, v === 0 ? [0, 13] : [13, 40], identity)), `in order, view ${v}`),
  );
});

test('a value is written as String(v): 400,000 random values of every kind, and the awkward ones', () => {
  const rand = random(3);
  const vals = [...AWKWARD, ...AWKWARD.map((v) => -v), ...Array.from({ length: 400_000 }, () => value(rand))].filter((v) => v !== 0);
  const X: Csr = { rows: vals.length, cols: 1, indptr: Int32Array.from({ length: vals.length + 1 }, (_, i) => i), indices: new Int32Array(vals.length), values: Float64Array.from(vals) };
  const lines = Buffer.concat(formatLibsvmWithIds(Array.from(vals, (_, i) => String(i)), X)).toString().split('\n');
  for (let i = 0; i < vals.length; i++) assert.equal(lines[i], `${i} 1:${String(vals[i])}`);
});

test('the written files read back as the same rows: same ids, same entries as doubles, each row once; zeros are not written', () => {
  const X = matrix(2000, 30, 0.4, 4);
  // The readers refuse magnitudes above 1e100: none here, and tiny values pass.
  for (let k = 0; k < X.values.length; k++) if (Math.abs(X.values[k]) > 1e100) X.values[k] = 1e100;
  const names = ids(X.rows, random(5));
  const lineOfRow = randomPermutation(X.rows);
  const path = file(Buffer.concat(formatLibsvmWithIds(names, X, { columns: [5, 25], lineOfRow })).toString(), '.libsvm');
  const t = readLibsvm(path, { ids: 'first', features: 20 });
  assert.equal(t.ids.length, X.rows);
  for (let r = 0; r < t.ids.length; r++) {
    const i = lineOfRow.indexOf(r);
    // A lone surrogate was written (and reads back) as U+FFFD.
    assert.equal(t.ids[r], Buffer.from(names[i]).toString());
    const want: [number, number][] = [];
    for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) if (X.indices[k] >= 5 && X.indices[k] < 25 && X.values[k] !== 0) want.push([X.indices[k] - 5, X.values[k]]);
    const got: [number, number][] = [];
    for (let k = t.X.indptr[r]; k < t.X.indptr[r + 1]; k++) got.push([t.X.indices[k], t.X.values[k]]);
    assert.deepEqual(got, want, `row ${i} (line ${r})`);
  }
  assert.equal(new Set(t.ids).size, X.rows);
  assert.ok(t.ids.some((id) => id.includes('\uFFFD')));
});

test('rows: lines in the order given, a subset allowed; no rows is a lone newline; a row twice, a row out of range, or lineOfRow that is not a permutation is refused', () => {
  const X = matrix(50, 6, 0.5, 6);
  const names = ids(X.rows, random(7));
  const rows = Uint32Array.from([49, 3, 17, 0, 22]);
  assert.equal(bytes(Buffer.concat(formatLibsvmWithIds(names, X, { rows }))), bytes(oldText(names, X, [0, 6], rows)));
  assert.equal(Buffer.concat(formatLibsvmWithIds(names, X, { rows: [] })).toString(), '\n');
  assert.throws(() => formatLibsvmWithIds(names, X, { rows: [1, 2, 1] }), /row 1 is listed twice/);
  assert.throws(() => formatLibsvmWithIds(names, X, { rows: [50] }), /row 50 out of range/);
  assert.throws(() => formatLibsvmWithIds(names, X, { lineOfRow: Array.from({ length: 50 }, (_, i) => (i === 7 ? 8 : i)) }), /not a permutation/);
  assert.throws(() => formatLibsvmWithIds(names, X, { columns: [2, 7] }), /out of range/);
  assert.throws(() => formatLibsvmWithIds(names.slice(1), X), /49 ids for 50 rows/);
});

test('long lines and many rows: lines of any length stay whole and in order across buckets', () => {
  // 40,000 short rows (many buckets) and a few rows of thousands of entries.
  const X = matrix(40_000, 3, 0.6, 8);
  const names = ids(X.rows, random(9));
  const lineOfRow = randomPermutation(X.rows);
  const rows = new Uint32Array(X.rows);
  lineOfRow.forEach((r, i) => (rows[r] = i));
  assert.equal(bytes(Buffer.concat(formatLibsvmWithIds(names, X, { lineOfRow }))), bytes(oldText(names, X, [0, 3], rows)));
  const wide = matrix(5, 20_000, 0.9, 10);
  const wideNames = ids(5, random(11));
  assert.equal(bytes(Buffer.concat(formatLibsvmWithIds(wideNames, wide, { rows: [4, 0, 2] }))), bytes(oldText(wideNames, wide, [0, 20_000], [4, 0, 2])));
});

test('a matrix whose columns do not increase in some row: every entry of a view is still written, in the order stored', () => {
  const X = matrix(300, 12, 0.5, 12);
  // Reverse the entries of every third row: still a matrix, but not in the order Csr promises.
  const indices = Int32Array.from(X.indices);
  const values = Float64Array.from(X.values);
  for (let i = 0; i < X.rows; i += 3) {
    indices.subarray(X.indptr[i], X.indptr[i + 1]).reverse();
    values.subarray(X.indptr[i], X.indptr[i + 1]).reverse();
  }
  const Y: Csr = { ...X, indices, values };
  const names = ids(Y.rows, random(13));
  const lineOfRow = randomPermutation(Y.rows);
  const rows = new Uint32Array(Y.rows);
  lineOfRow.forEach((r, i) => (rows[r] = i));
  for (const columns of [[0, 4], [4, 9], [9, 12]] as const)
    assert.equal(bytes(Buffer.concat(formatLibsvmWithIds(names, Y, { columns, lineOfRow }))), bytes(oldText(names, Y, columns, rows)), `columns ${columns}`);
});
