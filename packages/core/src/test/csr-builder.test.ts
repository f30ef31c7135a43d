// CsrBuilder, the matrix builder of the file readers: blocks, zeros, capacity.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CsrBuilder } from '../index.js';
import { plain, csrOf } from './io-support.js';
import { seeded } from './support.js';

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
