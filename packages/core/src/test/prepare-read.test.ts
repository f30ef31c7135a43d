// prepare: reading a raw table (readRawTable, rawTableFromFeatures): columns by name, the label
// in the same file, missing tokens, categorical codes, and the errors with what fixes them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, type RawTable, readLibsvm, readRawTable, rawTableFromFeatures } from '../index.js';
import { MISSING_CODE } from '../prepare/types.js';
import { testFiles, throwsData } from './io-support.js';

const { file } = testFiles('admm-core-prepare-read-');

const idsOf = (t: RawTable): string[] => Array.from({ length: t.ids.length }, (_, i) => Buffer.from(t.ids.bytes.subarray(t.ids.offsets[i], t.ids.offsets[i + 1])).toString('utf8'));
const col = (t: RawTable, name: string) => {
  const c = t.columns.find((k) => k.name === name);
  assert.ok(c, `no column ${name}`);
  return c;
};
const numeric = (t: RawTable, name: string): number[] => {
  const c = col(t, name);
  assert.equal(c.kind, 'numeric');
  return Array.from(c.kind === 'numeric' ? c.values : []);
};
/** A categorical column as its category per row (undefined for a missing value). */
const categories = (t: RawTable, name: string): (string | undefined)[] => {
  const c = col(t, name);
  assert.equal(c.kind, 'categorical');
  return c.kind === 'categorical' ? Array.from(c.codes, (k) => (k === MISSING_CODE ? undefined : c.dictionary[k])) : [];
};

const BANK = 'income,cust,age,job,subscribed\n52000,c1,41,teacher,no\nNA,c2,35,?,yes\n\n120000,c3,,nurse,no\n7.5e4,c4,58,teacher,yes\n';

test('readRawTable: the label column excluded by name, categorical codes, missing tokens, lines and ids', () => {
  const p = file(BANK, '.csv');
  const t = readRawTable(p, { idColumn: 'cust', exclude: ['subscribed'], categorical: ['job'], scale: true });
  assert.deepEqual(idsOf(t), ['c1', 'c2', 'c3', 'c4']);
  assert.deepEqual(Array.from(t.lines), [2, 3, 5, 6]);
  assert.equal(t.headerLine, 1);
  assert.deepEqual(t.columns.map((c) => [c.name, c.kind]), [['income', 'numeric'], ['age', 'numeric'], ['job', 'categorical']]);
  assert.deepEqual(numeric(t, 'income'), [52000, NaN, 120000, 75000]);
  assert.deepEqual(numeric(t, 'age'), [41, 35, NaN, 58]);
  assert.deepEqual(categories(t, 'job'), ['teacher', undefined, 'nurse', 'teacher']);
});

test('readRawTable: --columns keeps only the named ones, in the order of the header; read in chunks of 7 bytes the same', () => {
  const p = file(BANK, '.csv');
  for (const chunkBytes of [7, undefined]) {
    const t = readRawTable(p, { idColumn: 'cust', columns: ['age', 'income'], scale: true, chunkBytes });
    assert.deepEqual(t.columns.map((c) => c.name), ['income', 'age']);
    assert.deepEqual(numeric(t, 'age'), [41, 35, NaN, 58]);
  }
});

test('readRawTable: the missing tokens are configurable; without the default ones NA is no number, and the message says which flag fixes it', () => {
  const p = file('id,x,y\na,-,1\nb,2,\n', '.csv');
  const t = readRawTable(p, { idColumn: 'id', missingTokens: ['-', ''], scale: true });
  assert.deepEqual(numeric(t, 'x'), [NaN, 2]);
  assert.deepEqual(numeric(t, 'y'), [1, NaN]);
  throwsData(() => readRawTable(p, { idColumn: 'id', scale: true }), p, 2, /column 'x': '-' is not a decimal number.*--missing-values/);
  const q = file('id,x\na,NA\n', '.csv');
  throwsData(() => readRawTable(q, { idColumn: 'id', missingTokens: ['?'], scale: true }), q, 2, /column 'x': 'NA'/);
});

test('readRawTable: a word in a numeric column names file, line and column and says --categorical or --exclude-columns', () => {
  const p = file(BANK, '.csv');
  throwsData(() => readRawTable(p, { idColumn: 'cust', categorical: ['job'], scale: true }), p, 2, /column 'subscribed': 'no' is not a decimal number.*--categorical.*--exclude-columns/);
  throwsData(() => readRawTable(p, { idColumn: 'cust', exclude: ['subscribed'], scale: true }), p, 2, /column 'job': 'teacher'.*--categorical/);
});

test('readRawTable: an unknown name in each flag is an error naming the header line, the column and the flag', () => {
  const p = file(BANK, '.csv');
  const base = { idColumn: 'cust', exclude: ['subscribed'], categorical: ['job'], scale: true };
  throwsData(() => readRawTable(p, { ...base, columns: ['age', 'salary'] }), p, 1, /--columns names 'salary', which is not a column of the header \(columns: income, cust, age, job, subscribed\)/);
  throwsData(() => readRawTable(p, { ...base, exclude: ['label'] }), p, 1, /--exclude-columns names 'label'/);
  throwsData(() => readRawTable(p, { ...base, categorical: ['Job'] }), p, 1, /--categorical names 'Job'/);
  throwsData(() => readRawTable(p, { ...base, indicators: ['ag'] }), p, 1, /--missing-indicator names 'ag'/);
  throwsData(() => readRawTable(p, { ...base, idColumn: 'id' }), p, 1, /no column named 'id'.*--id-column/);
  throwsData(() => readRawTable(p, { idColumn: 'cust', exclude: ['subscribed', 'income', 'age', 'job'], scale: true }), p, 1, /no feature column is left/);
});

test('readRawTable: flags that contradict each other are a ConfigError', () => {
  const p = file(BANK, '.csv');
  const base = { idColumn: 'cust', exclude: ['subscribed'], scale: true };
  assert.throws(() => readRawTable(p, { ...base, categorical: ['job'], columns: ['age'] }), (e: unknown) => e instanceof ConfigError && /--categorical names 'job', which --columns or --exclude-columns leave out/.test(e.message));
  assert.throws(() => readRawTable(p, { ...base, exclude: ['subscribed', 'cust'] }), (e: unknown) => e instanceof ConfigError && /--exclude-columns names the id column 'cust'/.test(e.message));
});

test('readRawTable: ids are checked as by the other readers (a repeat names both lines)', () => {
  const p = file('id,x\na,1\nb,2\na,3\n', '.csv');
  throwsData(() => readRawTable(p, { idColumn: 'id', scale: true }), p, 4, /duplicate sample id 'a' \(first seen on line 2\)/);
});

test('rawTableFromFeatures: a LIBSVM table as numeric columns, absent entries zero', () => {
  const p = file('1 qid:r1 1:0.5 3:2\n0 qid:r2 2:-1\n');
  const t = rawTableFromFeatures(readLibsvm(p, { ids: 'qid' }));
  assert.deepEqual(idsOf(t), ['r1', 'r2']);
  assert.deepEqual(t.columns.map((c) => c.name), ['1', '2', '3']);
  assert.deepEqual(numeric(t, '1'), [0.5, 0]);
  assert.deepEqual(numeric(t, '2'), [0, -1]);
  assert.deepEqual(numeric(t, '3'), [2, 0]);
  assert.deepEqual(Array.from(t.lines), [1, 2]);
  assert.equal(t.headerLine, undefined);
});
