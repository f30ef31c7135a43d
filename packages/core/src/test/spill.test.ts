// Data kept in a temporary file: the file is gone from the temporary folder as soon as it is
// written, and what is read back equals what was kept: bytes as they were, and a selection of
// a CSR matrix's rows equal to csrSelectRows on the matrix in memory (rows crossing the pieces
// the file is read in, empty rows, into fresh arrays or the kernels' memory). Without a
// temporary folder, everything stays in memory and works the same.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Csr, CsrBuilder, SpilledBytes, SpilledCsr, WasmCsr, csrSelectRows } from '../index.js';
import { readAll, seeded, tempDir, withTmp } from './support.js';

const dir = tempDir({ after }, 'admm-core-spill-');

/** A sparse matrix whose rows have 0 to `maxRow` entries (some long enough to cross the 1 MiB pieces). */
function matrix(rows: number, cols: number, maxRow: number, seed: number): Csr {
  const rand = seeded(seed);
  const b = new CsrBuilder(cols);
  for (let i = 0; i < rows; i++) {
    const len = i % 97 === 0 ? cols : Math.floor(rand() * (maxRow + 1));
    const start = Math.floor(rand() * (cols - len + 1));
    for (let j = start; j < start + len; j++) b.push(j, rand() * 2 - 1);
    b.endRow();
  }
  return b.build(cols);
}

const plain = (a: Csr) => ({ rows: a.rows, cols: a.cols, indptr: Array.from(a.indptr), indices: Array.from(a.indices), values: Array.from(a.values) });

function shuffledSubset(n: number, keep: number, seed: number): number[] {
  const rand = seeded(seed);
  const order = Array.from({ length: n }, (_, i) => i).filter(() => rand() < keep);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

test('bytes kept in a temporary file already removed from its folder are read back as they were', () => {
  const bytes = Uint8Array.from({ length: 3_000_003 }, (_, i) => (i * 31) % 251);
  const spilled = withTmp(dir, () => new SpilledBytes(bytes));
  assert.ok(spilled.spilled);
  assert.deepEqual(readdirSync(dir), [], 'nothing left in the temporary folder');
  assert.deepEqual(readAll(spilled), bytes);
  assert.deepEqual(readAll(spilled), bytes, 'and again');
  // A piece from the middle, across the 1 MiB a read or write takes at a time.
  const piece = new Uint8Array(2_000_000);
  spilled.readAt(777_777, piece);
  assert.deepEqual(piece, bytes.subarray(777_777, 2_777_777));
  assert.throws(() => spilled.readAt(bytes.length - 1, new Uint8Array(2)), RangeError);
  const kept = withTmp(join(dir, 'missing'), () => new SpilledBytes(bytes));
  assert.ok(!kept.spilled);
  assert.deepEqual(readAll(kept), bytes, 'no temporary folder: kept in memory');
  kept.readAt(777_777, piece);
  assert.deepEqual(piece, bytes.subarray(777_777, 2_777_777));
});

test('rows selected from a spilled matrix equal those of the matrix in memory', () => {
  // 60,000 rows of up to 20 entries, and a full row of 3000 every 97 rows: about 1.5M entries,
  // so both arrays cross several 1 MiB pieces, and some rows cross a piece's end.
  const a = matrix(60_000, 3000, 20, 1);
  assert.ok(a.values.length * 4 > 3 * 2 ** 20, `entries across pieces: ${a.values.length}`);
  const spilled = withTmp(dir, () => new SpilledCsr(a));
  assert.ok(spilled.spilled);
  assert.deepEqual(readdirSync(dir), []);
  assert.equal(spilled.nonzeros(), a.values.length);
  const order = shuffledSubset(a.rows, 0.7, 2);
  const expected = plain(csrSelectRows(a, order));
  assert.equal(spilled.selectedEntries(order), expected.values.length);
  assert.deepEqual(plain(spilled.selectCsr(order)), expected);
  const w = WasmCsr.empty(order.length, a.cols, spilled.selectedEntries(order))!;
  spilled.selectInto(w.csr, order);
  assert.deepEqual(plain(w.csr), expected, "into the kernels' memory");
  // Every row, in reverse; no row; and a matrix that is a view of part of a larger one.
  const all = Array.from({ length: a.rows }, (_, i) => a.rows - 1 - i);
  assert.deepEqual(plain(spilled.selectCsr(all)), plain(csrSelectRows(a, all)));
  assert.deepEqual(plain(spilled.selectCsr([])), plain(csrSelectRows(a, [])));
  const part: Csr = { rows: 100, cols: a.cols, indptr: a.indptr.subarray(500, 601), indices: a.indices, values: a.values };
  const partOrder = shuffledSubset(100, 0.5, 3);
  assert.deepEqual(plain(withTmp(dir, () => new SpilledCsr(part)).selectCsr(partOrder)), plain(csrSelectRows(part, partOrder)));
  assert.throws(() => spilled.selectCsr([a.rows]), RangeError);
  assert.throws(() => spilled.selectCsr([3, 3]), /row 3 selected twice/);
  // Without a temporary folder: in memory, the same selections.
  const kept = withTmp(join(dir, 'missing'), () => new SpilledCsr(a));
  assert.ok(!kept.spilled);
  assert.deepEqual(plain(kept.selectCsr(order)), expected);
});

test('bytes written a piece at a time, at any offsets and over each other, read back as the last writes left them (in a file, or kept)', () => {
  const bytes = Uint8Array.from({ length: 2_500_001 }, (_, i) => (i * 37) % 253);
  for (const folder of [dir, join(dir, 'missing')]) {
    const w = withTmp(folder, () => SpilledBytes.writer(bytes.length));
    // Garbage first, then the true bytes in pieces out of order, the last piece past a 1 MiB write.
    w.write(1000, new Uint8Array(5000).fill(9));
    for (const [a, b] of [[2_000_000, 2_500_001], [0, 700_000], [700_000, 2_000_000]]) w.write(a, bytes.subarray(a, b));
    assert.throws(() => w.write(bytes.length - 1, new Uint8Array(2)), RangeError);
    const s = w.done();
    assert.equal(s.spilled, folder === dir);
    assert.deepEqual(readAll(s), bytes);
  }
  assert.deepEqual(readdirSync(dir), [], 'nothing left in the temporary folder');
});
