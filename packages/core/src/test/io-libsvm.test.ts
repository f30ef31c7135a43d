// io: LIBSVM files (readLibsvm): id modes, malformed lines, the numbers a file may hold.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { MAX_ABS_VALUE, readLibsvm } from '../index.js';
import { plain, throwsData, NOT_DECIMAL, testFiles } from './io-support.js';

const { dir, file } = testFiles('admm-core-io-libsvm-');

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
// Numbers: decimal notation only, magnitude at most MAX_ABS_VALUE
// ---------------------------------------------------------------------------------------

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

test('readLibsvm: values read in place are the very numbers Number() gives (random spellings, 1 to 18 digits)', () => {
  // A seeded stream (mulberry32): the spellings are reproducible.
  let state = 47;
  const rand = () => {
    state = (state + 0x6d2b79f5) | 0;
    let x = Math.imul(state ^ (state >>> 15), 1 | state);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 2 ** 32;
  };
  const digits = (n: number) => Array.from({ length: n }, () => String(Math.floor(rand() * 10))).join('');
  const lines: string[] = [];
  const expected: number[][] = [];
  for (let r = 0; r < 400; r++) {
    const row: number[] = [];
    const tokens: string[] = [];
    for (let j = 1; j <= 20; j++) {
      const n = 1 + Math.floor(rand() * 18);
      const body = digits(n);
      const point = Math.floor(rand() * (n + 2)) - 1; // -1: no point; else its place
      const sign = ['', '-', '+'][Math.floor(rand() * 3)];
      const exponent = rand() < 0.1 ? `e${Math.floor(rand() * 40) - 20}` : '';
      const text = `${sign}${point < 0 ? body : `${body.slice(0, point)}.${body.slice(point)}`}${exponent}`;
      tokens.push(`${j}:${text}`);
      row.push(Number(text));
    }
    lines.push(`${r} ${tokens.join(rand() < 0.5 ? ' ' : '\t')}`);
    expected.push(row);
  }
  const t = readLibsvm(file(`${lines.join('\n')}\n`), { ids: 'first', features: 20 });
  for (let r = 0; r < expected.length; r++) {
    const got = new Array<number>(20).fill(0);
    for (let k = t.X.indptr[r]; k < t.X.indptr[r + 1]; k++) got[t.X.indices[k]] = t.X.values[k];
    for (let j = 0; j < 20; j++) if (expected[r][j] !== 0) assert.ok(Object.is(got[j], expected[r][j]), `row ${r} token ${j + 1}: ${got[j]} for ${lines[r].split(/\s/)[j + 1]}`);
  }
});
