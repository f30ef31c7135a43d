// prepare: the private fit. Each query's change between neighbouring tables (one row replaced,
// docs/privacy.md section 2) within its stated sensitivity; estimates near the exact statistics
// at mu = 0.2; the threshold on categories; what is refused, and what spends nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, type NoiseSource, type PrepareOptions, type RawTable, applyPreparation, fitPreparation, normalCdf, planQueries, preparationMu, preparationQueries, readRawTable, seededNoise, splitGdpMu } from '../index.js';
import { GRID_BINS, binInterval, binOf, histogram, rangeOfHistogram } from '../prepare/grid.js';
import { categoryCounts, centredSquares, centredSum, presentCount, sensitivity } from '../prepare/queries.js';
import { testFiles } from './io-support.js';
import { JOBS, bankTable, plainStats, replaceRow } from './prepare-support.js';
import { seeded } from './support.js';

const { file } = testFiles('admm-core-prepare-dp-');

const OPTS: PrepareOptions = { idColumn: 'id', exclude: ['subscribed'], categorical: ['job'], missing: 'mean', scale: true };
const bank5000 = bankTable(seeded('prepare-dp-5000'), 5000);
const table5000 = readRawTable(file(bank5000.text, '.csv'), OPTS);

const l2 = (a: ArrayLike<number>, b: ArrayLike<number>) => Math.sqrt(Array.from(a).reduce((s, x, i) => s + (x - b[i]) ** 2, 0));
const values = (t: RawTable, name: string) => {
  const c = t.columns.find((k) => k.name === name);
  assert.ok(c?.kind === 'numeric');
  return c.values;
};
const categorical = (t: RawTable, name: string) => {
  const c = t.columns.find((k) => k.name === name);
  assert.ok(c?.kind === 'categorical');
  return c;
};

test('the public grid: bins in the order of their values, every value inside its bin, edges exact', () => {
  let prev = -Infinity;
  for (let b = 0; b < GRID_BINS; b++) {
    const [lo, hi] = binInterval(b);
    assert.ok(lo < hi && lo >= prev, `bin ${b}: [${lo}, ${hi}] after ${prev}`);
    prev = hi;
  }
  const rand = seeded('grid');
  for (let k = 0; k < 2000; k++) {
    const x = (rand() < 0.5 ? -1 : 1) * 10 ** (rand() * 22 - 8);
    const [lo, hi] = binInterval(binOf(x));
    assert.ok(lo <= x && x <= hi, `${x} outside its bin [${lo}, ${hi}]`);
  }
  for (const x of [1, 10, 100, 1e-6, 1e12, -1, 0]) assert.ok(binInterval(binOf(x))[0] <= x && x <= binInterval(binOf(x))[1], String(x));
  assert.equal(binInterval(binOf(1))[0], 1); // 1 is an edge: the lower one of its bin
});

test('sensitivities: no neighbour (a replaced row moving the mean, a value going missing, coming back, a new category) changes a query by more than stated; the extremes reach it', () => {
  // The size of the table does not enter a sensitivity: 600 rows keep the 240 neighbours quick.
  const t = readRawTable(file(bankTable(seeded('prepare-dp-600'), 600).text, '.csv'), OPTS);
  const rand = seeded('neighbours');
  const range: [number, number] = [17.78, 100]; // a clipping range as the histogram gives for age
  const names = ['rate', 'age', 'income', 'change'];
  const worst = { histogram: 0, count: 0, sum: 0, squares: 0, categories: 0 };
  const check = (a: RawTable, b: RawTable) => {
    for (const n of names) {
      worst.histogram = Math.max(worst.histogram, l2(histogram(values(a, n)), histogram(values(b, n))) / sensitivity('histogram'));
      worst.count = Math.max(worst.count, Math.abs(presentCount(values(a, n)) - presentCount(values(b, n))) / sensitivity('count'));
    }
    const [va, vb] = [values(a, 'age'), values(b, 'age')];
    worst.sum = Math.max(worst.sum, Math.abs(centredSum(va, ...range) - centredSum(vb, ...range)) / sensitivity('sum', range));
    worst.squares = Math.max(worst.squares, Math.abs(centredSquares(va, ...range) - centredSquares(vb, ...range)) / sensitivity('squares', range));
    // Categories: sqrt 2 over those both tables hold; one only a table holds is held by one row (the threshold's delta).
    const [ca, cb] = [categoryCounts(categorical(a, 'job')), categoryCounts(categorical(b, 'job'))];
    const common = [...ca.keys()].filter((k) => cb.has(k));
    worst.categories = Math.max(worst.categories, l2(common.map((k) => ca.get(k)!), common.map((k) => cb.get(k)!)) / sensitivity('categories'));
    for (const [x, y] of [[ca, cb], [cb, ca]]) for (const [k, n] of x) if (!y.has(k)) assert.equal(n, 1, `category ${k} only in one table, held by ${n} rows`);
  };
  const extreme = [NaN, -1e9, 1e9, 0, 17.78, 100, -3, 1e-7];
  const pick = () => (rand() < 0.5 ? extreme[Math.floor(rand() * extreme.length)] : 1e3 * (rand() - 0.5));
  for (let k = 0; k < 120; k++) {
    const i = Math.floor(rand() * t.rows);
    const job = rand() < 0.3 ? undefined : rand() < 0.5 ? `new-${k}` : 'admin';
    const n = replaceRow(t, i, Object.fromEntries(names.map((c) => [c, pick()])), { job });
    check(t, n);
    check(n, t);
  }
  // The bounds are reached: a row moving from one end of the range to the other (sum), from
  // missing to present (count), between two bins (histogram), between two common categories.
  const row = categorical(t, 'job').codes.findIndex((c) => c !== 0xffffffff);
  const low = replaceRow(t, row, Object.fromEntries(names.map((c) => [c, range[0]])), { job: 'admin' });
  const high = replaceRow(t, row, Object.fromEntries(names.map((c) => [c, range[1]])), { job: 'blue-collar' });
  check(low, high);
  check(low, replaceRow(low, row, { rate: NaN, age: (range[0] + range[1]) / 2 }));
  for (const [q, w] of Object.entries(worst)) assert.ok(w <= 1 + 1e-12 && w >= 0.999, `${q}: the largest change is ${w} of the stated sensitivity`);
});

test('private fit at mu = 0.2 on 5000 rows in raw units 1e-2..1e5 (seeded noise): centres within 0.1 standard deviation of the exact means, scales within 20 %, the common categories kept', () => {
  const dp = { mu: 0.2, deltaThreshold: 1e-6, noise: seededNoise('prepare-dp-accuracy') };
  const { preparation: p, notes } = fitPreparation(table5000, OPTS, dp);
  // 4 numeric columns x (histogram, count, sum, squares) and the categories of job.
  assert.equal(notes.queries.length, 17);
  assert.equal(notes.mu, 0.2);
  assert.deepEqual(p.privacy, { mu: 0.2, deltaThreshold: 1e-6 });
  // GDP composition: the mu of the queries, sensitivity / sigma each, add up in squares to mu^2.
  assert.ok(Math.abs(Math.hypot(...notes.queries.map((q) => q.sensitivity / q.sigma)) - 0.2) < 1e-12);
  for (const name of ['rate', 'age', 'income', 'change']) {
    const c = p.inputs.find((k) => k.name === name);
    assert.ok(c?.kind === 'numeric');
    const exact = plainStats(bank5000.numeric[name]);
    assert.deepEqual([c.rangeSource, c.centerSource, c.scaleSource, c.fillSource], ['dp', 'dp', 'dp', 'dp']);
    assert.ok(Math.abs(c.center - exact.mean) <= 0.1 * exact.std, `${name}: centre ${c.center}, mean ${exact.mean}, std ${exact.std}`);
    assert.ok(Math.abs(c.scale / exact.std - 1) <= 0.2, `${name}: scale ${c.scale}, std ${exact.std}`);
    assert.equal(c.fill, c.center);
    assert.ok(c.range![0] <= exact.median && exact.median <= c.range![1], `${name}: range ${c.range} misses the median ${exact.median}`);
  }
  const job = p.inputs.find((k) => k.name === 'job');
  assert.ok(job?.kind === 'categorical');
  // admin 40 %, blue-collar 30 %, technician 20 %, services 9 %: kept; retired (1 %, about 50 rows) is below the threshold (about 140).
  assert.deepEqual(job.vocabulary, ['admin', 'blue-collar', 'services', 'technician']);
  assert.equal(job.vocabularySource, 'dp');
});

test('private fit: the median from the histogram is near the exact median; a 0/1 column gets a range holding 0 and 1', () => {
  const rand = seeded('median');
  const lines = ['id,x,flag'];
  const xs: number[] = [];
  for (let i = 0; i < 5000; i++) {
    const x = Math.round(1000 * Math.exp(rand() * 3));
    xs.push(x);
    lines.push(`r${i},${x},${rand() < 0.3 ? 1 : 0}`);
  }
  const opts: PrepareOptions = { idColumn: 'id', missing: 'median', scale: false };
  const { preparation: p, notes } = fitPreparation(readRawTable(file(lines.join('\n'), '.csv'), opts), opts, { mu: 1, deltaThreshold: 1e-6, noise: seededNoise('median') });
  const [x, flag] = p.inputs;
  assert.ok(x.kind === 'numeric' && flag.kind === 'numeric');
  const exact = plainStats(xs).median;
  // Within the bin of the exact median (a factor 10^(1/4)).
  assert.ok(x.fill! / exact < 1.78 && exact / x.fill! < 1.78, `median ${x.fill} vs ${exact}`);
  assert.match(notes.notes.join('\n'), /column 'x': the median fill .* is read off the private histogram \(approximate/);
  assert.ok(flag.range![0] <= 0 && flag.range![1] >= 1, `flag range ${flag.range}`);
  assert.deepEqual(planQueries(opts, p.inputs).map((q) => q.query), ['histogram', 'histogram']);
});

test('private fit: a category held by one row is dropped, one held by 10 % kept; the threshold keeps a one-row category with probability deltaThreshold / (columns thresholded)', () => {
  const lines = ['id,c,d'];
  for (let i = 0; i < 5000; i++) lines.push(`r${i},${i === 7 ? 'rare' : i % 10 === 0 ? 'tenth' : 'rest'},${i % 2 ? 'odd' : 'even'}`);
  const opts: PrepareOptions = { idColumn: 'id', categorical: ['c', 'd'], scale: true };
  const t = readRawTable(file(lines.join('\n'), '.csv'), opts);
  for (const seed of ['a', 'b', 'c']) {
    const { preparation: p, notes } = fitPreparation(t, opts, { mu: 0.2, deltaThreshold: 1e-6, noise: seededNoise(seed) });
    assert.deepEqual(p.inputs.map((c) => c.kind === 'categorical' && c.vocabulary), [['rest', 'tenth'], ['even', 'odd']]);
    for (const q of notes.queries) {
      assert.equal(q.query, 'categories');
      // P(1 + N(0, sigma^2) > threshold) = 1e-6 / 2.
      assert.ok(Math.abs(normalCdf(-(q.threshold! - 1) / q.sigma) / 5e-7 - 1) < 1e-6, `threshold ${q.threshold}, sigma ${q.sigma}`);
    }
  }
});

test('private fit: --missing drop is refused; a fully declared spec spends nothing and never reads the data', () => {
  const t = table5000;
  assert.throws(() => fitPreparation(t, { ...OPTS, missing: 'drop' }, { mu: 0.2, deltaThreshold: 1e-6, noise: seededNoise('x') }), (e: unknown) => e instanceof ConfigError && /--missing drop at a party with a privacy budget/.test(e.message));
  const spec = {
    file: 'spec.json',
    columns: { rate: { range: [0, 0.2] as [number, number] }, age: { range: [18, 95] as [number, number], mean: 45 }, income: { mean: 5e4, scale: 3e4 }, change: { range: [-20, 20] as [number, number] }, job: { categories: [...JOBS] } },
  };
  const never: NoiseSource = { seeded: true, addNormal: () => assert.fail('noise drawn'), uniforms: () => assert.fail('noise drawn') };
  const opts = { ...OPTS, spec };
  assert.equal(preparationQueries(opts, t.columns), 0);
  assert.equal(preparationMu(opts, t.columns, 0.2), 0);
  const a = fitPreparation(t, opts, { mu: 0.2, deltaThreshold: 1e-6, noise: never });
  // Another table of the same columns gives the same preparation: nothing came from the rows.
  const other = readRawTable(file(bankTable(seeded('other'), 300, 0.2).text, '.csv'), OPTS);
  const b = fitPreparation(other, opts, { mu: 0.2, deltaThreshold: 1e-6, noise: never });
  assert.deepEqual(a.preparation, b.preparation);
  assert.equal(a.notes.mu, 0);
  const byName = Object.fromEntries(a.preparation.inputs.map((c) => [c.name, c]));
  assert.deepEqual(byName.age, { name: 'age', kind: 'numeric', range: [18, 95], rangeSource: 'declared', center: 45, centerSource: 'declared', scale: 38.5, scaleSource: 'declared', fill: 45, fillSource: 'declared', indicator: false });
  assert.deepEqual(byName.income.kind === 'numeric' && [byName.income.range, byName.income.center, byName.income.scale], [[5e4 - 12e4, 5e4 + 12e4], 5e4, 3e4]);
  assert.deepEqual(byName.rate.kind === 'numeric' && [byName.rate.center, byName.rate.scale], [0.1, 0.1]);
});

test('the split of the budget: planned from the options and kinds alone; mu^2 splits between preparation and release', () => {
  const cols = [{ name: 'a', kind: 'numeric' }, { name: 'b', kind: 'categorical' }] as const;
  assert.deepEqual(planQueries({ idColumn: 'id', scale: true }, cols).map((q) => `${q.column}:${q.query}`), ['a:histogram', 'a:sum', 'a:squares', 'b:categories']);
  assert.deepEqual(planQueries({ idColumn: 'id', scale: true, missing: 'zero' }, cols).map((q) => q.query), ['histogram', 'count', 'sum', 'squares', 'categories']);
  assert.deepEqual(planQueries({ idColumn: 'id', scale: false }, cols).map((q) => q.query), ['categories']);
  const s = splitGdpMu(1, 0.1);
  assert.ok(Math.abs(s.prep ** 2 + s.release ** 2 - 1) < 1e-15 && Math.abs(s.prep ** 2 - 0.1) < 1e-15);
  assert.throws(() => splitGdpMu(1, 1), ConfigError);
  // No bin above the cut: the largest one, marked unreliable.
  const y = new Float64Array(GRID_BINS);
  y[binOf(5)] = 3;
  assert.deepEqual(rangeOfHistogram(y, 10), { range: binInterval(binOf(5)), median: (binInterval(binOf(5))[0] + binInterval(binOf(5))[1]) / 2, reliable: false });
});

test('private fit: a declared mean with no range or scale: the range and the scale estimated, the centre as declared, and each statistic says where it came from', () => {
  const opts: PrepareOptions = { ...OPTS, spec: { file: 'spec.json', columns: { age: { mean: 44 } } } };
  const { preparation: p, notes } = fitPreparation(table5000, opts, { mu: 0.2, deltaThreshold: 1e-6, noise: seededNoise('mixed') });
  const age = p.inputs.find((c) => c.name === 'age');
  assert.ok(age?.kind === 'numeric');
  assert.deepEqual([age.center, age.centerSource, age.scaleSource, age.rangeSource, age.fill, age.fillSource], [44, 'declared', 'dp', 'dp', 44, 'declared']);
  const exact = plainStats(bank5000.numeric.age);
  assert.ok(Math.abs(age.scale / exact.std - 1) <= 0.2, `scale ${age.scale}, std ${exact.std}`);
  assert.deepEqual(notes.queries.filter((q) => q.column === 'age').map((q) => q.query), ['histogram', 'count', 'sum', 'squares']);
});

test('with the preparation fixed, neighbouring raw tables give prepared tables that differ in the replaced row only (Theorem 5, step 3)', () => {
  const t = readRawTable(file(bankTable(seeded('prepare-dp-rows'), 400).text, '.csv'), OPTS);
  const { preparation: p } = fitPreparation(t, OPTS, { mu: 0.5, deltaThreshold: 1e-6, noise: seededNoise('rows') });
  const a = applyPreparation(p, t, { file: t.file }).table.X;
  const n = replaceRow(t, 17, { rate: NaN, age: 1e9, income: -5, change: 0 }, { job: 'astronaut' });
  const b = applyPreparation(p, n, { file: t.file }).table.X;
  const d = p.outputs.length;
  for (let i = 0; i < t.rows; i++) {
    const same = a.data.subarray(i * d, (i + 1) * d).every((v, j) => v === b.data[i * d + j]);
    assert.equal(same, i !== 17, `row ${i}`);
  }
});
