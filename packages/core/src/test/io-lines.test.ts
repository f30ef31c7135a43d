// io: reading a file in chunks: every chunk size gives the same rows, the byte order mark, the capacity taken from the size.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { READ_CHUNK_BYTES, readCsvFeatures, readLibsvm } from '../index.js';
import { plain, throwsData, CHUNKS, csrOf, testFiles } from './io-support.js';
import { seeded } from './support.js';

const { file } = testFiles('admm-core-io-lines-');

test('byte order mark: dropped before a quoted CSV header and a LIBSVM line, also when a chunk boundary splits it', () => {
  const csv = file('\ufeff"id",a\r\nx,1\r\n', '.csv');
  const svm = file('\ufeffs1 2:1\n');
  for (const chunkBytes of CHUNKS) {
    const t = readCsvFeatures(csv, { chunkBytes });
    assert.deepEqual([t.ids, t.featureNames], [['x'], ['a']]);
    assert.deepEqual(readLibsvm(svm, { ids: 'first', chunkBytes }).ids, ['s1']);
  }
  // Only a leading one: further on, U+FEFF is part of the data.
  assert.deepEqual(readLibsvm(file('s1 1:1\n\ufeffs2 1:1\n'), { ids: 'first' }).ids, ['s1', '\ufeffs2']);
});

test('reading in chunks: every chunk size gives the rows the file was written from (lines and multi-byte ids across chunk boundaries)', () => {
  const rand = seeded('io-chunks');
  const n = 80;
  const d = 6;
  // 2-, 3- and 4-byte UTF-8 characters, some ids longer than a small chunk.
  const stems = ['é', '€', '𝄞', 'plain', 'ünïcödé-€-𝄞-a-much-longer-identifier'];
  const ids = Array.from({ length: n }, (_, i) => `${stems[i % stems.length]}${i}`);
  const dense = ids.map(() => Array.from({ length: d }, () => (rand() < 0.4 ? 0 : Math.round((rand() * 2 - 1) * 1e4) / 1e3)));
  const want = csrOf(dense, d);

  // LIBSVM, ids first: CRLF on every third line, comments and blank lines in between, entries in
  // a shuffled order on some lines.
  let svm = '# written by the test\n';
  let line = 2;
  const svmLines: number[] = [];
  dense.forEach((r, i) => {
    if (i % 7 === 3) {
      svm += '\n  # a comment\n';
      line += 2;
    }
    const entries = r.map((v, j) => (v === 0 ? '' : `${j + 1}:${v}`)).filter((e) => e !== '');
    if (i % 4 === 1) entries.reverse();
    svm += `${ids[i]}\t${entries.join(' ')}${i % 3 === 0 ? '\r\n' : '\n'}`;
    svmLines.push(line++);
  });
  const svmPath = file(svm);
  // CSV: every fifth id quoted with a comma, a doubled quote and a line break in it.
  const csvIds = ids.map((id, i) => (i % 5 === 2 ? `${id}, "quoted"\nsecond line` : id));
  let csv = `id,${Array.from({ length: d }, (_, j) => `"f ${j + 1}"`).join(',')}\r\n`;
  line = 2;
  const csvLines: number[] = [];
  dense.forEach((r, i) => {
    const id = i % 5 === 2 ? `"${csvIds[i].replace(/"/g, '""')}"` : csvIds[i];
    csv += `${id},${r.join(',')}\r\n`;
    csvLines.push(line);
    line += i % 5 === 2 ? 2 : 1;
  });
  const csvPath = file(csv, '.csv');
  const bad = file(svm + '€x 1:1 2:zz\n');

  for (const chunkBytes of [...CHUNKS, 6, 8, 9, 10, 11]) {
    const s = readLibsvm(svmPath, { ids: 'first', features: d, chunkBytes });
    assert.deepEqual(s.ids, ids, `chunkBytes ${chunkBytes}`);
    assert.deepEqual(s.lines, svmLines);
    assert.deepEqual(plain(s.X), want);
    const c = readCsvFeatures(csvPath, { chunkBytes });
    assert.deepEqual(c.ids, csvIds, `chunkBytes ${chunkBytes}`);
    assert.deepEqual(c.lines, csvLines);
    assert.deepEqual(plain(c.X), want);
    // A bad line after the rows is reported on its physical line.
    throwsData(() => readLibsvm(bad, { ids: 'first', chunkBytes }), bad, svmLines[n - 1] + 1, /'2:zz'/);
  }
});

test('reading in chunks: a file of several default-size chunks, with a line longer than a chunk', () => {
  // Row i has entries (j, i + j) for j = 1..4, except row 3, which has one entry for each of
  // the first `wide` columns (value j % 9 + 1): its line alone is longer than a chunk.
  const wide = 200_000;
  const rows = Math.ceil((2.5 * READ_CHUNK_BYTES) / 40);
  const parts: string[] = [];
  for (let i = 0; i < rows; i++) {
    if (i === 3) {
      const e: string[] = [];
      for (let j = 1; j <= wide; j++) e.push(`${j}:${(j % 9) + 1}`);
      parts.push(`row-number-${i} ${e.join(' ')}`);
    } else parts.push(`row-number-${i} 1:${i + 1} 2:${i + 2} 3:${i + 3} 4:${i + 4}`);
  }
  const text = parts.join('\n') + '\n';
  assert.ok(Buffer.byteLength(text) > 3 * READ_CHUNK_BYTES && parts[3].length > READ_CHUNK_BYTES);
  const t = readLibsvm(file(text), { ids: 'first' });
  assert.equal(t.X.rows, rows);
  assert.equal(t.X.cols, wide);
  assert.equal(t.X.values.length, 4 * (rows - 1) + wide);
  for (const i of [0, 1, 2, 4, Math.floor(rows / 2), rows - 1]) {
    assert.equal(t.ids[i], `row-number-${i}`);
    assert.equal(t.lines[i], i + 1);
    const k = t.X.indptr[i];
    assert.deepEqual([t.X.indptr[i + 1] - k, ...t.X.indices.subarray(k, k + 4)], [4, 0, 1, 2, 3]);
    assert.deepEqual(Array.from(t.X.values.subarray(k, k + 4)), [i + 1, i + 2, i + 3, i + 4]);
  }
  const k3 = t.X.indptr[3];
  assert.equal(t.X.indptr[4] - k3, wide);
  for (const j of [1, 2, 9, 10, 65_536, 65_537, wide]) assert.equal(t.X.values[k3 + j - 1], (j % 9) + 1);
});

test('chunkBytes must be a positive integer', () => {
  const p = file('1 1:1\n');
  for (const bad of [0, -1, 1.5, NaN]) assert.throws(() => readLibsvm(p, { chunkBytes: bad }), RangeError);
});

test('readLibsvm and readCsvFeatures: the densest files (1-character entries) fit the capacity taken from the file size', () => {
  const entries = (n: number) => Array.from({ length: n }, (_, j) => `${(j % 9) + 1}:1`);
  const lib = file(`1 ${entries(9).join(' ')}\n0 ${entries(9).join(' ')}\n`);
  const t = readLibsvm(lib);
  assert.equal(t.X.values.length, 18);
  assert.equal(t.X.values.buffer.byteLength, Math.ceil(statSync(lib).size / 4) * 8, 'one array sized from the file, no copy');
  const csv = file(`id,${entries(9).map((_, j) => `f${j}`).join(',')}\nx,1,2,3,4,5,6,7,8,9\ny,9,8,7,6,5,4,3,2,1\n`, '.csv');
  const c = readCsvFeatures(csv);
  assert.equal(c.X.values.length, 18);
  assert.equal(c.X.values.buffer.byteLength, Math.ceil(statSync(csv).size / 2) * 8);
});
