// prepare: the fit without privacy against plain statistics, the checks of the training rows
// (declared ranges and categories, missing values), the spec file, and the preparation saved.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError, type PrepareOptions, type PublicSpec, applyPreparation, fitPreparation, originalUnits, parseWith, preparationSchema, rawTableFromFeatures, readLibsvm, readOptionsOf, readPublicSpec, readRawTable } from '../index.js';
import { testFiles, throwsData } from './io-support.js';
import { JOBS, bankTable, plainStats } from './prepare-support.js';
import { seeded } from './support.js';

const { dir, file } = testFiles('admm-core-prepare-fit-');

const BANK_OPTS: PrepareOptions = { idColumn: 'id', exclude: ['subscribed'], categorical: ['job'], missing: 'mean', scale: true };
const close = (a: number, b: number, what: string, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${what}: ${a} vs ${b}`);

function spec(columns: PublicSpec['columns']): PublicSpec {
  const p = join(dir, `spec-${Object.keys(columns).join('-')}.json`);
  writeFileSync(p, JSON.stringify({ columns }));
  return readPublicSpec(p);
}

test('fitPreparation (exact): centre, scale and fill of each numeric column are the plain mean and population std of its present values; the vocabulary is every category seen, sorted', () => {
  const bank = bankTable(seeded('prepare-fit-exact'), 300);
  const t = readRawTable(file(bank.text, '.csv'), BANK_OPTS);
  const { preparation: p, notes } = fitPreparation(t, BANK_OPTS);
  assert.equal(notes.mu, 0);
  assert.deepEqual(notes.queries, []);
  assert.equal(p.privacy, null);
  for (const name of ['rate', 'age', 'income', 'change']) {
    const inp = p.inputs.find((c) => c.name === name);
    assert.ok(inp?.kind === 'numeric');
    const s = plainStats(bank.numeric[name]);
    close(inp.center, s.mean, `${name} centre`);
    close(inp.scale, s.std, `${name} scale`);
    close(inp.fill!, s.mean, `${name} fill`);
    assert.deepEqual([inp.range, inp.centerSource, inp.scaleSource, inp.fillSource], [null, 'exact', 'exact', 'exact']);
  }
  const job = p.inputs.find((c) => c.name === 'job');
  assert.ok(job?.kind === 'categorical');
  assert.deepEqual(job.vocabulary, [...new Set(bank.job.filter((j) => j !== undefined))].sort());
  assert.deepEqual(p.outputs.map((o) => o.name), ['rate', 'age', 'income', ...job.vocabulary.map((j) => `job=${j}`), 'change']);

  // Applied to the training rows: each value standardised, a missing one at the mean (0), one-hot.
  const a = applyPreparation(p, t, { file: t.file });
  assert.equal(a.dropped, 0);
  assert.equal(a.table.X.rows, 300);
  const d = p.outputs.length;
  const income = plainStats(bank.numeric.income);
  for (let i = 0; i < 300; i++) {
    const x = bank.numeric.income[i];
    close(a.table.X.data[i * d + 2], Number.isNaN(x) ? 0 : (x - income.mean) / income.std, `row ${i} income`, 1e-9);
    for (let k = 0; k < job.vocabulary.length; k++) assert.equal(a.table.X.data[i * d + 3 + k], bank.job[i] === job.vocabulary[k] ? 1 : 0);
  }
  assert.deepEqual(a.unseen, { job: 0 });
  assert.deepEqual(a.clipped, {});
});

test('fitPreparation (exact): --missing median and zero, indicators, --missing drop (statistics of the rows kept), scaling off, a constant column', () => {
  const p = file('id,x,c,k\na,1,u,5\nb,NA,v,5\nc,4,,5\nd,10,u,5\ne,2,u,5\n', '.csv');
  const opts: PrepareOptions = { idColumn: 'id', categorical: ['c'], indicators: ['x', 'c'], missing: 'median', scale: true };
  const t = readRawTable(p, opts);
  const { preparation: med, notes } = fitPreparation(t, opts);
  const x = med.inputs[0];
  assert.ok(x.kind === 'numeric');
  assert.equal(x.fill, 3); // median of 1, 4, 10, 2
  assert.equal(x.center, 17 / 4);
  assert.match(notes.notes.join('\n'), /column 'k': constant \(5\) in the training rows; scale 1/);
  assert.deepEqual(med.outputs.map((o) => `${o.name}:${o.kind}`), ['x:numeric', 'x_missing:indicator', 'c=u:category', 'c=v:category', 'c_missing:indicator', 'k:numeric']);
  const a = applyPreparation(med, t, { file: p });
  const rows = Array.from({ length: 5 }, (_, i) => Array.from(a.table.X.data.subarray(i * 6, i * 6 + 6)));
  const sx = plainStats([1, 4, 10, 2]).std;
  assert.deepEqual(rows.map((r) => r.slice(1)), [[0, 1, 0, 0, 0], [1, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0]]);
  close(rows[1][0], (3 - 17 / 4) / sx, 'median fill standardised');

  const zero = fitPreparation(t, { ...opts, missing: 'zero', scale: false }).preparation;
  assert.deepEqual([zero.inputs[0].kind === 'numeric' && zero.inputs[0].fill, applyPreparation(zero, t, { file: p }).table.X.data[6]], [0, 0]);

  const dropOpts: PrepareOptions = { idColumn: 'id', categorical: ['c'], missing: 'drop', scale: true };
  const drop = fitPreparation(t, dropOpts).preparation;
  assert.ok(drop.inputs[0].kind === 'numeric');
  assert.equal(drop.inputs[0].center, 13 / 3); // rows a, d, e
  const ad = applyPreparation(drop, t, { file: p });
  assert.equal(ad.dropped, 2);
  assert.deepEqual(Array.from(ad.lines), [2, 5, 6]);
  assert.equal(ad.table.ids.length, 3);
  assert.equal(Buffer.from(ad.table.ids.bytes).toString(), 'ade');
});

test('fitPreparation: a missing value with --missing unset names file, line, column and the flag', () => {
  const p = file('id,x,c\na,1,u\nb,2,\n', '.csv');
  const opts: PrepareOptions = { idColumn: 'id', categorical: ['c'], scale: true };
  throwsData(() => fitPreparation(readRawTable(p, opts), opts), p, 3, /column 'c': a missing value; say what to do with missing values: --missing mean\|median\|zero\|drop/);
});

test('fitPreparation: a value outside a declared range, or a category outside a declared vocabulary, is an error naming file, line, column, the spec and the fix', () => {
  const p = file('id,age,job\na,30,admin\nb,130,admin\nc,40,pilot\n', '.csv');
  const s = spec({ age: { range: [18, 100] }, job: { categories: ['admin', 'retired'] } });
  const opts: PrepareOptions = { idColumn: 'id', categorical: ['job'], scale: true, spec: s };
  const t = readRawTable(p, opts);
  throwsData(() => fitPreparation(t, opts), p, 3, new RegExp(`column 'age': 130 is outside the range \\[18, 100\\] declared in ${s.file}: widen the range`));
  const s2 = spec({ age: { range: [18, 200] }, job: { categories: ['admin', 'retired'] } });
  throwsData(() => fitPreparation(t, { ...opts, spec: s2 }), p, 4, new RegExp(`column 'job': category 'pilot' is not among the categories declared in ${s2.file} \\(admin, retired\\)`));
});

test('fitPreparation: a declared column that is absent, or of the other kind, is an error naming the header line, the column and the flag', () => {
  const p = file('id,age,job,label\na,30,admin,1\n', '.csv');
  const opts: PrepareOptions = { idColumn: 'id', categorical: ['job'], exclude: ['label'], scale: true };
  const t = readRawTable(p, opts);
  throwsData(() => fitPreparation(t, { ...opts, spec: spec({ label: { range: [0, 1] } }) }), p, 1, /column 'label' is declared in .* but it is in the header but not read: add it to --columns \(or take it out of --exclude-columns\)/);
  throwsData(() => fitPreparation(t, { ...opts, spec: spec({ salary: { range: [0, 1] } }) }), p, 1, /column 'salary' is declared in .*not in the header \(columns: id, age, job, label\)/);
  const s = spec({ age: { categories: ['young'] } });
  throwsData(() => fitPreparation(t, { ...opts, spec: s }), s.file, undefined, /columns\.age\.categories: 'age' is read as numeric .*--categorical/);
  const s2 = spec({ job: { range: [0, 1] } });
  throwsData(() => fitPreparation(t, { ...opts, spec: s2 }), s2.file, undefined, /columns\.job: 'job' is categorical/);
});

test('readPublicSpec: a wrong field is an error naming the file and the field', () => {
  const bad = (json: string, detail: RegExp) => {
    const p = file(json, '.json');
    throwsData(() => readPublicSpec(p), p, undefined, detail);
  };
  bad('{"columns":{"age":{"range":[100,18]}}}', /preparation spec: columns\.age\.range: expected \[lo, hi\] with lo < hi/);
  bad('{"columns":{"age":{"scale":0}}}', /columns\.age\.scale: expected a positive number/);
  bad('{"columns":{"age":{"rnage":[1,2]}}}', /columns\.age: .*rnage/);
  bad('{"columns":{"job":{"categories":["a","a"]}}}', /columns\.job\.categories: a category appears twice/);
  bad('{"columns":{"age":{"range":[0,10],"mean":20}}}', /columns\.age\.mean: the mean lies outside the range/);
  bad('{"columns":', /not JSON/);
  const ok = file('{"columns":{"age":{"range":[18,100],"mean":40},"job":{"categories":["a","b"]}}}', '.json');
  assert.deepEqual(readPublicSpec(ok), { file: ok, columns: { age: { range: [18, 100], mean: 40 }, job: { categories: ['a', 'b'] } } });
});

test('applyPreparation at scoring: columns in another order, the label absent, an unseen category counted, a missing value filled, a declared range clipped and counted', () => {
  const train = file('id,age,job,income,y\na,30,admin,100,1\nb,50,retired,300,0\nc,NA,admin,200,1\n', '.csv');
  const s = spec({ age: { range: [18, 70] } });
  const opts: PrepareOptions = { idColumn: 'id', categorical: ['job'], exclude: ['y'], missing: 'mean', scale: true, spec: s };
  const { preparation: p } = fitPreparation(readRawTable(train, opts), opts);
  const score = file('income,job,id,age\n250,pilot,n1,90\n,retired,n2,\n', '.csv');
  // Read as the model's preparation says (readOptionsOf): its columns by name, the label not among them.
  const readBack = readOptionsOf(p);
  const a = applyPreparation(p, readRawTable(score, readBack), { file: score });
  assert.deepEqual(a.unseen, { job: 1 });
  assert.deepEqual(a.clipped, { age: 1 });
  const age = plainStats([30, 50]);
  const income = plainStats([100, 300, 200]);
  const row = (i: number) => Array.from(a.table.X.data.subarray(i * 4, i * 4 + 4));
  const expect0 = [(70 - age.mean) / age.std, 0, 0, (250 - income.mean) / income.std];
  const expect1 = [0, 0, 1, 0];
  row(0).forEach((v, j) => close(v, expect0[j], `n1 column ${j}`));
  row(1).forEach((v, j) => close(v, expect1[j], `n2 column ${j}`));
  assert.deepEqual(a.table.featureNames, ['age', 'job=admin', 'job=retired', 'income']);
  const noAge = file('id,job,income\nn1,admin,1\n', '.csv');
  throwsData(() => readRawTable(noAge, { ...readOptionsOf(p), model: 'model-1.json' }), noAge, 1, /no column 'age' in the header \(columns: id, job, income\), and the model model-1.json was trained with it/);
  throwsData(() => applyPreparation(p, readRawTable(noAge, { ...readBack, columns: ['job', 'income'] }), { file: noAge }), noAge, 1, /no column 'age' read from this file, which the model's preparation needs/);
});

test('preparationSchema: a fitted preparation goes through JSON and back unchanged; a wrong field is refused by name', () => {
  const bank = bankTable(seeded('prepare-schema'), 50);
  const t = readRawTable(file(bank.text, '.csv'), { ...BANK_OPTS, indicators: ['income'] });
  const { preparation: p } = fitPreparation(t, { ...BANK_OPTS, indicators: ['income'], spec: spec({ age: { range: [18, 95] }, job: { categories: [...JOBS] } }) });
  const back = parseWith(preparationSchema, JSON.parse(JSON.stringify(p)), 'model.json', 'preparation');
  assert.deepEqual(back, p);
  const broken = JSON.parse(JSON.stringify(p));
  broken.inputs[1].scale = 0;
  assert.throws(() => parseWith(preparationSchema, broken, 'model.json', 'preparation'), (e: unknown) => e instanceof DataError && /inputs\[1\]\.scale: expected a positive number/.test(e.message));
});

test('originalUnits: per-unit coefficients and the offset reproduce the prepared model on raw rows', () => {
  const p = file('id,x,c,z\na,10,u,-1\nb,20,v,1\nc,40,u,3\n', '.csv');
  const opts: PrepareOptions = { idColumn: 'id', categorical: ['c'], indicators: ['x'], missing: 'zero', scale: true };
  const { preparation: prep } = fitPreparation(readRawTable(p, opts), opts);
  // Outputs: x, x_missing, c=u, c=v, z.
  const b = [0.5, -0.25, 1.5, -2, 3];
  const u = originalUnits(prep, b);
  const x = plainStats([10, 20, 40]);
  const z = plainStats([-1, 1, 3]);
  assert.deepEqual(u.columns.map((c) => [c.name, c.original, c.kind]), [['x', 'x', 'numeric'], ['x_missing', 'x', 'indicator'], ['c=u', 'c', 'category'], ['c=v', 'c', 'category'], ['z', 'z', 'numeric']]);
  close(u.columns[0].perUnit!, 0.5 / x.std, 'x per unit');
  close(u.columns[4].perUnit!, 3 / z.std, 'z per unit');
  assert.deepEqual(u.columns.slice(1, 4).map((c) => [c.coefficient, c.perUnit, c.center, c.scale]), [[-0.25, null, null, null], [1.5, null, null, null], [-2, null, null, null]]);
  close(u.offset, -(0.5 * x.mean) / x.std - (3 * z.mean) / z.std, 'offset');
  // A raw row (x = 33, c = v, z = 0.5): the prepared model's score, and the same from the original units.
  const prepared = 0.5 * ((33 - x.mean) / x.std) - 2 + 3 * ((0.5 - z.mean) / z.std);
  close(u.columns[0].perUnit! * 33 + u.columns[3].coefficient + u.columns[4].perUnit! * 0.5 + u.offset, prepared, 'score in original units', 1e-12);
  assert.throws(() => originalUnits(prep, [1, 2]), /2 coefficients for 5 prepared columns/);
});

test('LIBSVM with --prepare: every column standardised, absent entries read as zeros; a column read as the other kind at scoring is an error naming the flag', () => {
  const p = file('1 qid:a 1:2 2:1\n0 qid:b 1:4\n1 qid:c 2:3\n');
  const t = rawTableFromFeatures(readLibsvm(p, { ids: 'qid' }));
  const { preparation: prep } = fitPreparation(t, { idColumn: 'id', scale: true });
  const a = applyPreparation(prep, t, { file: p });
  const [c1, c2] = [plainStats([2, 4, 0]), plainStats([1, 0, 3])];
  const expected = [(2 - c1.mean) / c1.std, (1 - c2.mean) / c2.std, (4 - c1.mean) / c1.std, (0 - c2.mean) / c2.std, (0 - c1.mean) / c1.std, (3 - c2.mean) / c2.std];
  Array.from(a.table.X.data).forEach((v, k) => close(v, expected[k], `entry ${k}`));
  const csv = file('id,x,c\na,1,u\nb,2,v\n', '.csv');
  const opts: PrepareOptions = { idColumn: 'id', categorical: ['c'], scale: true };
  const { preparation: q } = fitPreparation(readRawTable(csv, opts), opts);
  const later = file('id,x,c\nn,1,2\n', '.csv');
  throwsData(() => applyPreparation(q, readRawTable(later, { idColumn: 'id', scale: true }), { file: later }), later, 1, /column 'c' was categorical when the model was trained: read it with --categorical/);
});
