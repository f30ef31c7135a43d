// io: label files and labels as classes or numbers (readLabelFile, readIdFile, binaryLabels, numericLabels).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { binaryLabels, numericLabels, readIdFile, readLabelFile } from '../index.js';
import { throwsData, NOT_DECIMAL, CHUNKS, testFiles } from './io-support.js';

const { file } = testFiles('admm-core-io-labels-');

// ---------------------------------------------------------------------------------------
// Labels
// ---------------------------------------------------------------------------------------

test('readLabelFile CSV + binaryLabels: -1/+1', () => {
  const p = file('id,label\na,-1\nb,+1\nc,+1\nd,-1\n', '.csv');
  const t = readLabelFile(p);
  assert.deepEqual(t.ids, ['a', 'b', 'c', 'd']);
  assert.deepEqual(t.raw, ['-1', '+1', '+1', '-1']);
  assert.deepEqual(t.lines, [2, 3, 4, 5]);
  const b = binaryLabels(t);
  assert.deepEqual(Array.from(b.y), [-1, 1, 1, -1]);
  assert.equal(b.positive, '+1');
  assert.equal(b.negative, '-1');
});

test('binaryLabels: 0/1 maps 1 -> +1, 0 -> -1', () => {
  const p = file('label,id\n1,r1\n0,r2\n0,r3\n', '.csv');
  const b = binaryLabels(readLabelFile(p));
  assert.deepEqual(Array.from(b.y), [1, -1, -1]);
  assert.equal(b.positive, '1');
  assert.equal(b.negative, '0');
});

test("binaryLabels: strings compare as strings ('spam' > 'ham')", () => {
  const p = file('id,label\n1,ham\n2,spam\n3,ham\n', '.csv');
  const b = binaryLabels(readLabelFile(p));
  assert.deepEqual(Array.from(b.y), [-1, 1, -1]);
  assert.equal(b.positive, 'spam');
  assert.equal(b.negative, 'ham');
});

test("binaryLabels: numbers compare numerically ('10' > '9')", () => {
  const p = file('id,label\n1,9\n2,10\n3,10\n', '.csv');
  const b = binaryLabels(readLabelFile(p));
  assert.deepEqual(Array.from(b.y), [-1, 1, 1]);
  assert.equal(b.positive, '10');
  assert.equal(b.negative, '9');
});

test('readLabelFile: custom id and label columns', () => {
  const p = file('y,extra,key\nyes,0,k1\nno,0,k2\n', '.csv');
  const t = readLabelFile(p, { idColumn: 'key', labelColumn: 'y' });
  assert.deepEqual(t.ids, ['k1', 'k2']);
  assert.deepEqual(t.raw, ['yes', 'no']);
  throwsData(() => readLabelFile(p), p, 1, /'id'/);
  throwsData(() => readLabelFile(p, { idColumn: 'key' }), p, 1, /'label'/);
});

test('readLabelFile LIBSVM (row ids and qid ids) + binaryLabels', () => {
  const p = file('# labels\n+1 1:1\n-1\n\n-1 3:1 2:1\n');
  const t = readLabelFile(p);
  assert.deepEqual(t.ids, ['1', '2', '3']);
  assert.deepEqual(t.raw, ['+1', '-1', '-1']);
  assert.deepEqual(t.lines, [2, 3, 5]);
  assert.deepEqual(Array.from(binaryLabels(t).y), [1, -1, -1]);

  const q = file('0 qid:s1 1:1\n1 qid:s2\n');
  const tq = readLabelFile(q);
  assert.deepEqual(tq.ids, ['s1', 's2']);
  assert.deepEqual(Array.from(binaryLabels(tq).y), [-1, 1]);

  throwsData(() => readLabelFile(p, { ids: 'first' }), p, undefined);
});

test('binaryLabels: a third distinct value is a DataError naming its line', () => {
  const p = file('id,label\na,1\nb,0\n\nc,1\nd,2\n', '.csv');
  const t = readLabelFile(p);
  throwsData(() => binaryLabels(t), p, 6, /'2'/);
  const q = file('1 1:1\n-1 1:1\n0 1:1\n');
  throwsData(() => binaryLabels(readLabelFile(q)), q, 3, /'0'/);
});

test('binaryLabels: one class only is a DataError', () => {
  const p = file('id,label\na,1\nb,1\n', '.csv');
  throwsData(() => binaryLabels(readLabelFile(p)), p, undefined, /two classes/);
});

test('numericLabels: numbers parsed, non-numeric rejected with its line', () => {
  const p = file('id,label\na,1.5\nb,-2e3\nc,0\n', '.csv');
  assert.deepEqual(Array.from(numericLabels(readLabelFile(p))), [1.5, -2000, 0]);
  const q = file('id,label\na,1.5\nb,abc\n', '.csv');
  throwsData(() => numericLabels(readLabelFile(q)), q, 3, /'abc'/);
});

test("binaryLabels: '1' and '+1' are the same class", () => {
  const t = { file: 'x', ids: ['a', 'b', 'c'], raw: ['1', '-1', '+1'], lines: [1, 2, 3] };
  assert.deepEqual(Array.from(binaryLabels(t).y), [1, -1, 1]);
});

test('numericLabels: a label beyond 1e100 is a DataError naming its line; 1e100 itself is accepted', () => {
  assert.deepEqual(Array.from(numericLabels(readLabelFile(file('id,label\na,1e100\nb,-1e100\n', '.csv')))), [1e100, -1e100]);
  for (const bad of ['1e308', '-1e101', '1e999']) {
    const p = file(`id,label\na,1\nb,${bad}\n`, '.csv');
    throwsData(() => numericLabels(readLabelFile(p)), p, 3, /exceeds the largest accepted magnitude/);
    const q = file(`1 1:1\n${bad} 1:1\n`);
    throwsData(() => numericLabels(readLabelFile(q)), q, 2, /exceeds/);
  }
});

test('numericLabels: non-decimal labels are a DataError naming the line and the label', () => {
  for (const bad of [...NOT_DECIMAL.filter((b) => !b.includes(',')), '']) {
    const p = file(`id,label\na,1\nb,${bad}\n`, '.csv');
    throwsData(() => numericLabels(readLabelFile(p)), p, 3, /label '.*' is not a decimal number/);
  }
  assert.deepEqual(Array.from(numericLabels(readLabelFile(file('id,label\na,.5\nb,5.\nc,-1e-2\n', '.csv')))), [0.5, 5, -0.01]);
});

test("binaryLabels: '0x1' is not the number 1 (a string class of its own)", () => {
  const t = { file: 'x', ids: ['a', 'b', 'c'], raw: ['1', '0x1', '1.0'], lines: [1, 2, 3] };
  const b = binaryLabels(t);
  // One number and one string: compared as strings, '1' > '0x1'.
  assert.deepEqual([b.positive, b.negative], ['1', '0x1']);
  assert.deepEqual(Array.from(b.y), [1, -1, 1]);
  // Two numbers beyond MAX_ABS_VALUE still compare as numbers: labels only become +-1.
  assert.deepEqual(Array.from(binaryLabels({ ...t, raw: ['1e200', '-1e200', '1e200'] }).y), [1, -1, 1]);
});

test('readLabelFile and readIdFile (CSV): quoted ids with commas and doubled quotes', () => {
  const p = file('"label",id\n+1,"a,1"\n"-1","b ""2"""\n+1,c\n', '.csv');
  for (const chunkBytes of CHUNKS) {
    const t = readLabelFile(p, { chunkBytes });
    assert.deepEqual(t.ids, ['a,1', 'b "2"', 'c']);
    assert.deepEqual(t.raw, ['+1', '-1', '+1']);
    assert.deepEqual(t.lines, [2, 3, 4]);
    assert.deepEqual(readIdFile(p, { chunkBytes }).ids, ['a,1', 'b "2"', 'c']);
  }
  const dup = file('id\n"a,1"\nb\n"a,1"\n', '.csv');
  throwsData(() => readIdFile(dup), dup, 4, /duplicate sample id 'a,1' \(first seen on line 2\)/);
});

test('readLabelFile (LIBSVM) checks the feature tokens it does not keep', () => {
  const p = file('+1 1:1\n-1 2:x\n');
  throwsData(() => readLabelFile(p), p, 2, /'2:x'/);
  const q = file('+1 2:1 2:3\n');
  throwsData(() => readIdFile(q), q, 1, /index 2 appears twice/);
});
