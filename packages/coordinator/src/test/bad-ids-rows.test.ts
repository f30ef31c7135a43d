// The coordinator never asks a party for one row twice (a party refuses such a `score`): two
// ids of a request that a party's `found` answer puts on one row are asked for once, and the
// score is given to both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { distinctRows } from '../prediction/predict.js';

test('distinctRows: no repeat, the positions as they are; repeats asked once, in first-seen order, and spread back', () => {
  const plain = Uint32Array.from([5, 0, 9]);
  assert.deepEqual(distinctRows(plain), { rows: plain, at: undefined });
  const { rows, at } = distinctRows(Uint32Array.from([7, 3, 7, 7, 1, 3]));
  assert.deepEqual(Array.from(rows), [7, 3, 1]);
  assert.deepEqual(Array.from(at!), [0, 1, 0, 0, 2, 1]);
  // What each position gets back from the party's answer for `rows` (score = 10 x row here).
  const answer = Array.from(rows, (r) => 10 * r);
  assert.deepEqual(Array.from(at!, (k) => answer[k]), [70, 30, 70, 70, 10, 30]);
  assert.deepEqual(distinctRows(new Uint32Array(0)), { rows: new Uint32Array(0), at: undefined });
});
