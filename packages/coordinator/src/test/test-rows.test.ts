// The test rows the coordinator holds out of the aligned ids (alignment/test-rows.ts): the
// flags' checks, the seeded choice (recomputed here from the documented rule), --test-ids files
// in both forms, and the split of an aligned set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, DataError } from '@admm-share/core';
import { tempDir } from '@admm-share/core/test-support';
import { DEFAULT_HOLDOUT_SEED, chooseTestRows, readTestIds, splitAligned, testSelectionOf } from '../alignment/test-rows.js';

test('testSelectionOf: fractions strictly between 0 and 1, one way of choosing test rows, the seed only with --holdout', () => {
  assert.deepEqual(testSelectionOf({}), undefined);
  assert.deepEqual(testSelectionOf({ testLabels: 't.csv' }), undefined);
  assert.deepEqual(testSelectionOf({ holdout: 0.2 }), { method: 'holdout', fraction: 0.2, seed: DEFAULT_HOLDOUT_SEED });
  assert.deepEqual(testSelectionOf({ holdout: 1e-9, holdoutSeed: 'x' }), { method: 'holdout', fraction: 1e-9, seed: 'x' });
  assert.deepEqual(testSelectionOf({ testIds: 'ids.txt' }), { method: 'test-ids', file: 'ids.txt' });
  for (const bad of [0, 1, 1.5, -0.1, Number.NaN, Infinity])
    assert.throws(() => testSelectionOf({ holdout: bad }), (e: Error) => e instanceof ConfigError && new RegExp(`--holdout must be a fraction strictly between 0 and 1 .*got ${bad}`).test(e.message));
  assert.throws(() => testSelectionOf({ holdout: 0.2, testLabels: 't.csv' }), /--holdout and --test-labels both give the test rows/);
  assert.throws(() => testSelectionOf({ testIds: 'i', testLabels: 't.csv' }), /--test-ids and --test-labels both give the test rows/);
  assert.throws(() => testSelectionOf({ holdout: 0.2, testIds: 'i' }), /--holdout and --test-ids both choose the test rows/);
  assert.throws(() => testSelectionOf({ holdoutSeed: 's' }), /--holdout-seed needs --holdout/);
});

test('--holdout: the round(f n) ids of smallest SHA-256(seed, 0, id), whatever their order; at least one test and one training row', () => {
  const ids = Array.from({ length: 101 }, (_, i) => `id-${(i * 37) % 101}`);
  const key = (seed: string, id: string) => createHash('sha256').update(Buffer.concat([Buffer.from(seed), Buffer.from([0]), Buffer.from(id)])).digest('hex');
  const chosen = (seed: string, f: number, list: string[]) => {
    const { test: mask, report } = chooseTestRows({ method: 'holdout', fraction: f, seed }, list);
    return { set: new Set(list.filter((_, i) => mask[i])), report };
  };
  const { set, report } = chosen('s', 0.3, ids);
  const want = [...ids].sort((a, b) => (key('s', a) < key('s', b) ? -1 : 1)).slice(0, 30);
  assert.deepEqual([...set].sort(), want.sort());
  assert.deepEqual(report, { method: 'holdout', fraction: 0.3, seed: 's', aligned: 101, test: 30, train: 71 });
  // Another order of the same ids: the same choice. Another seed: another one.
  assert.deepEqual([...chosen('s', 0.3, [...ids].reverse()).set].sort(), want.sort());
  assert.notDeepEqual([...chosen('t', 0.3, ids).set].sort(), want.sort());
  // A tiny fraction still holds out one row; a large one leaves one to train on.
  assert.equal(chosen('s', 0.001, ids).report.test, 1);
  assert.equal(chosen('s', 0.999, ids).report.train, 1);
  assert.throws(() => chooseTestRows({ method: 'holdout', fraction: 0.5, seed: 's' }, ['only']), /--holdout: 1 aligned id, too few/);
});

test('--test-ids: listed aligned ids are test rows, the others counted; none aligned, or all of them, is a ConfigError', (t) => {
  const aligned = ['a', 'b', 'c', 'd'];
  const select = { method: 'test-ids', file: 'ids.txt' } as const;
  const { test: mask, report } = chooseTestRows(select, aligned, ['d', 'zz', 'b', 'yy']);
  assert.deepEqual([...mask], [0, 1, 0, 1]);
  assert.deepEqual(report, { method: 'test-ids', file: 'ids.txt', listed: 4, notAligned: 2, aligned: 4, test: 2, train: 2 });
  assert.throws(() => chooseTestRows(select, aligned, ['x', 'y']), (e: Error) => e instanceof ConfigError && /none of its 2 ids is among the 4 aligned ids/.test(e.message));
  assert.throws(() => chooseTestRows(select, aligned, ['a', 'b', 'c', 'd', 'e']), /leaves no row to train on/);

  const dir = tempDir(t);
  const plain = join(dir, 'ids.txt');
  writeFileSync(plain, 'a\r\n\n  b \nc\n');
  assert.deepEqual(readTestIds(plain, 'id'), ['a', 'b', 'c']);
  const csv = join(dir, 'ids.csv');
  writeFileSync(csv, 'label,customer\n1,a\n0,c\n');
  assert.deepEqual(readTestIds(csv, 'customer'), ['a', 'c']);
  const header = join(dir, 'header.txt');
  writeFileSync(header, 'customer\nq\nr\n');
  assert.deepEqual(readTestIds(header, 'customer'), ['q', 'r']);
  const twice = join(dir, 'twice.txt');
  writeFileSync(twice, 'a\nb\na\n');
  assert.throws(() => readTestIds(twice, 'id'), (e: Error) => e instanceof DataError && /twice\.txt:3: duplicate sample id 'a' \(first seen on line 1\)/.test(e.message));
  assert.throws(() => readTestIds(join(dir, 'missing.txt'), 'id'), (e: Error) => e instanceof ConfigError && /--test-ids .*missing\.txt/.test(e.message));
  // "Müller" in Latin-1: not UTF-8, refused on its line unless read as Latin-1.
  const latin1 = join(dir, 'latin1.txt');
  writeFileSync(latin1, Buffer.concat([Buffer.from('a\nM'), Buffer.of(0xfc), Buffer.from('ller\n')]));
  assert.throws(() => readTestIds(latin1, 'id'), (e: Error) => e instanceof DataError && /latin1\.txt:2: .*not valid UTF-8/.test(e.message));
  assert.deepEqual(readTestIds(latin1, 'id', 'latin1'), ['a', 'Müller']);
});

test("splitAligned: the rows marked are the test set, the others the training set, each party's positions with them, in order", () => {
  const set = { labelRows: Uint32Array.from([0, 2, 3, 7, 9]), partyRows: [Uint32Array.from([4, 0, 1, 3, 2]), Uint32Array.from([9, 8, 7, 6, 5])], dropped: 3 };
  const { train, test: held } = splitAligned(set, Uint8Array.from([0, 1, 0, 0, 1]));
  assert.deepEqual(train, { labelRows: Uint32Array.from([0, 3, 7]), partyRows: [Uint32Array.from([4, 1, 3]), Uint32Array.from([9, 7, 6])], dropped: 3 });
  assert.deepEqual(held, { labelRows: Uint32Array.from([2, 9]), partyRows: [Uint32Array.from([0, 2]), Uint32Array.from([8, 5])], dropped: 0 });
});
