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
  READ_CHUNK_BYTES,
  binaryLabels,
  numericLabels,
  packIds,
  readCsvFeatures,
  readFeatureBlock,
  readIdFile,
  readLabelFile,
  readLibsvm,
  refuseDuplicates,
  writeFileAtomic,
} from '../index.js';
import { seeded, tempDir } from './support.js';

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

/**
 * Two different ASCII ids with the same 32-bit FNV-1a hash (the hash the search for repeats
 * sorts by, over an id's characters as over its UTF-8 bytes), found by brute force.
 */
function fnvCollision(): [string, string] {
  const fnv = (s: string) => {
    let h = 0x811c9dc5;
    for (let k = 0; k < s.length; k++) h = Math.imul(h ^ s.charCodeAt(k), 16777619);
    return h >>> 0;
  };
  const byHash = new Map<number, string>();
  for (let i = 0; ; i++) {
    const id = `cust-${i}`;
    const other = byHash.get(fnv(id));
    if (other !== undefined) return [other, id];
    byHash.set(fnv(id), id);
  }
}

test('duplicate ids: the first repeat in file order with the line it repeats; ids of equal hash that differ are not duplicates', () => {
  const [u, v] = fnvCollision();
  assert.notEqual(u, v);
  const lines = (ids: string[]) => ids.map((_, i) => 10 + i);
  refuseDuplicates('f', [u, 'a', v, 'b'], lines([u, 'a', v, 'b']));
  const ids = ['c', u, 'a', 'b', v, 'b', 'a', v];
  assert.throws(
    () => refuseDuplicates('f', ids, lines(ids)),
    (err: unknown) => err instanceof DataError && err.line === 15 && /duplicate sample id 'b' \(first seen on line 13\)/.test(err.message),
  );
  // A run of equal hashes holding the repeat.
  const again = ['x', u, v, 'y', u];
  assert.throws(() => refuseDuplicates('f', again, lines(again)), (err: unknown) => err instanceof DataError && err.line === 14 && new RegExp(`'${u}' \\(first seen on line 11\\)`).test(err.message));
  refuseDuplicates('f', [], []);
  refuseDuplicates('f', Array.from({ length: 50_000 }, (_, i) => `id-${i}`), Array.from({ length: 50_000 }, (_, i) => i + 1));
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
// CSV quoting (csv-parse), reading in chunks
// ---------------------------------------------------------------------------------------

/**
 * Chunk sizes for the readers: small ones put a chunk boundary inside every multi-byte
 * character, CRLF, doubled quote and byte order mark somewhere in a file; undefined is the default.
 */
const CHUNKS = [1, 2, 3, 4, 5, 7, 13, 64, 4096, undefined];

/** CSR arrays of dense rows, built directly (not with CsrBuilder): zeros are not stored. */
function csrOf(dense: readonly (readonly number[])[], cols: number) {
  const indptr = [0];
  const indices: number[] = [];
  const values: number[] = [];
  for (const r of dense) {
    r.forEach((v, j) => {
      if (v !== 0) {
        indices.push(j);
        values.push(v);
      }
    });
    indptr.push(indices.length);
  }
  return { rows: dense.length, cols, indptr, indices, values };
}

test('readCsvFeatures: quoted fields hold commas and doubled quotes, in ids and in header names', () => {
  const p = file('"id","f,1","say ""hi""",plain\n"a,b",1,"2",0\n"""q""",-1.5,0,"3"\nplain,"0","4e0",5\n', '.csv');
  for (const chunkBytes of CHUNKS) {
    const t = readCsvFeatures(p, { chunkBytes });
    assert.deepEqual(t.ids, ['a,b', '"q"', 'plain']);
    assert.deepEqual(t.featureNames, ['f,1', 'say "hi"', 'plain']);
    assert.deepEqual(t.lines, [2, 3, 4]);
    assert.deepEqual(plain(t.X), csrOf([[1, 2, 0], [-1.5, 0, 3], [0, 4, 5]], 3));
  }
  // The id column may itself be a quoted name with a comma.
  const q = file('x,"sample, id"\n1,"s,1"\n', '.csv');
  assert.deepEqual(readCsvFeatures(q, { idColumn: 'sample, id' }).ids, ['s,1']);
});

test('readCsvFeatures: CRLF line ends after quoted and unquoted fields and inside a quoted field, no final line end', () => {
  const p = file('id,a\r\n"x",1\r\n\r\ny,"2"\r\n"z\r\nw",3\r\nv,4', '.csv');
  for (const chunkBytes of CHUNKS) {
    const t = readCsvFeatures(p, { chunkBytes });
    assert.deepEqual(t.ids, ['x', 'y', 'z\r\nw', 'v']);
    // Line 3 is blank; the record of 'z\r\nw' takes lines 5 and 6.
    assert.deepEqual(t.lines, [2, 4, 5, 7]);
    assert.deepEqual(Array.from(t.X.values), [1, 2, 3, 4]);
  }
});

test('readCsvFeatures: a quoted field spanning lines; later rows and errors keep their physical line numbers', () => {
  const good = 'id,a\n"two\nlines",1\nr2,2\n"three\n\nlines",3\n';
  for (const chunkBytes of CHUNKS) {
    const t = readCsvFeatures(file(good, '.csv'), { chunkBytes });
    assert.deepEqual(t.ids, ['two\nlines', 'r2', 'three\n\nlines']);
    assert.deepEqual(t.lines, [2, 4, 5]);
    const late = file(good + 'r4,x\n', '.csv');
    throwsData(() => readCsvFeatures(late, { chunkBytes }), late, 8, /column 'a': 'x' is not a decimal number/);
    // An error in a record that spans lines names the line where the record starts.
    const inside = file('id,a\n"two\nlines",1\n"three\n\nlines",abc\n', '.csv');
    throwsData(() => readCsvFeatures(inside, { chunkBytes }), inside, 4, /'abc'/);
    const count = file('id,a\n"two\nlines",1\n"three\n\nlines",3,4\n', '.csv');
    throwsData(() => readCsvFeatures(count, { chunkBytes }), count, 4, /3 fields, but the header has 2/);
  }
});

test('readCsvFeatures malformed: bad quoting is a DataError naming the file and the line where the record starts', () => {
  const cases: [string, number, RegExp][] = [
    ['id,a\nx,1\ny,2"\n', 3, /:3: field 2: a quote inside an unquoted field/],
    ['id,a\nx,1\n"y"z,2\n', 3, /:3: field 1: a closing quote followed by something other than a comma/],
    ['id,a\nx, "1"\n', 2, /:2: field 2: a quote inside an unquoted field .*no blanks before it/],
    ['id,a\nx,1\n"y,2\nz,3\n', 3, /:3: field 1: a quoted field that is never closed/],
    ['id,a\n"x\ny",1\n"z\n\nw" ,2\n', 4, /:4: field 1: a closing quote followed by/],
    ['"id,a\nx,1\n', 1, /:1: field 1: a quoted field that is never closed/],
  ];
  for (const [text, line, detail] of cases) {
    const p = file(text, '.csv');
    for (const chunkBytes of CHUNKS) {
      throwsData(() => readCsvFeatures(p, { chunkBytes }), p, line, detail);
      // One line of our own words, not csv-parse's error (or its stack).
      assert.throws(() => readCsvFeatures(p, { chunkBytes }), (e: Error) => !e.message.includes('\n') && !/Invalid|Quote Not Closed/.test(e.message));
    }
  }
  const labels = file('id,label\n"a,1",+1\nb",-1\n', '.csv');
  throwsData(() => readLabelFile(labels), labels, 3, /a quote inside an unquoted field/);
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

test('readLabelFile (LIBSVM) checks the feature tokens it does not keep', () => {
  const p = file('+1 1:1\n-1 2:x\n');
  throwsData(() => readLabelFile(p), p, 2, /'2:x'/);
  const q = file('+1 2:1 2:3\n');
  throwsData(() => readIdFile(q), q, 1, /index 2 appears twice/);
});

test('chunkBytes must be a positive integer', () => {
  const p = file('1 1:1\n');
  for (const bad of [0, -1, 1.5, NaN]) assert.throws(() => readLibsvm(p, { chunkBytes: bad }), RangeError);
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

test('CsrBuilder: with a capacity, with one too small (the overflow is copied) and without, the same matrix; within capacity the arrays are views, not copies', () => {
  const rnd = seeded('csr-capacity');
  const rows = Array.from({ length: 300 }, () => Array.from({ length: 700 }, () => (rnd() < 0.5 ? 0 : Math.round(rnd() * 100) - 50)));
  const expected = csrOf(rows, 700);
  const nnz = expected.values.length;
  for (const capacity of [0, 1, 15, nnz - 1, nnz, nnz + 1, 4 * nnz]) {
    const b = new CsrBuilder(700, capacity);
    for (const r of rows) {
      r.forEach((v, j) => b.push(j, v));
      b.endRow();
    }
    const X = b.build();
    assert.deepEqual(plain(X), expected, `capacity ${capacity}`);
    if (capacity >= nnz) assert.equal(X.values.buffer.byteLength, capacity * 8, `capacity ${capacity}: a view of the first array`);
    if (capacity > 0 && capacity < nnz) assert.equal(X.values.buffer.byteLength, nnz * 8, `capacity ${capacity}: an exact copy`);
  }
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

test("readFeatureBlock packs the ids as it reads them: the string readers' ids packed, in every id mode and in CSV; repeats refused by line, ids of equal hash that differ kept", () => {
  // Ids of one to four UTF-8 bytes a character, more of them than the packer's first arrays hold.
  const names = Array.from({ length: 5000 }, (_, i) => (i % 3 === 0 ? `kund-é-${i}` : i % 3 === 1 ? `客户${i}` : `c-😀-${i}-${'x'.repeat(i % 40)}`));
  const rows = names.map((id, i) => `${id} ${(i % 5) + 1}:${i % 7}.5`).join('\n') + '\n';
  const first = file(rows);
  assert.deepEqual(readFeatureBlock(first, { ids: 'first' }).ids, packIds(readLibsvm(first, { ids: 'first' }).ids));
  const qid = file(names.map((id, i) => `${i % 2} qid:${id} 1:${i}`).join('\n'));
  assert.deepEqual(readFeatureBlock(qid, { ids: 'qid' }).ids, packIds(names));
  const row = file('1 1:2\n0 2:3\n1 1:1\n');
  assert.deepEqual(readFeatureBlock(row, { ids: 'row' }).ids, packIds(['1', '2', '3']));
  const csv = file(['id,a', ...names.map((id, i) => `"${id}",${i}`)].join('\r\n'), '.csv');
  assert.deepEqual(readFeatureBlock(csv).ids, packIds(readCsvFeatures(csv).ids));
  // Repeats: the first in file order, with its line, as the string readers say it.
  const repeated = file(['a 1:1', 'é 1:1', 'b 1:1', 'é 1:2', 'a 1:3'].join('\n'));
  for (const read of [() => readFeatureBlock(repeated, { ids: 'first' }), () => readLibsvm(repeated, { ids: 'first' })])
    assert.throws(read, (err: unknown) => err instanceof DataError && err.line === 4 && /duplicate sample id 'é' \(first seen on line 2\)/.test(err.message));
  const emptyId = file('id,a\n,1\n', '.csv');
  assert.throws(() => readFeatureBlock(emptyId), (err: unknown) => err instanceof DataError && err.line === 2 && /empty sample id/.test(err.message));
  // Two ids of equal hash are distinct ids.
  const pair = fnvCollision();
  const collide = file([pair[0], 'z', pair[1]].map((id) => `${id} 1:1`).join('\n'));
  assert.deepEqual(readFeatureBlock(collide, { ids: 'first' }).ids, packIds([pair[0], 'z', pair[1]]));
  const collideAgain = file([pair[0], pair[1], 'z', pair[1]].map((id) => `${id} 1:1`).join('\n'));
  assert.throws(() => readFeatureBlock(collideAgain, { ids: 'first' }), (err: unknown) => err instanceof DataError && err.line === 4 && new RegExp(`'${pair[1]}' \\(first seen on line 2\\)`).test(err.message));
});
