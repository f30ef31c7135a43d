// The PSI group operations, checked against an independent implementation of Curve25519
// (@noble/curves) and plain BigInt arithmetic: X25519 agrees with noble's, blinding commutes,
// every hashed id is a point of the prime-order subgroup, and every kind of bad point is
// refused (wrong encoding, small order, the identity, one hidden among thousands of good
// ones), on the calling thread and across worker threads alike. The hash itself and the twist
// are in psi-hash.test.ts and psi-twist.test.ts.
import { test } from 'node:test';
import { randomFillSync } from 'node:crypto';
import assert from 'node:assert/strict';
import { ed25519, x25519 } from '@noble/curves/ed25519.js';
import { type PackedIds, POINT_BYTES, PointError, PsiTeam, blindPoints, checkPoints, hashToPoints, newPsiKey, packIds, pointKeys, randomPermutation, selectIds, sliceIds } from '../index.js';
import { seeded } from './support.js';
import { P, fromLe, le, modPow } from './field-bigint.js';




const ids = (n: number, prefix = 'id-') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

test('X25519 blinding agrees with noble-curves, and blinding twice commutes', () => {
  const points = hashToPoints(ids(20));
  const a = newPsiKey();
  const b = newPsiKey();
  const pa = blindPoints(points, a);
  for (let i = 0; i < 20; i++) {
    const u = points.subarray(32 * i, 32 * i + 32);
    assert.deepEqual(pa.subarray(32 * i, 32 * i + 32), x25519.scalarMult(a, u), `point ${i}`);
  }
  assert.deepEqual(blindPoints(pa, b), blindPoints(blindPoints(points, b), a));
  assert.notDeepEqual(pa, blindPoints(points, b));
});

test('hashed ids: deterministic, distinct, and each a point of the prime-order subgroup (checked with noble)', () => {
  const n = 200;
  const points = hashToPoints(ids(n));
  assert.equal(points.length, n * POINT_BYTES);
  assert.deepEqual(hashToPoints(ids(n)), points);
  assert.equal(new Set(pointKeys(points)).size, n);
  // The id itself, not a truncation or a case fold, is hashed.
  assert.notDeepEqual(hashToPoints(['Id-0']), hashToPoints(['id-0']));
  for (let i = 0; i < n; i++) {
    const u = fromLe(points.subarray(32 * i, 32 * i + 32));
    assert.ok(u < P);
    // Montgomery u to Edwards y = (u - 1) / (u + 1); noble decompresses it (so it is on the
    // curve) and the point has no torsion component (so it is in the prime-order subgroup).
    const y = (((u - 1n + P) % P) * modPow(u + 1n, P - 2n)) % P;
    const point = ed25519.Point.fromBytes(le(y));
    assert.ok(point.isTorsionFree(), `id ${i}: torsion`);
    assert.ok(!point.is0() && !point.isSmallOrder(), `id ${i}: small order`);
  }
});

/** Id i of packed ids, as a string. */
const idAt = (p: PackedIds, i: number) => Buffer.from(p.bytes.subarray(p.offsets[i], p.offsets[i + 1])).toString('utf8');

test('packed ids: each id back as it was (any UTF-8), selections and slices; packed or not, the same points', () => {
  const list = ['a', '', 'é-ü', '客户-7', 'cust 12', '🙂', ...ids(50)];
  const packed = packIds(list);
  assert.equal(packed.length, list.length);
  assert.deepEqual(Array.from({ length: list.length }, (_, i) => idAt(packed, i)), list);
  assert.equal(packed.bytes.length, Buffer.byteLength(list.join(''), 'utf8'));
  const order = [5, 0, 3, 55, 2];
  assert.deepEqual(selectIds(packed, order), packIds(order.map((r) => list[r])));
  assert.deepEqual(Array.from({ length: 5 }, (_, i) => idAt(selectIds(packed, order), i)), order.map((r) => list[r]));
  const slice = sliceIds(packed, 2, 6);
  assert.deepEqual(Array.from({ length: 4 }, (_, i) => idAt(slice, i)), list.slice(2, 6));
  assert.equal(slice.bytes.byteOffset, 0);
  assert.equal(slice.bytes.buffer.byteLength, slice.bytes.length, 'a slice owns its bytes (a worker thread gets only them)');
  assert.throws(() => selectIds(packed, [list.length]), RangeError);
  assert.deepEqual(hashToPoints(packed), hashToPoints(list));
  assert.deepEqual(hashToPoints(selectIds(packed, order)), hashToPoints(order.map((r) => list[r])));
});

test('checkPoints refuses non-canonical encodings, the identity and the points of small order', () => {
  const good = hashToPoints(ids(3));
  const cases: [bigint | Uint8Array, RegExp][] = [
    [0n, /point 1 is the identity \(u = 0\)/],
    [1n, /point 1 is of small order/],
    [325606250916557431795983626356110631294008115727848805560023387167927233504n, /small order/],
    [39382357235489614581723060781553021112529911719440698176882885853963445705823n, /small order/],
    [P - 1n, /small order/],
    [P, /not canonical \(not below 2\^255 - 19\)/],
    [P + 1n, /not canonical/],
    [2n ** 255n - 1n, /not canonical/],
    [(() => {
      const b = good.slice(0, 32);
      b[31] |= 0x80;
      return b;
    })(), /not canonical \(top bit set\)/],
  ];
  for (const [bad, re] of cases) {
    const points = good.slice();
    points.set(typeof bad === 'bigint' ? le(bad) : bad, 32);
    assert.throws(() => checkPoints(points), (err: unknown) => err instanceof PointError && err.index === 1 && re.test(err.message), String(bad));
    // X25519 of a point of small order (or of p or p + 1, which it reads as 0 and 1) is all zero: refused on its own too.
    const u = typeof bad === 'bigint' ? bad % P : -1n;
    if (u >= 0n && u !== 2n ** 255n - 1n - P) assert.throws(() => blindPoints(points.subarray(32, 64), newPsiKey()), PointError, String(bad));
  }
  assert.throws(() => checkPoints(new Uint8Array(33)), /points are 32 bytes each/);
  checkPoints(good);
});

test('checkPoints finds one bad point among 5000 good ones, wherever it is', () => {
  const good = hashToPoints(ids(5000));
  const rand = seeded('bad point');
  for (const where of [0, 2500 + Math.floor(rand() * 2000), 4999])
    for (const [bad, re] of [[P, /not canonical \(not below/], [P - 1n, /small order/]] as const) {
      const points = good.slice();
      points.set(le(bad), 32 * where);
      assert.throws(() => checkPoints(points), (err: unknown) => err instanceof PointError && err.index === where && re.test(err.message));
    }
});

test('randomPermutation: a permutation, and each of the 6 orders of 3 items about equally often', () => {
  const p = randomPermutation(1000);
  assert.deepEqual(Array.from(p).sort((a, b) => a - b), Array.from({ length: 1000 }, (_, i) => i));
  const counts = new Map<string, number>();
  const draws = 30000;
  for (let i = 0; i < draws; i++) {
    const k = Array.from(randomPermutation(3)).join('');
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  assert.equal(counts.size, 6);
  // Each count is Binomial(30000, 1/6): mean 5000, sd 64.5; 6 sd either way fails about once in 1e8 runs.
  for (const [k, c] of counts) assert.ok(Math.abs(c - draws / 6) < 6 * Math.sqrt((draws * 5) / 36), `${k}: ${c}`);
  assert.equal(randomPermutation(0).length, 0);
  assert.deepEqual(randomPermutation(1), Uint32Array.of(0));
});

test('the PSI team gives the calling thread\'s results across worker threads, and a bad point\'s index in the whole set', async () => {
  const list = ids(10000, 'pool-');
  const pool = new PsiTeam({ threads: 2, inlineBelow: 0 });
  const progress: number[] = [];
  const hashed = await pool.hash(list, (done, total) => {
    assert.equal(total, 10000);
    progress.push(done);
  });
  assert.deepEqual(hashed, hashToPoints(list));
  assert.deepEqual(await pool.hash(packIds(list)), hashed, 'packed ids, chunk by chunk');
  assert.equal(progress.at(-1), 10000);
  assert.ok(progress.every((d, i) => i === 0 || d > progress[i - 1]));
  const key = newPsiKey();
  assert.deepEqual(await pool.blind(hashed, key, true), blindPoints(hashed, key));
  const inPlace = hashed.slice();
  assert.equal(await pool.blind(inPlace, key, true, undefined, true), inPlace, 'in place: the same array');
  assert.deepEqual(inPlace, blindPoints(hashed, key));
  const bad = hashed.slice();
  bad.set(le(P + 3n), 32 * 9001);
  await assert.rejects(pool.blind(bad, key, true), (err: unknown) => err instanceof PointError && err.index === 9001);
  await assert.rejects(pool.check(bad), (err: unknown) => err instanceof PointError && err.index === 9001);
  // Without the check (points this side computed itself), X25519 reads the non-canonical u as u - p, as RFC 7748 says.
  const unchecked = await pool.blind(bad, key, false);
  assert.deepEqual(unchecked.subarray(32 * 9001, 32 * 9002), x25519.scalarMult(key, le(3n)));
  // Runs asked for together go one after the other (a failed one does not stop the next).
  const events: string[] = [];
  const note = (name: string) => (done: number, total: number) => events.push(`${name} ${done === total ? 'end' : 'chunk'}`);
  const [a, failed, b] = await Promise.allSettled([pool.hash(list, note('a')), pool.blind(bad, key, true, note('bad')), pool.hash(list.slice(0, 9000), note('b'))]);
  assert.deepEqual(a.status === 'fulfilled' && a.value, hashed);
  assert.equal(failed.status, 'rejected');
  assert.deepEqual(b.status === 'fulfilled' && b.value, hashToPoints(list.slice(0, 9000)));
  const order = events.map((e) => e.split(' ')[0]).filter((name, i, all) => i === 0 || all[i - 1] !== name);
  assert.deepEqual(order, ['a', 'bad', 'b'], events.join(', '));
  // The chain of runs ends in nothing: a finished run's array is not held until the next one.
  assert.equal(await (pool as unknown as { last: Promise<unknown> }).last, undefined);
});

test('the PSI team checks on the calling thread in slices, naming a bad point by its index in the whole set', async () => {
  // Random bytes with the top bit cleared: canonical points but for a chance of 2^-250 (the check reads only the bytes).
  const points = randomFillSync(new Uint8Array(70000 * 32));
  for (let i = 31; i < points.length; i += 32) points[i] &= 0x7f;
  const pool = new PsiTeam({ threads: 2, inlineBelow: 0 });
  const progress: number[] = [];
  await pool.check(points, (done) => progress.push(done));
  assert.deepEqual(progress, [65536, 70000]);
  points.fill(0, 69000 * 32, 69001 * 32);
  await assert.rejects(pool.check(points), (err: unknown) => err instanceof PointError && err.index === 69000 && /identity/.test(err.message));
  await assert.rejects(pool.check(points.subarray(0, 33)), /points are 32 bytes each/);
  // The team goes on after a failed check, and its threads, parked between runs, take the next one.
  assert.deepEqual(await pool.hash(ids(9000)), hashToPoints(ids(9000)));
  assert.deepEqual(await pool.hash(ids(9000, 'again-')), hashToPoints(ids(9000, 'again-')));
});

test("the PSI team's afterChunk runs on the calling thread after each chunk's result is in place, before its progress", async () => {
  const list = ids(10000, 'after-');
  const events: string[] = [];
  const pool = new PsiTeam({ threads: 2, inlineBelow: 0, afterChunk: () => events.push('after') });
  assert.deepEqual(await pool.hash(list, (done) => events.push(`progress ${done}`)), hashToPoints(list));
  // 10,000 ids in chunks of 4096: three chunks, each 'after' then its progress (chunks finish in any order).
  assert.equal(events.length, 6);
  assert.ok(events.every((e, i) => (i % 2 === 0 ? e === 'after' : e.startsWith('progress '))), events.join(', '));
  assert.equal(events.at(-1), 'progress 10000');
  // Without a worker thread (a small set), no chunks: no call.
  events.length = 0;
  await new PsiTeam({ afterChunk: () => events.push('after') }).hash(list.slice(0, 10));
  assert.deepEqual(events, []);
});
