// io: sample ids: repeats found by hash and named by line, and ids packed as they are read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DataError, packIds, readCsvFeatures, readFeatureBlock, readLibsvm, refuseDuplicates } from '../index.js';
import { fnvCollision, testFiles } from './io-support.js';

const { file } = testFiles('admm-core-io-ids-');

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
