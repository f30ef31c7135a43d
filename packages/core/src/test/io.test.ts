import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type Csr,
  CsrBuilder,
  DataError,
  MAX_ABS_VALUE,
  binaryLabels,
  numericLabels,
  readCsvFeatures,
  readLabelFile,
  readLibsvm,
  writeFileAtomic,
} from '../index.js';
import { tempDir } from './support.js';

const dir = tempDir({ after }, 'admm-core-io-');

let counter = 0;
/** Writes `text` to a fresh file in the temp dir and returns its path. */
function file(text: string, ext = '.txt'): string {
  const p = join(dir, `f${counter++}${ext}`);
  writeFileSync(p, text);
  return p;
}

/** Plain arrays of a CSR matrix, for deepEqual against hand-written expectations. */
function plain(a: Csr) {
  return {
    rows: a.rows,
    cols: a.cols,
    indptr: Array.from(a.indptr),
    indices: Array.from(a.indices),
    values: Array.from(a.values),
  };
}

/** Asserts that fn throws a DataError naming `path` and (if given) `:line:`. */
function throwsData(fn: () => unknown, path: string, line: number | undefined, detail?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof DataError, `expected DataError, got ${String(err)}`);
    assert.ok(err.message.includes(path), `message '${err.message}' does not name ${path}`);
    if (line !== undefined) {
      assert.ok(err.message.includes(`${path}:${line}:`), `message '${err.message}' does not name line ${line}`);
      assert.equal(err.line, line);
    } else {
      assert.equal(err.line, undefined);
      assert.ok(err.message.startsWith(`${path}: `), `message '${err.message}' should name no line`);
    }
    assert.equal(err.file, path);
    assert.equal(err.code, 'ERR_DATA');
    assert.equal(err.exitCode, 65);
    if (detail) assert.match(err.message, detail);
    return true;
  });
}

// ---------------------------------------------------------------------------------------
// readLibsvm
// ---------------------------------------------------------------------------------------

test("readLibsvm ids 'row': label first, 1-based data rows, blank and # lines skipped", () => {
  const p = file(
    [
      '# a comment line',
      '+1 3:0.5 1:2',
      '',
      '-1 2:-1.25',
      '   ',
      '  # indented comment',
      '+1',
      '-1 4:7 2:0 1:1e-3\r',
      '',
    ].join('\n'),
  );
  const t = readLibsvm(p, { ids: 'row' });
  assert.equal(t.file, p);
  assert.deepEqual(t.ids, ['1', '2', '3', '4']);
  assert.deepEqual(t.firstTokens, ['+1', '-1', '+1', '-1']);
  assert.deepEqual(t.lines, [2, 4, 7, 8]);
  // Row 1: 1:2 3:0.5 (sorted); row 2: 2:-1.25; row 3: empty; row 4: 1:1e-3 4:7 (2:0 not stored).
  assert.deepEqual(plain(t.X), {
    rows: 4,
    cols: 4,
    indptr: [0, 2, 3, 3, 5],
    indices: [0, 2, 1, 0, 3],
    values: [2, 0.5, -1.25, 0.001, 7],
  });
  assert.deepEqual(t.featureNames, ['1', '2', '3', '4']);
});

test('readLibsvm: declared features widen the matrix', () => {
  const p = file('1 2:1\n0 1:3\n');
  const t = readLibsvm(p, { ids: 'row', features: 6 });
  assert.deepEqual(plain(t.X), { rows: 2, cols: 6, indptr: [0, 1, 2], indices: [1, 0], values: [1, 3] });
  assert.equal(t.featureNames.length, 6);
});

test("readLibsvm ids 'first': first token is the sample id, no labels", () => {
  const p = file('s7 5:1 2:3\n\n# c\nabc 1:-4\nx-9\n');
  const t = readLibsvm(p, { ids: 'first' });
  assert.deepEqual(t.ids, ['s7', 'abc', 'x-9']);
  assert.equal(t.firstTokens, undefined);
  assert.deepEqual(t.lines, [1, 4, 5]);
  assert.deepEqual(plain(t.X), { rows: 3, cols: 5, indptr: [0, 2, 3, 3], indices: [1, 4, 0], values: [3, 1, -4] });
});

test("readLibsvm ids 'qid': qid:ID second token is the id, first token kept as label", () => {
  const p = file('1 qid:u1 3:1 2:2\n0 qid:u20 1:5\n');
  const t = readLibsvm(p, { ids: 'qid' });
  assert.deepEqual(t.ids, ['u1', 'u20']);
  assert.deepEqual(t.firstTokens, ['1', '0']);
  assert.deepEqual(plain(t.X), { rows: 2, cols: 3, indptr: [0, 2, 3], indices: [1, 2, 0], values: [2, 1, 5] });
});

test("readLibsvm ids 'auto': qid when the first data line has qid:, row otherwise", () => {
  const q = readLibsvm(file('# header\n\n-1 qid:17 1:1\n+1 qid:4 2:1\n'), { ids: 'auto' });
  assert.deepEqual(q.ids, ['17', '4']);
  assert.deepEqual(q.firstTokens, ['-1', '+1']);
  const r = readLibsvm(file('\n-1 1:1\n+1 2:1\n'));
  assert.deepEqual(r.ids, ['1', '2']);
  assert.deepEqual(r.firstTokens, ['-1', '+1']);
  assert.deepEqual(plain(r.X), { rows: 2, cols: 2, indptr: [0, 1, 2], indices: [0, 1], values: [1, 1] });
});

test('readLibsvm: unsorted indices are sorted with their values', () => {
  const t = readLibsvm(file('0 9:9 3:3 7:7 1:1 5:5\n'), { ids: 'row' });
  assert.deepEqual(Array.from(t.X.indices), [0, 2, 4, 6, 8]);
  assert.deepEqual(Array.from(t.X.values), [1, 3, 5, 7, 9]);
});

test('readLibsvm malformed: bad token x:1', () => {
  const p = file('# c\n1 1:1\n\n0 x:1\n');
  throwsData(() => readLibsvm(p, { ids: 'row' }), p, 4);
});

test('readLibsvm malformed: non-numeric value 3:abc', () => {
  const p = file('1 1:1\n0 2:1 3:abc\n');
  throwsData(() => readLibsvm(p, { ids: 'row' }), p, 2);
});

test('readLibsvm malformed: other bad tokens (no colon, empty value, infinite value, negative index)', () => {
  for (const bad of ['7', '3:', '3:1e999', '-2:1', ':1']) {
    const p = file(`1 1:1\n1 1:1\n0 ${bad}\n`);
    throwsData(() => readLibsvm(p, { ids: 'row' }), p, 3);
  }
});

test('readLibsvm malformed: index 0', () => {
  const p = file('1 1:1\n\n0 0:1 2:1\n');
  throwsData(() => readLibsvm(p, { ids: 'row' }), p, 3);
});

test('readLibsvm malformed: duplicate index (also when not adjacent in the line)', () => {
  const p = file('1 1:1\n0 5:1 3:1 5:2\n');
  throwsData(() => readLibsvm(p, { ids: 'row' }), p, 2, /index 5/);
});

test('readLibsvm malformed: duplicate sample id', () => {
  const p = file('a 1:1\nb 1:1\n\na 2:1\n');
  throwsData(() => readLibsvm(p, { ids: 'first' }), p, 4, /'a'/);
  const q = file('1 qid:5 1:1\n0 qid:6 1:1\n1 qid:5 1:1\n');
  throwsData(() => readLibsvm(q, { ids: 'qid' }), q, 3);
});

test('readLibsvm malformed: index beyond declared features', () => {
  const p = file('1 5:1\n0 6:1\n');
  assert.equal(readLibsvm(file('1 5:1\n'), { features: 5 }).X.cols, 5);
  throwsData(() => readLibsvm(p, { ids: 'row', features: 5 }), p, 2);
});

test("readLibsvm malformed: a first token that is index:value, a missing qid", () => {
  const p = file('1 1:1\n2:1 3:1\n');
  throwsData(() => readLibsvm(p, { ids: 'row' }), p, 2);
  const q = file('1 qid:1 1:1\n0 1:1\n');
  throwsData(() => readLibsvm(q, { ids: 'qid' }), q, 2);
  const r = file('x 1:1\n1:1 2:1\n');
  throwsData(() => readLibsvm(r, { ids: 'first' }), r, 2);
});

test('readLibsvm malformed: an absurd index without declared features is a DataError', () => {
  const p = file('1 1:1\n0 99999999999:1\n');
  throwsData(() => readLibsvm(p, { ids: 'row' }), p, 2);
  const q = file('1 1:1\n0 2147483649:1\n');
  throwsData(() => readLibsvm(q, { ids: 'row' }), q, 2);
});

test('readCsvFeatures: a header after blank lines is reported on its own line', () => {
  const p = file('\n\nkey,a\n1,2\n');
  throwsData(() => readCsvFeatures(p), p, 3);
});

test("binaryLabels: '1' and '+1' are the same class", () => {
  const t = { file: 'x', ids: ['a', 'b', 'c'], raw: ['1', '-1', '+1'], lines: [1, 2, 3] };
  assert.deepEqual(Array.from(binaryLabels(t).y), [1, -1, 1]);
});

test('readLibsvm malformed: empty file / only comments', () => {
  const p = file('');
  throwsData(() => readLibsvm(p), p, undefined);
  const q = file('# nothing\n\n   \n');
  throwsData(() => readLibsvm(q), q, undefined);
});

test('readLibsvm: missing file is a DataError naming it', () => {
  const p = join(dir, 'does-not-exist.svm');
  throwsData(() => readLibsvm(p), p, undefined);
});

// ---------------------------------------------------------------------------------------
// readCsvFeatures
// ---------------------------------------------------------------------------------------

test('readCsvFeatures: header, id column anywhere, zeros not stored', () => {
  const p = file('f1,id,f2,f3\r\n1.5,a,0,2\r\n\r\n0,b,0,0\r\n-3, c ,4,0\r\n', '.csv');
  const t = readCsvFeatures(p);
  assert.deepEqual(t.ids, ['a', 'b', 'c']);
  assert.deepEqual(t.featureNames, ['f1', 'f2', 'f3']);
  assert.deepEqual(t.lines, [2, 4, 5]);
  assert.deepEqual(plain(t.X), {
    rows: 3,
    cols: 3,
    indptr: [0, 2, 2, 4],
    indices: [0, 2, 0, 1],
    values: [1.5, 2, -3, 4],
  });
});

test('readCsvFeatures: custom id column name and declared feature count', () => {
  const p = file('sample,x,y\n10,0,1e2\n11,-0.5,0\n', '.csv');
  const t = readCsvFeatures(p, { idColumn: 'sample', features: 2 });
  assert.deepEqual(t.ids, ['10', '11']);
  assert.deepEqual(plain(t.X), { rows: 2, cols: 2, indptr: [0, 1, 2], indices: [1, 0], values: [100, -0.5] });
  throwsData(() => readCsvFeatures(p, { idColumn: 'sample', features: 3 }), p, 1);
});

test('readCsvFeatures malformed: row with the wrong number of fields', () => {
  const p = file('id,a,b\n1,1,2\n2,3\n', '.csv');
  throwsData(() => readCsvFeatures(p), p, 3);
  const q = file('id,a,b\n1,1,2\n\n2,3,4,5\n', '.csv');
  throwsData(() => readCsvFeatures(q), q, 4);
});

test('readCsvFeatures malformed: non-numeric and empty values', () => {
  const p = file('id,a,b\n1,1,2\n2,3,abc\n', '.csv');
  throwsData(() => readCsvFeatures(p), p, 3, /'b'/);
  const q = file('id,a,b\n1,,2\n', '.csv');
  throwsData(() => readCsvFeatures(q), q, 2);
});

test('readCsvFeatures malformed: missing id column', () => {
  const p = file('key,a,b\n1,1,2\n', '.csv');
  throwsData(() => readCsvFeatures(p), p, 1, /'id'/);
});

test('readCsvFeatures malformed: duplicate and empty sample ids', () => {
  const p = file('id,a\nx,1\ny,2\nx,3\n', '.csv');
  throwsData(() => readCsvFeatures(p), p, 4, /'x'/);
  const q = file('id,a\nx,1\n,2\n', '.csv');
  throwsData(() => readCsvFeatures(q), q, 3);
});

test('readCsvFeatures malformed: empty file, header only', () => {
  const p = file('', '.csv');
  throwsData(() => readCsvFeatures(p), p, undefined);
  const q = file('\n\n', '.csv');
  throwsData(() => readCsvFeatures(q), q, undefined);
  const r = file('id,a\n', '.csv');
  throwsData(() => readCsvFeatures(r), r, undefined);
});

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

// ---------------------------------------------------------------------------------------
// Numbers: decimal notation only, magnitude at most MAX_ABS_VALUE
// ---------------------------------------------------------------------------------------

/** Spellings Number() accepts (or turns into 0 / Infinity) that a data file must not contain. */
const NOT_DECIMAL = [
  '0x10', '0X1f', '0b1', '0B1', '0o7', '0O7', 'Infinity', '-Infinity', '+Infinity', 'NaN', '1_000', '1e', 'e5', '1e+',
  '.', '+', '-', '.e1', '1.2.3', '--1', '+-1', '1e5.5', '1,5', '1d', '0x', '\u00a01', '1\u00a0', '\v1', '1\f',
  '\u2003' + '1', '\uff11', '\u0661',
];

test('readLibsvm: the largest accepted magnitude is 1e100, inclusive', () => {
  assert.equal(MAX_ABS_VALUE, 1e100);
  const t = readLibsvm(file('1 1:1e100 2:-1E+100 3:1e-300\n'), { ids: 'row' });
  assert.deepEqual(Array.from(t.X.values), [1e100, -1e100, 1e-300]);
});

test('readLibsvm: a value beyond 1e100 is a DataError naming the file, line, token and value', () => {
  for (const bad of ['1e308', '-1e308', '1.0000000001e100', '1e101', '1e999', '-1e999']) {
    const p = file(`+1 1:1\n\n-1 1:0.5 2:${bad}\n`);
    throwsData(() => readLibsvm(p, { ids: 'row' }), p, 3, new RegExp(`token 3 '2:${bad.replace(/[.+]/g, '\\$&')}'.*'${bad.replace(/[.+]/g, '\\$&')}' exceeds the largest accepted magnitude`));
  }
});

test('readCsvFeatures: a value beyond 1e100 is a DataError naming the file, line, column and value', () => {
  const ok = readCsvFeatures(file('id,a,b\nr1,1e100,-1e100\n', '.csv'));
  assert.deepEqual(Array.from(ok.X.values), [1e100, -1e100]);
  for (const bad of ['1e308', '-2e100', '1e400']) {
    const p = file(`id,a,b\nr1,1,2\nr2,3,${bad}\n`, '.csv');
    throwsData(() => readCsvFeatures(p), p, 3, new RegExp(`column 'b': '${bad.replace(/[.+]/g, '\\$&')}' exceeds`));
  }
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

test('readLibsvm: decimal spellings are accepted and read as written', () => {
  const forms = ['5', '+5', '-5', '5.', '.5', '-.5', '+.5e1', '5.25', '1e3', '1E3', '1e+3', '1e-3', '007', '-0.0e0', '12.5E-1'];
  // The values of `forms`, written as literals (not parsed by the code under test).
  const values = [5, 5, -5, 5, 0.5, -0.5, 5, 5.25, 1000, 1000, 1000, 0.001, 7, 0, 1.25];
  const line = forms.map((f, j) => `${j + 1}:${f}`).join(' ');
  const t = readLibsvm(file(`1 ${line}\n`), { ids: 'row' });
  const dense = new Array<number>(forms.length).fill(0);
  for (let k = 0; k < t.X.indices.length; k++) dense[t.X.indices[k]] = t.X.values[k];
  assert.deepEqual(dense, values);
});

test('readLibsvm: every non-decimal value is a DataError naming the token', () => {
  for (const bad of NOT_DECIMAL) {
    const p = file(`1 1:1\n0 3:${bad} 1:2\n`);
    throwsData(() => readLibsvm(p, { ids: 'row' }), p, 2, /token 2 '3:.*' is not a decimal number/);
    assert.throws(() => readLibsvm(p, { ids: 'row' }), (e: Error) => e.message.includes(`'${bad}' is not a decimal number`), JSON.stringify(bad));
  }
});

test("readLibsvm: non-decimal feature indices ('0x2:1' and kin) are a DataError naming the token", () => {
  for (const bad of ['0x2', '0b1', '0o7', '+2', '2.0', '1e1', 'Infinity', '1_0', '\uff12', '\u00a02']) {
    const p = file(`1 1:1\n0 ${bad}:1\n`);
    throwsData(() => readLibsvm(p, { ids: 'row' }), p, 2, new RegExp(`index '${bad.replace(/[.+]/g, '\\$&')}' is not a positive integer`));
  }
  // Leading zeros are still a decimal integer.
  assert.deepEqual(Array.from(readLibsvm(file('1 002:1\n'), { ids: 'row' }).X.indices), [1]);
});

test('readLibsvm: spaces and tabs separate tokens, CRLF and a byte order mark are fine', () => {
  const t = readLibsvm(file('\ufeff+1\t1:1 \t 2:2\t\r\n-1  3:3 \r\n'), { ids: 'row' });
  assert.deepEqual(t.firstTokens, ['+1', '-1']);
  assert.deepEqual(plain(t.X), { rows: 2, cols: 3, indptr: [0, 2, 3], indices: [0, 1, 2], values: [1, 2, 3] });
});

test('readCsvFeatures: every non-decimal value (and an empty or blank field) is a DataError naming the column and token', () => {
  for (const bad of [...NOT_DECIMAL.filter((b) => !b.includes(',')), '', ' ', '\t']) {
    const p = file(`id,a,b\nr1,1,2\nr2,${bad},4\n`, '.csv');
    throwsData(() => readCsvFeatures(p), p, 3, /column 'a': '.*' is not a decimal number/);
  }
});

test('readCsvFeatures: decimal spellings, blanks around fields, a byte order mark', () => {
  const t = readCsvFeatures(file('\ufeffid, a ,b,c,d\r\nr1,\t.5 , 5.,-1E2,+7\r\n', '.csv'));
  assert.deepEqual(t.featureNames, ['a', 'b', 'c', 'd']);
  assert.deepEqual(Array.from(t.X.values), [0.5, 5, -100, 7]);
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

// ---------------------------------------------------------------------------------------
// CsrBuilder (the readers' matrix builder)
// ---------------------------------------------------------------------------------------

test('CsrBuilder: entries over many blocks come out in order, zeros are not stored, build() once', () => {
  const b = new CsrBuilder();
  const indptr = [0];
  const indices: number[] = [];
  const values: number[] = [];
  // 150 000 entries (more than two blocks of 65 536), rows of 1..12 entries, every 5th value 0.
  let e = 0;
  for (let i = 0; e < 150_000; i++) {
    for (let j = 0; j < (i % 12) + 1; j++, e++) {
      const v = e % 5 === 0 ? 0 : e + 0.5;
      b.push(3 * j, v);
      if (v !== 0) {
        indices.push(3 * j);
        values.push(v);
      }
    }
    b.endRow();
    indptr.push(indices.length);
  }
  const X = b.build();
  assert.deepEqual(plain(X), { rows: indptr.length - 1, cols: 34, indptr, indices, values });
  assert.equal(X.indices.length, X.indices.buffer.byteLength / 4, 'exact-size arrays');
  assert.throws(() => b.build(), /twice/);
  assert.throws(() => new CsrBuilder(2).build(1), RangeError);
});

// ---------------------------------------------------------------------------------------
// writeFileAtomic
// ---------------------------------------------------------------------------------------

test('writeFileAtomic: writes, overwrites, and leaves no temporary file', () => {
  const sub = mkdtempSync(join(dir, 'atomic-'));
  const target = join(sub, 'model.json');
  writeFileAtomic(target, 'first version, rather long content\n');
  assert.equal(readFileSync(target, 'utf8'), 'first version, rather long content\n');
  assert.deepEqual(readdirSync(sub), ['model.json']);
  writeFileAtomic(target, 'short');
  assert.equal(readFileSync(target, 'utf8'), 'short');
  writeFileAtomic(target, Uint8Array.of(0xe2, 0x82, 0xac));
  assert.equal(readFileSync(target, 'utf8'), '€');
  assert.deepEqual(readdirSync(sub), ['model.json']);
});

test('writeFileAtomic: a failed write throws and leaves no temporary file', () => {
  const sub = mkdtempSync(join(dir, 'atomic-fail-'));
  // The target is an existing non-empty directory, so the final rename fails.
  const target = join(sub, 'occupied');
  mkdirSync(target);
  writeFileSync(join(target, 'x'), 'keep');
  assert.throws(() => writeFileAtomic(target, 'data'));
  assert.deepEqual(readdirSync(sub), ['occupied']);
  assert.equal(readFileSync(join(target, 'x'), 'utf8'), 'keep');
});

test('writeFileAtomic: the mode applies even over a temporary file left behind by a crash', () => {
  const sub = mkdtempSync(join(dir, 'atomic-mode-'));
  const target = join(sub, 'secret.token');
  const stale = join(sub, `.secret.token.${process.pid}.tmp`);
  writeFileSync(stale, 'old', { mode: 0o644 });
  writeFileAtomic(target, 'new\n', 0o600);
  assert.equal(statSync(target).mode & 0o777, 0o600);
  assert.equal(readFileSync(target, 'utf8'), 'new\n');
  assert.deepEqual(readdirSync(sub), ['secret.token']);
});
