// ByteTable against a JS Map of hex strings (the obvious, slow reference), through growth,
// with values that are and are not the entry's index, and with keys a hostile peer would pick.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ByteTable } from '../index.js';
import { seeded } from './support.js';

function randomKeys(rand: () => number, n: number, kb: number): Uint8Array {
  const keys = new Uint8Array(n * kb);
  for (let i = 0; i < keys.length; i++) keys[i] = Math.floor(rand() * 256);
  return keys;
}

const hex = (keys: Uint8Array, i: number, kb: number) => Buffer.from(keys.subarray(i * kb, (i + 1) * kb)).toString('hex');

for (const kb of [16, 32, 5]) {
  test(`ByteTable (${kb}-byte keys): set, get and replace agree with a Map, through growth from an empty table`, () => {
    const rand = seeded(`byte-table-${kb}`);
    const n = 20_000;
    // Every key twice over (the second half repeats the first in another order), and a set of absent keys.
    const keys = randomKeys(rand, n, kb);
    const absent = randomKeys(rand, 1000, kb);
    const table = new ByteTable(kb);
    const ref = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const v = Math.floor(rand() * 2 ** 31);
      const k = hex(keys, i, kb);
      assert.equal(table.set(keys, i * kb, v), ref.get(k) ?? -1);
      ref.set(k, v);
    }
    for (let i = n - 1; i >= 0; i -= 3) {
      const k = hex(keys, i, kb);
      assert.equal(table.set(keys, i * kb, i), ref.get(k));
      ref.set(k, i);
    }
    assert.equal(table.size, ref.size);
    for (let i = 0; i < n; i++) assert.equal(table.get(keys, i * kb), ref.get(hex(keys, i, kb)));
    for (let i = 0; i < 1000; i++) assert.equal(table.get(absent, i * kb), ref.get(hex(absent, i, kb)) ?? -1);
    // keys(): first-set order, each once.
    const order = [...new Set(Array.from({ length: n }, (_, i) => hex(keys, i, kb)))];
    const stored = table.keys();
    assert.equal(stored.length, order.length * kb);
    for (let e = 0; e < order.length; e++) assert.equal(hex(stored, e, kb), order[e]);
  });
}

test('ByteTable: values equal to the entry index until one is not (the values array appears then), then either kind', () => {
  const keys = randomKeys(seeded('identity'), 100, 16);
  const table = new ByteTable(16, 100);
  for (let i = 0; i < 50; i++) table.set(keys, i * 16, i);
  table.set(keys, 50 * 16, 7);
  for (let i = 51; i < 100; i++) table.set(keys, i * 16, i);
  for (let i = 0; i < 100; i++) assert.equal(table.get(keys, i * 16), i === 50 ? 7 : i);
});

test('ByteTable: keys at any offset, including unaligned ones, and a key read from another array', () => {
  const buf = new Uint8Array(16 * 3 + 3);
  for (let i = 0; i < buf.length; i++) buf[i] = (i * 37) & 255;
  const table = new ByteTable(16);
  table.set(buf, 3, 11);
  table.set(buf, 19, 12);
  assert.equal(table.get(buf.slice(3, 19), 0), 11);
  assert.equal(table.get(buf, 19), 12);
  assert.equal(table.get(buf, 35), -1);
});

test('ByteTable: refuses values outside 0..2^31-1 and keys past the end of their array', () => {
  const table = new ByteTable(16);
  const k = new Uint8Array(16);
  assert.throws(() => table.set(k, 0, -1), RangeError);
  assert.throws(() => table.set(k, 0, 2 ** 31), RangeError);
  assert.throws(() => table.set(k, 0, 1.5), RangeError);
  assert.throws(() => table.set(k, 1, 0), /runs past the 16 bytes/);
  assert.throws(() => table.get(k, 1), /runs past/);
  assert.throws(() => new ByteTable(0), RangeError);
  assert.equal(table.size, 0);
});

test('ByteTable: hostile keys that share their first 28 bytes all work and spread over the slots, under every one of 40 hashes drawn', () => {
  // (A 2-independent hash failed this in 2-3 % of draws: a mean of 3 to 90 probes.)
  const n = 50_000;
  const keys = new Uint8Array(n * 32).fill(0xab);
  for (let i = 0; i < n; i++) new DataView(keys.buffer).setUint32(i * 32 + 28, i, true);
  for (let draw = 0; draw < 40; draw++) {
    const table = new ByteTable(32);
    for (let i = 0; i < n; i++) assert.equal(table.set(keys, i * 32, i), -1);
    let probes = 0;
    for (let i = 0; i < n; i++) {
      assert.equal(table.get(keys, i * 32), i);
      probes += table.probes(keys, i * 32);
    }
    assert.ok(probes / n < 3, `draw ${draw}: mean probes ${probes / n}`);
  }
});

test('ByteTable: keys that differ only in the top bits of their 32-bit words (all in a few slots under a sum of odd multiples of the words) spread too', () => {
  // Words differing by multiples of 2^29 change a sum of odd multiples of the words by
  // multiples of 2^29: its top bits, so at most 8 slots for all of them, whatever the multipliers.
  const n = 8 ** 5;
  const keys = new Uint8Array(n * 32).fill(0x5a);
  const view = new DataView(keys.buffer);
  for (let i = 0; i < n; i++)
    for (let w = 0; w < 5; w++) {
      const top = Math.floor(i / 8 ** w) % 8;
      view.setUint32(i * 32 + 4 * w, ((top << 29) | 0x0a5a5a5a) >>> 0, true);
    }
  const table = new ByteTable(32, n);
  for (let i = 0; i < n; i++) table.set(keys, i * 32, i);
  assert.equal(table.size, n);
  let probes = 0;
  let worst = 0;
  for (let i = 0; i < n; i++) {
    assert.equal(table.get(keys, i * 32), i);
    const p = table.probes(keys, i * 32);
    probes += p;
    worst = Math.max(worst, p);
  }
  assert.ok(probes / n < 3, `mean probes ${probes / n}`);
  assert.ok(worst < 100, `longest probe ${worst}`);
});

test('ByteTable.adopt: the keys given become the table (key e -> e) without a copy, grow on the next set, and a repeated key is refused', () => {
  const keys = randomKeys(seeded('adopt'), 1000, 16);
  const table = ByteTable.adopt(16, keys);
  assert.equal(table.size, 1000);
  assert.equal(table.keys().buffer, keys.buffer);
  for (let i = 0; i < 1000; i++) assert.equal(table.get(keys, i * 16), i);
  const extra = randomKeys(seeded('adopt-extra'), 1, 16);
  assert.equal(table.set(extra, 0, 1000), -1);
  assert.equal(table.get(extra, 0), 1000);
  assert.equal(table.get(keys, 999 * 16), 999);
  const twice = keys.slice(0, 5 * 16);
  twice.copyWithin(4 * 16, 1 * 16, 2 * 16);
  assert.throws(() => ByteTable.adopt(16, twice), /key 4 repeats key 1/);
  assert.throws(() => ByteTable.adopt(16, keys.subarray(1)), /whole number/);
  // An empty table adopted (an empty file's) grows from nothing.
  const empty = ByteTable.adopt(16, new Uint8Array(0));
  for (let i = 0; i < 20; i++) assert.equal(empty.set(keys, i * 16, i + 5), -1);
  for (let i = 0; i < 20; i++) assert.equal(empty.get(keys, i * 16), i + 5);
});

test('ByteTable.adopt with room: the first `count` keys are the table, sets fill the room in the same array, then it grows', () => {
  const keys = randomKeys(seeded('room'), 50, 16);
  const storage = new Uint8Array(40 * 16);
  storage.set(keys.subarray(0, 30 * 16));
  const table = ByteTable.adopt(16, storage, false, 30);
  assert.equal(table.size, 30);
  assert.equal(table.get(keys, 30 * 16), -1);
  for (let i = 30; i < 40; i++) assert.equal(table.set(keys, i * 16, i), -1);
  assert.equal(table.keys().buffer, storage.buffer);
  for (let i = 40; i < 50; i++) assert.equal(table.set(keys, i * 16, i), -1);
  assert.notEqual(table.keys().buffer, storage.buffer);
  for (let i = 0; i < 50; i++) assert.equal(table.get(keys, i * 16), i);
  assert.throws(() => ByteTable.adopt(16, storage, false, 41), /41 keys adopted from an array of 40/);
});
