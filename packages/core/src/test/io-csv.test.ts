// io: CSV files (readCsvFeatures): header, fields, numbers, quoting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readCsvFeatures, readLabelFile } from '../index.js';
import { plain, throwsData, NOT_DECIMAL, CHUNKS, csrOf, testFiles } from './io-support.js';

const { file } = testFiles('admm-core-io-csv-');

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

test('readCsvFeatures: a header after blank lines is reported on its own line', () => {
  const p = file('\n\nkey,a\n1,2\n');
  throwsData(() => readCsvFeatures(p), p, 3);
});

test('readCsvFeatures: a value beyond 1e100 is a DataError naming the file, line, column and value', () => {
  const ok = readCsvFeatures(file('id,a,b\nr1,1e100,-1e100\n', '.csv'));
  assert.deepEqual(Array.from(ok.X.values), [1e100, -1e100]);
  for (const bad of ['1e308', '-2e100', '1e400']) {
    const p = file(`id,a,b\nr1,1,2\nr2,3,${bad}\n`, '.csv');
    throwsData(() => readCsvFeatures(p), p, 3, new RegExp(`column 'b': '${bad.replace(/[.+]/g, '\\$&')}' exceeds`));
  }
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

// ---------------------------------------------------------------------------------------
// CSV quoting (csv-parse), reading in chunks
// ---------------------------------------------------------------------------------------

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
