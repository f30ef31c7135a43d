// A point of Curve25519's twist sent by a peer is harmless, so it is no longer refused
// (docs/privacy.md, section 11.4.2); checked here with BigInt arithmetic written for the test: the
// twist's order is 4 times a prime q' of 253 bits; X25519 with any key takes a twist point of
// large order to a point of the twist again (never a curve point, so never a blinded id) of
// order q' (an x-only ladder by q' gives the point at infinity), different for different keys;
// and the twist points of small order are refused like the curve's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PointError, blindPoints, checkPoints, hashToPoints, newPsiKey } from '../index.js';
import { P, fromLe, le, modPow } from './field-bigint.js';

const A = 486662n;
/** The order of the prime-order subgroup of Curve25519 (RFC 7748, section 4.1). */
const Q = 2n ** 252n + 27742317777372353535851937790883648493n;

/** Legendre symbol of u^3 + A u^2 + u: 1 on the curve, p - 1 on the twist, 0 for u = 0. */
const side = (u: bigint) => modPow((((u + A) * u + 1n) * u) % P, (P - 1n) / 2n);

/** Miller-Rabin with the first 12 primes as bases: a composite passes with probability below 4^-12. */
function probablyPrime(n: bigint): boolean {
  let d = n - 1n;
  let s = 0;
  for (; (d & 1n) === 0n; d >>= 1n) s++;
  for (const a of [2n, 3n, 5n, 7n, 11n, 13n, 17n, 19n, 23n, 29n, 31n, 37n]) {
    let x = modPow(a, d, n);
    if (x === 1n || x === n - 1n) continue;
    let composite = true;
    for (let r = 1; r < s && composite; r++) {
      x = (x * x) % n;
      if (x === n - 1n) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

/**
 * [k] of the point with x-coordinate u, by the Montgomery ladder of RFC 7748 (no clamping),
 * as projective [X : Z]; Z = 0 is the point at infinity. The formulas use only A, so they
 * compute on the twist as on the curve.
 */
function ladder(k: bigint, u: bigint): [bigint, bigint] {
  let [x2, z2, x3, z3] = [1n, 0n, u, 1n];
  for (let t = BigInt(k.toString(2).length - 1); t >= 0n; t--) {
    const bit = (k >> t) & 1n;
    if (bit) [x2, x3, z2, z3] = [x3, x2, z3, z2];
    const a = (x2 + z2) % P;
    const aa = (a * a) % P;
    const b = (x2 - z2 + P) % P;
    const bb = (b * b) % P;
    const e = (aa - bb + P) % P;
    const da = (((x3 - z3 + P) % P) * a) % P;
    const cb = (((x3 + z3) % P) * b) % P;
    x3 = (da + cb) ** 2n % P;
    z3 = (u * ((da - cb + P) % P) ** 2n) % P;
    x2 = (aa * bb) % P;
    z2 = (e * ((aa + 121665n * e) % P)) % P;
    if (bit) [x2, x3, z2, z3] = [x3, x2, z3, z2];
  }
  return [x2, z2];
}
const affine = ([x, z]: [bigint, bigint]) => (x * modPow(z, P - 2n)) % P;
/** The clamped scalar X25519 multiplies by (RFC 7748, decodeScalar25519): a multiple of 8. */
const clamp = (key: Uint8Array) => (fromLe(key) & ((1n << 254n) - 8n)) | (1n << 254n);

test("Curve25519's twist has order 4 q' with q' a prime of 253 bits (the premise of twist security)", () => {
  // #E = 8 Q = p + 1 - t, so the twist has p + 1 + t = 2 (p + 1) - 8 Q points.
  const twist = 2n * (P + 1n) - 8n * Q;
  assert.equal(twist % 4n, 0n);
  const q2 = twist / 4n;
  assert.equal(q2.toString(2).length, 253);
  assert.ok(probablyPrime(q2) && probablyPrime(Q));
  assert.ok(!probablyPrime(q2 + 2n), 'the test can tell a composite');
});

test('a twist point of large order: blinded to a point of the twist of prime order, another for each key, never a blinded id; checkPoints lets it through', () => {
  const q2 = (2n * (P + 1n) - 8n * Q) / 4n;
  // u = 2 is on the twist (2^3 + 486662 * 4 + 2 is not a square mod p), and not of order 1, 2 or 4.
  const u = 2n;
  assert.equal(side(u), P - 1n);
  assert.notEqual(ladder(4n, u)[1], 0n);
  const point = le(u);
  checkPoints(point);
  const keys = [newPsiKey(), newPsiKey(), newPsiKey()];
  const blinded = keys.map((k) => blindPoints(point, k));
  const ids = hashToPoints(Array.from({ length: 50 }, (_, i) => `id-${i}`));
  const ours = new Set(keys.flatMap((k) => Array.from({ length: 50 }, (_, i) => fromLe(blindPoints(ids, k).subarray(32 * i, 32 * i + 32)))));
  blinded.forEach((b, i) => {
    const w = fromLe(b);
    // libsodium's result is the test's own ladder by the clamped key, which is a multiple of 8.
    assert.equal(w, affine(ladder(clamp(keys[i]), u)), `key ${i}`);
    assert.equal(side(w), P - 1n, `key ${i}: on the twist`);
    assert.equal(ladder(q2, w)[1], 0n, `key ${i}: of order q'`);
    assert.ok(w !== 0n && !ours.has(w));
  });
  assert.equal(new Set(blinded.map(fromLe)).size, keys.length);
  // Every blinded id is on the curve: the two sets of u-coordinates are disjoint.
  for (const w of ours) assert.equal(side(w), 1n);
  // Blinding still commutes on the twist, so a twist point behaves as any id that matches nothing.
  assert.deepEqual(blindPoints(blinded[0], keys[1]), blindPoints(blinded[1], keys[0]));
});

test("the twist's points of small order (u = 0 and the one of 1 and p - 1 on the twist) are refused, as the curve's are", () => {
  const onTwist = side(1n) === P - 1n ? 1n : P - 1n;
  assert.equal(side(onTwist), P - 1n);
  assert.equal(side(onTwist === 1n ? P - 1n : 1n), 1n, 'the other is on the curve');
  for (const u of [0n, onTwist]) {
    assert.equal(ladder(4n, u)[1], 0n, `${u} is of order dividing 4`);
    const points = hashToPoints(['a', 'b', 'c']);
    points.set(le(u), 32);
    assert.throws(() => checkPoints(points), (err: unknown) => err instanceof PointError && err.index === 1 && /identity|small order/.test(err.message));
    // X25519 of it is all zero whatever the key: refused by blindPoints too.
    assert.throws(() => blindPoints(le(u), newPsiKey()), PointError);
  }
});
