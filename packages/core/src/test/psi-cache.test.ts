// The PSI cache on real folders: round trips, lookups, replacement, and every refusal naming
// its file. Expected digests are computed here with sodium-native's BLAKE2b directly, under the
// key derivation the module comment documents.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { chmodSync, copyFileSync, readFileSync, readdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import sodium from 'sodium-native';
import { type CacheTableName, type OpenedCache, PointCache, PsiCache, cachedPoints, packIds, pickRows } from '../index.js';
import { seeded, tempDir } from './support.js';

const root = tempDir({ after }, 'admm-core-psi-cache-');
let folders = 0;
const fresh = () => join(root, `c${folders++}`);
const BOTH: readonly CacheTableName[] = ['own', 'peer'];

function bytes(rand: () => number, n: number): Uint8Array {
  return Uint8Array.from({ length: n }, () => Math.floor(rand() * 256));
}

/** A cache in a new folder with n entries in each table (seeded), saved. */
function filled(n: number, seed: string, partner = 'bank') {
  const rand = seeded(seed);
  const dir = fresh();
  const cache = PsiCache.create(dir, { tables: BOTH, partner });
  const own = { keys: cache.digests(Array.from({ length: n }, (_, i) => `id-${seed}-${i}`)), points: bytes(rand, n * 32) };
  const peer = { keys: bytes(rand, n * 32), points: bytes(rand, n * 32) };
  cache.table('own').add(own.keys, own.points);
  cache.table('peer').add(peer.keys, peer.points);
  cache.save();
  return { dir, cache, own, peer };
}

function opened(r: OpenedCache): PsiCache {
  assert.equal(r.why, undefined);
  assert.ok(r.cache);
  return r.cache;
}

/** The folder's file of this name (a generation-stamped name: `key`, `own.bin`, `peer.bin`, or `meta.json`). */
function fileOf(dir: string, suffix: string): string {
  const names = readdirSync(dir).filter((f) => f === suffix || f.endsWith(`.${suffix}`));
  assert.equal(names.length, 1, `one ${suffix} in ${readdirSync(dir).join(', ')}`);
  return join(dir, names[0]!);
}

const openBoth = (dir: string, extra: { maxAgeDays?: number; now?: Date; partner?: string; rotate?: boolean } = {}) =>
  PsiCache.open(dir, { tables: BOTH, maxAgeDays: 30, ...extra });

function refused(dir: string, file: string, ...phrases: (string | RegExp)[]): void {
  const r = openBoth(dir);
  assert.equal(r.cache, undefined);
  assert.ok(r.why?.startsWith(`${file}:`), `why names ${file}: ${r.why}`);
  for (const p of phrases) assert.match(r.why ?? '', typeof p === 'string' ? new RegExp(p.replace(/[()[\].*+?^$|\\]/g, '\\$&')) : p);
}

test('PsiCache: a round trip keeps id, key, creation, partner and both tables; its files are mode 0600 and bytesOnDisk is their sum', () => {
  const { dir, cache, own, peer } = filled(500, 'trip');
  const back = opened(openBoth(dir));
  assert.equal(back.id, cache.id);
  assert.match(back.id, /^[0-9a-f]{32}$/);
  assert.deepEqual(back.key, cache.key);
  assert.equal(back.created.getTime(), cache.created.getTime());
  assert.equal(back.partner, 'bank');
  for (const [name, t] of [['own', own], ['peer', peer]] as const) {
    const out = new Uint8Array(t.points.length);
    assert.deepEqual(back.table(name).lookup(t.keys, out), new Uint32Array(0));
    assert.deepEqual(out, t.points);
    assert.equal(back.table(name).size, 500);
  }
  const files = readdirSync(dir);
  assert.equal(files.length, 4, files.join(', '));
  let sum = 0;
  for (const f of files) {
    const st = statSync(join(dir, f));
    assert.equal(st.mode & 0o777, 0o600, f);
    sum += st.size;
  }
  assert.equal(back.bytesOnDisk(), sum);
  // header 16 + n (16 + 32) + MAC 32; header 16 + n (32 + 32) + MAC 32
  assert.equal(statSync(fileOf(dir, 'own.bin')).size, 16 + 500 * 48 + 32);
  assert.equal(statSync(fileOf(dir, 'peer.bin')).size, 16 + 500 * 64 + 32);
  assert.equal(statSync(fileOf(dir, 'key')).size, 32);
});

test('PointCache: lookup writes hits, lists misses in order and leaves their output alone; add with `which` and replacement', () => {
  const rand = seeded('lookup');
  const t = new PointCache(16);
  const keys = bytes(rand, 10 * 16);
  const points = bytes(rand, 10 * 32);
  const which = Uint32Array.of(1, 4, 7);
  t.add(keys, points.subarray(0, 3 * 32), which);
  assert.equal(t.size, 3);
  const out = new Uint8Array(10 * 32).fill(0xee);
  assert.deepEqual(t.lookup(keys, out), Uint32Array.of(0, 2, 3, 5, 6, 8, 9));
  for (let j = 0; j < 3; j++) assert.deepEqual(out.subarray(which[j]! * 32, which[j]! * 32 + 32), points.subarray(j * 32, j * 32 + 32));
  assert.ok(out.subarray(0, 32).every((b) => b === 0xee));
  // Replacing key 4's point, and adding the rest.
  t.add(keys.subarray(4 * 16, 5 * 16), points.subarray(9 * 32));
  t.add(keys, points);
  assert.equal(t.size, 10);
  assert.deepEqual(t.lookup(keys, out), new Uint32Array(0));
  assert.deepEqual(out, points);
  assert.throws(() => t.add(keys, points.subarray(32)), /bytes of points for 10 keys/);
  assert.throws(() => t.add(keys.subarray(1), points), /whole number of 16-byte keys/);
  assert.throws(() => t.add(keys, points.subarray(0, 32), Uint32Array.of(10)), /key index 10 of 10/);
});

test('PsiCache: save writes only changed tables; release writes and frees them, and table() reloads them verified', async () => {
  const { dir, cache, own } = filled(100, 'save');
  assert.equal(cache.save(), 0);
  const more = bytes(seeded('more'), 32);
  cache.table('own').add(cache.digests(['new id']), more);
  assert.equal(cache.save(), 16 + 101 * 48 + 32);
  cache.table('own').add(cache.digests(['newer id']), more);
  await cache.release();
  const out = new Uint8Array(32);
  assert.deepEqual(cache.table('own').lookup(cache.digests(['newer id']), out), new Uint32Array(0));
  assert.deepEqual(out, more);
  assert.equal(cache.table('own').size, 102);
  // Released, then edited on disk: the reload refuses it by name.
  await cache.release();
  const path = fileOf(dir, 'own.bin');
  const b = readFileSync(path);
  b[100] ^= 1;
  writeFileSync(path, b);
  assert.throws(() => cache.table('own'), (e: Error) => e.message.startsWith(`${path}:`) && /bad MAC/.test(e.message));
  assert.equal(own.keys.length, 100 * 16);
});

test('PsiCache: a swapped pair of entries is refused (bad MAC), not read as another alignment', () => {
  const { dir } = filled(50, 'swap');
  const path = fileOf(dir, 'own.bin');
  const b = readFileSync(path);
  // Entries 3 and 7: keys at 16 + i*16, points at 16 + 50*16 + i*32.
  const swap = (at: (i: number) => number, width: number) => {
    const x = Buffer.from(b.subarray(at(3), at(3) + width));
    b.copy(b, at(3), at(7), at(7) + width);
    x.copy(b, at(7));
  };
  swap((i) => 16 + i * 16, 16);
  swap((i) => 16 + 50 * 16 + i * 32, 32);
  writeFileSync(path, b);
  refused(dir, path, 'bad MAC', 'edited');
});

test('PsiCache: a truncated table, an appended byte, an unknown table format and a wrong header are refused by name', () => {
  const cases: [string, (b: Buffer) => Buffer, string[]][] = [
    ['truncated', (b) => b.subarray(0, b.length - 1), ['wrong size', 'truncated']],
    ['short', (b) => b.subarray(0, 20), ['truncated', '20 bytes']],
    ['appended', (b) => Buffer.concat([b, Buffer.of(0)]), ['wrong size', 'bytes appended']],
    ['format', (b) => (b.writeUInt16LE(2, 8), b), ['unknown format 2']],
    ['magic', (b) => (b.write('XXXX', 0, 'latin1'), b), ['not a PSI cache table']],
  ];
  for (const [name, edit, phrases] of cases) {
    const { dir } = filled(20, `cut-${name}`);
    const path = fileOf(dir, 'peer.bin');
    writeFileSync(path, edit(readFileSync(path)));
    refused(dir, path, ...phrases);
  }
});

test('PsiCache: a key file with mode 0644, of the wrong size, or missing is refused by name', () => {
  const a = filled(5, 'mode');
  const key = fileOf(a.dir, 'key');
  chmodSync(key, 0o644);
  refused(a.dir, key, 'wrong mode 0644', '--psi-rotate');
  const b = filled(5, 'size');
  const keyB = fileOf(b.dir, 'key');
  writeFileSync(keyB, Buffer.alloc(31), { mode: 0o600 });
  refused(b.dir, keyB, 'wrong size, 31 bytes');
  const c = filled(5, 'gone');
  const keyC = fileOf(c.dir, 'key');
  unlinkSync(keyC);
  refused(c.dir, keyC, 'missing');
});

test("PsiCache: a table copied from another cache (same file name) and another cache's key are refused by name", () => {
  const a = filled(30, 'a');
  const b = filled(30, 'b');
  const ownA = fileOf(a.dir, 'own.bin');
  copyFileSync(fileOf(b.dir, 'own.bin'), ownA);
  refused(a.dir, ownA, 'bad MAC', 'another cache');
  const c = filled(30, 'c');
  const keyC = fileOf(c.dir, 'key');
  copyFileSync(fileOf(b.dir, 'key'), keyC);
  refused(c.dir, join(c.dir, 'meta.json'), 'bad MAC', 'another cache');
});

test('PsiCache: meta.json with an unknown format, an edited creation time, or tables of the other side is refused by name', () => {
  const a = filled(5, 'fmt');
  const meta = join(a.dir, 'meta.json');
  const m = JSON.parse(readFileSync(meta, 'utf8'));
  writeFileSync(meta, JSON.stringify({ ...m, format: 'admm-share psi cache 9', extra: 1 }));
  refused(a.dir, meta, "unknown format \"admm-share psi cache 9\"");
  writeFileSync(meta, JSON.stringify({ ...m, created: new Date().toISOString() }));
  refused(a.dir, meta, 'bad MAC');
  writeFileSync(meta, '{"format":');
  refused(a.dir, meta, 'not JSON');
  const party = fresh();
  PsiCache.create(party, { tables: ['own'] });
  refused(party, join(party, 'meta.json'), 'not peer', 'other side');
  assert.ok(PsiCache.open(party, { tables: ['own'], maxAgeDays: 1 }).cache);
});

test('PsiCache: absent, rotated, too old, from the future, or for another partner: no cache, and why', () => {
  const none = PsiCache.open(join(root, 'never'), { tables: BOTH, maxAgeDays: 30 });
  assert.match(none.why ?? '', /no cache yet/);
  const { dir } = filled(5, 'age');
  assert.equal(openBoth(dir, { rotate: true }).why, 'rotated (--psi-rotate)');
  const old = fresh();
  const tenDaysAgo = new Date(Date.now() - 10 * 86_400_000);
  PsiCache.create(old, { tables: BOTH, now: tenDaysAgo });
  const r = openBoth(old, { maxAgeDays: 7 });
  assert.equal(r.cache, undefined);
  assert.match(r.why ?? '', /10\.0 days old, over --psi-max-age 7/);
  assert.ok(openBoth(old, { maxAgeDays: 11 }).cache);
  assert.match(openBoth(old, { now: new Date(tenDaysAgo.getTime() - 3 * 86_400_000) }).why ?? '', /future/);
  assert.match(openBoth(dir, { partner: 'telecom' }).why ?? '', /made for partner "bank", not "telecom"/);
  assert.ok(openBoth(dir, { partner: 'bank' }).cache);
});

test('PsiCache: create replaces a cache whole; files a crashed create left behind are ignored, then removed', () => {
  const a = filled(40, 'old');
  const before = readdirSync(a.dir).sort();
  // A create that died before its meta.json: another generation's key and tables in the folder.
  const other = filled(7, 'crashed');
  for (const f of readdirSync(other.dir)) if (f !== 'meta.json') copyFileSync(join(other.dir, f), join(a.dir, f));
  const still = opened(openBoth(a.dir));
  assert.equal(still.id, a.cache.id);
  assert.equal(still.table('own').size, 40);
  const id = 'f'.repeat(32);
  const b = PsiCache.create(a.dir, { tables: BOTH, id, partner: 'telecom' });
  const after = readdirSync(a.dir).sort();
  assert.equal(after.length, 4, after.join(', '));
  assert.ok(!after.some((f) => f !== 'meta.json' && before.includes(f)), 'no file of the old cache is left');
  const back = opened(openBoth(a.dir));
  assert.equal(back.id, id);
  assert.equal(back.partner, 'telecom');
  assert.equal(back.table('own').size, 0);
  const digest = back.digests(['first']);
  back.table('own').add(digest, new Uint8Array(32).fill(9));
  back.save();
  const out = new Uint8Array(32);
  assert.deepEqual(opened(openBoth(a.dir)).table('own').lookup(digest, out), new Uint32Array(0));
  assert.ok(out.every((x) => x === 9));
  assert.notDeepEqual(back.key, a.cache.key);
  assert.deepEqual(back.key, b.key);
  assert.throws(() => PsiCache.create(a.dir, { tables: BOTH, id: 'F'.repeat(32) }), /not 32 hex digits/);
});

test('PsiCache.digests: keyed BLAKE2b-128 as computed directly with sodium, the same from strings and from packed ids, and another per cache', () => {
  const ids = ['customer-1', '', 'zoë €uro', 'x'.repeat(300), 'customer-1'];
  const a = PsiCache.create(fresh(), { tables: ['own'] });
  const b = PsiCache.create(fresh(), { tables: ['own'] });
  const expected = (key: Uint8Array) => {
    const dk = createHmac('sha256', key).update('admm-share psi cache v1: id digest key').digest();
    return Buffer.concat(
      ids.map((id) => {
        const out = Buffer.alloc(16);
        sodium.crypto_generichash(out, Buffer.from(id, 'utf8'), dk);
        return out;
      }),
    );
  };
  const fromStrings = a.digests(ids);
  assert.deepEqual(Buffer.from(fromStrings), expected(a.key));
  assert.deepEqual(a.digests(packIds(ids)), fromStrings);
  assert.deepEqual(Buffer.from(b.digests(ids)), expected(b.key));
  assert.notDeepEqual(b.digests(ids), fromStrings);
  assert.deepEqual(fromStrings.subarray(0, 16), fromStrings.subarray(64, 80));
});

test('PsiCache: a table read back takes new entries (into the room it was read with, and past it) and keeps every entry through another save', async () => {
  const { dir, cache, own } = filled(100, 'room');
  await cache.release();
  const ids = Array.from({ length: 70_000 }, (_, i) => `new-${i}`);
  const digests = cache.digests(ids);
  const points = bytes(seeded('room-points'), ids.length * 32);
  // 100 entries read back leave room for 65,536 more: the first add fits, the second goes past.
  cache.table('own').add(digests.subarray(0, 60_000 * 16), points.subarray(0, 60_000 * 32));
  cache.table('own').add(digests.subarray(60_000 * 16), points.subarray(60_000 * 32));
  await cache.release();
  const again = opened(PsiCache.open(dir, { tables: BOTH, maxAgeDays: 90 }));
  assert.equal(again.table('own').size, 70_100);
  const out = new Uint8Array(ids.length * 32);
  assert.deepEqual(again.table('own').lookup(digests, out), new Uint32Array(0));
  assert.deepEqual(out, points);
  const first = new Uint8Array(100 * 32);
  assert.deepEqual(again.table('own').lookup(own.keys, first), new Uint32Array(0));
  assert.deepEqual(first, own.points);
});

test('cachedPoints: the points sent to a sink a slice at a time are those returned in one array, cached, computed or none cached', async () => {
  const rand = seeded('sink');
  const n = 150_000; // over two slices of 65,536
  const keys = bytes(rand, n * 16);
  const truth = bytes(rand, n * 32);
  // Key i's point is computed as truth's row i.
  const compute = async (missing: Uint32Array) => {
    const out = new Uint8Array(missing.length * 32);
    missing.forEach((i, j) => out.set(truth.subarray(i * 32, i * 32 + 32), j * 32));
    return out;
  };
  for (const cachedShare of [0.9, 0, 1]) {
    const cached = Uint32Array.from({ length: n }, (_, i) => i).filter((i) => (i * 7919) % 1000 < cachedShare * 1000);
    const tables = [new PointCache(16), new PointCache(16)];
    for (const t of tables) t.add(keys, pickRows(truth, 32, cached), cached);
    const whole = await cachedPoints(tables[0], keys, 16, compute);
    const sunk = new Uint8Array(n * 32).fill(0xee);
    const got = await cachedPoints(tables[1], keys, 16, compute, { sink: (from, points) => sunk.set(points, from * 32) });
    assert.deepEqual(whole.points, truth);
    assert.deepEqual(sunk, truth, `${cachedShare} cached`);
    assert.equal(got.points.length, 0);
    assert.equal(got.computed, n - cached.length);
    assert.equal(whole.computed, got.computed);
    assert.equal(tables[1].size, n);
  }
});

test('PsiCache: saves in the background are written one after the other, entries added meanwhile go with the next, and a table released that way reads back whole', async () => {
  const { dir, cache } = filled(100, 'background');
  const more = (k: number) => cache.digests([`more-${k}`]);
  const point = (k: number) => new Uint8Array(32).fill(k);
  cache.table('own').add(more(1), point(1));
  const first = cache.saveInBackground();
  // Added while the first write is under way: not in it (its size was fixed), in the next one.
  cache.table('own').add(more(2), point(2));
  assert.throws(() => cache.save(), /while a write in the background is under way/);
  const second = cache.release();
  assert.equal(await first, 16 + 101 * 48 + 32);
  assert.equal(await second, 16 + 102 * 48 + 32);
  const again = opened(PsiCache.open(dir, { tables: BOTH, maxAgeDays: 90 }));
  assert.equal(again.table('own').size, 102);
  const out = new Uint8Array(32);
  assert.deepEqual(again.table('own').lookup(more(2), out), new Uint32Array(0));
  assert.deepEqual(out, point(2));
  assert.equal(cache.save(), 0, 'nothing left to write, and no write under way');
  assert.equal(cache.table('own').size, 102, 'released: read back from its file');
});

test('PsiCache: a table asked for again while its release is being written is the one in memory, so the next write loses nothing', async () => {
  const { dir, cache } = filled(10, 'release-race');
  const add = (k: number) => cache.table('own').add(cache.digests([`id-${k}`]), new Uint8Array(32).fill(k + 1));
  add(1);
  const first = cache.release();
  // Before that write ends: the table is still the one with entry 1, not its file's older copy.
  add(2);
  const second = cache.release();
  await Promise.all([first, second]);
  const again = opened(PsiCache.open(dir, { tables: BOTH, maxAgeDays: 90 }));
  assert.equal(again.table('own').size, 12);
});
