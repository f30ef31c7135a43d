// A file read as a party keeps it (readKeptBlock), its sparse rows written to a temporary file as
// they are read (SpillingCsrBuilder), gives what readFeatureBlock gives: the same matrix (CSR,
// dense, or dense at first and sparse later), ids and errors. The builder keeps its entries in
// memory where no temporary file can be made, or when a write fails half-way (a file size limit,
// in a child process): the same matrix either way.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Csr, type Dense, type ReadOptions, CsrBuilder, DataError, SpilledCsr, SpillingCsrBuilder, isDense, packIds, readFeatureBlock, readKeptBlock, readLibsvm } from '../index.js';
import { seeded, tempDir, withTmp } from './support.js';

const dir = tempDir({ after }, 'admm-core-kept-');
const tmp = tempDir({ after }, 'admm-core-kept-tmp-');

let counter = 0;
function file(text: string, ext = 'libsvm'): string {
  const p = join(dir, `f${counter++}.${ext}`);
  writeFileSync(p, text);
  return p;
}

const plain = (a: Csr) => ({ rows: a.rows, cols: a.cols, indptr: Array.from(a.indptr), indices: Array.from(a.indices), values: Array.from(a.values) });
const every = (n: number) => Array.from({ length: n }, (_, i) => i);

/** A matrix in any form as plain CSR arrays. */
function asCsr(X: Csr | Dense | SpilledCsr): ReturnType<typeof plain> {
  if (X instanceof SpilledCsr) return plain(X.selectCsr(every(X.rows)));
  if (!isDense(X)) return plain(X);
  const b = new CsrBuilder(X.cols);
  for (let i = 0; i < X.rows; i++) {
    for (let j = 0; j < X.cols; j++) b.push(j, X.data[i * X.cols + j]);
    b.endRow();
  }
  return plain(b.build(X.cols));
}

/** LIBSVM lines `id j:v ...`, ids first, `rows` of them, sparse among `cols` columns (some rows empty, some unsorted). */
function sparseText(rows: number, cols: number, seed: number): string {
  const rand = seeded(seed);
  const lines: string[] = [];
  for (let i = 0; i < rows; i++) {
    const js = new Set<number>();
    const n = i % 13 === 0 ? 0 : 1 + Math.floor(rand() * 6);
    while (js.size < n) js.add(1 + Math.floor(rand() * cols));
    const sorted = [...js].sort((a, b) => a - b);
    if (i % 7 === 0) sorted.reverse();
    lines.push([`id${i * 3}`, ...sorted.map((j) => `${j}:${(rand() * 2 - 1).toFixed(3)}`)].join(' '));
  }
  return lines.join('\n') + '\n';
}

function same(path: string, opts: ReadOptions, folder = tmp): SpilledCsr | Dense {
  const want = readFeatureBlock(path, opts);
  const got = withTmp(folder, () => readKeptBlock(path, opts));
  assert.deepEqual(asCsr(got.X), asCsr(want.X));
  assert.equal(isDense(got.X), isDense(want.X));
  assert.deepEqual(got.ids, want.ids);
  assert.deepEqual(got.featureNames, want.featureNames);
  assert.deepEqual(readdirSync(tmp), [], 'the temporary files are gone from the folder');
  return got.X;
}

test('a sparse LIBSVM file kept as it is read: the matrix of readFeatureBlock, in a temporary file', () => {
  // 30,000 rows of up to 6 entries: the entries cross several of the builder's slices.
  const path = file(sparseText(30_000, 100, 1));
  for (const opts of [{ ids: 'first', features: 120 }, { ids: 'first', chunkBytes: 100 }] as ReadOptions[]) {
    const X = same(path, opts);
    assert.ok(X instanceof SpilledCsr && X.spilled);
    assert.equal(X.cols, opts.features ?? 100);
  }
  // The ids (packed as they are read, returned as views of the arrays they grew in) are those
  // of the reader of strings, packed afterwards; the views are exactly as long as the ids.
  const { ids } = withTmp(tmp, () => readKeptBlock(path, { ids: 'first' }));
  assert.deepEqual(ids, packIds(readLibsvm(path, { ids: 'first' }).ids));
  assert.equal(ids.offsets.length, 30_001);
  assert.equal(ids.bytes.length, ids.offsets[30_000]);
  // Without a temporary folder: in memory, the same matrix.
  const kept = same(path, { ids: 'first' }, join(dir, 'missing'));
  assert.ok(kept instanceof SpilledCsr && !kept.spilled);
});

test('dense, dense at first and sparse later, fewer rows than the probe, and CSV: as readFeatureBlock', () => {
  const rand = seeded(2);
  const dense = Array.from({ length: 200 }, (_, i) => `${i + 1} ${Array.from({ length: 8 }, (_, j) => `${j + 1}:${(rand() + 0.1).toFixed(2)}`).join(' ')}`);
  assert.ok(isDense(same(file(dense.join('\n') + '\n'), { ids: 'first' })));
  // A far column after 100 dense rows: the rest goes on sparse, into the temporary file.
  const wide = [...dense.slice(0, 100), '101 5000:1.5', ...dense.slice(101)];
  assert.ok(same(file(wide.join('\n') + '\n'), { ids: 'first' }) instanceof SpilledCsr);
  assert.ok(same(file(sparseText(20, 50, 3)), { ids: 'first' }) instanceof SpilledCsr);
  const csv = ['id,a,b,c,d,e,f,g,h,i,j', ...Array.from({ length: 300 }, (_, i) => `r${i},${Array.from({ length: 10 }, (_, j) => ((i + j) % 9 === 0 ? '0.5' : '0')).join(',')}`)];
  assert.ok(same(file(csv.join('\n') + '\n', 'csv'), {}) instanceof SpilledCsr);
});

test('a bad file is refused by readKeptBlock with the error of readFeatureBlock', () => {
  const text = sparseText(500, 40, 4).split('\n');
  const bad = [
    [...text.slice(0, 300), text[10], ...text.slice(300)],
    [...text.slice(0, 200), 'x1 3:1 3:2', ...text.slice(200)],
    [...text.slice(0, 250), 'x2 41:1', ...text.slice(250)],
  ];
  for (const lines of bad) {
    const path = file(lines.join('\n'));
    const opts: ReadOptions = { ids: 'first', features: 40 };
    let expected: DataError | undefined;
    try {
      readFeatureBlock(path, opts);
    } catch (e) {
      expected = e as DataError;
    }
    assert.ok(expected instanceof DataError, lines[300]);
    assert.throws(() => withTmp(tmp, () => readKeptBlock(path, opts)), (e: unknown) => e instanceof DataError && e.message === expected!.message);
  }
});

test('a write that fails half-way (a file size limit) leaves the entries in memory: the same matrix', () => {
  // 200,000 entries: 2.4 MB written in slices of 65,536, past a limit of 512 KiB or 1 MiB a file (sh's blocks).
  const script = join(dir, 'limit.mjs');
  const core = pathToFileURL(join(import.meta.dirname, '..', 'index.js')).href;
  writeFileSync(
    script,
    `import { CsrBuilder, SpillingCsrBuilder } from ${JSON.stringify(core)};
const s = new SpillingCsrBuilder(), b = new CsrBuilder();
for (let i = 0; i < 40000; i++) { for (let k = 0; k < 5; k++) { s.push((i * 7 + k * 3) % 1000, i + k / 8); b.push((i * 7 + k * 3) % 1000, i + k / 8); } if (i % 11 === 0) { s.push(5, 0); } s.endRow(); b.endRow(); }
const got = s.build(1000), want = b.build(1000);
const all = Array.from({ length: got.rows }, (_, i) => i);
const a = got.selectCsr(all);
const eq = (x, y) => x.length === y.length && x.every((v, i) => v === y[i]);
console.log(JSON.stringify({ spilled: got.spilled, same: eq(a.indptr, want.indptr) && eq(a.indices, want.indices) && eq(a.values, want.values) }));
`,
  );
  const run = (limitKiB: number) => JSON.parse(execFileSync('sh', ['-c', `ulimit -f ${limitKiB}; exec "$0" "$1"`, process.execPath, script], { env: { ...process.env, TMPDIR: tmp }, encoding: 'utf8' })) as { spilled: boolean; same: boolean };
  assert.deepEqual(run(1024), { spilled: false, same: true }, 'the values file passed the limit: in memory');
  assert.deepEqual(run(1 << 20), { spilled: true, same: true }, 'no limit reached: in the temporary files');
  // The builder in this process: in files, and a column beyond the one declared refused.
  const s = withTmp(tmp, () => new SpillingCsrBuilder(3));
  s.push(4, 1);
  s.endRow();
  assert.throws(() => s.build(3), /matrix has a column 4, more than the 3 declared/);
});
