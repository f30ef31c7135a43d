// The hash onto the group and the field arithmetic under it, against independent code: H(id)
// recomputed with node's SHA-512 and @noble/curves' RFC 9380 Elligator 2 map (with its cofactor
// clearing) and BigInt for the Montgomery u; the typed-array field module against BigInt
// modulo 2^255 - 19, on random elements and on the edges of the representation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { _map_to_curve_elligator2_curve25519 as elligator2 } from '@noble/curves/ed25519.js';
import { hashToPoints, packIds } from '../index.js';
import { LIMBS, edwardsToMontgomery, invert, mul, pack, unpack } from '../psi/field25519.js';
import { seeded } from './support.js';
import { P, fromLe, le, modPow } from './field-bigint.js';

const TAG = 'admm-share psi v2 X25519 ELL2 single-map SHA-512\0';

const inverse = (a: bigint) => modPow(a, P - 2n);

/** x([2] P) from x(P) = u on Curve25519: (u^2 - 1)^2 / (4 u (u^2 + A u + 1)). */
const double = (u: bigint) => ((u * u - 1n) ** 2n % P) * inverse((4n * u * ((u * u + 486662n * u + 1n) % P)) % P) % P;

/** H(id) by RFC 9380's map_to_curve_elligator2_curve25519 (noble), the cofactor 8 cleared by three doublings. */
function reference(id: string): bigint {
  const digest = createHash('sha512').update(TAG, 'latin1').update(id, 'utf8').digest();
  const r = (fromLe(digest.subarray(0, 32)) & ((1n << 255n) - 1n)) % P;
  const { xMn, xMd } = elligator2(r);
  return double(double(double((xMn * inverse(xMd)) % P)));
}

test('H(id) is the u of one Elligator 2 map, cofactor cleared, of SHA-512 of the v2 tag and the id (recomputed with noble)', () => {
  const rand = seeded('hash');
  const ids = ['', 'a', 'id-0', 'Id-0', 'é-ü', '客户-7', '🙂', 'x'.repeat(300), '长'.repeat(700), ...Array.from({ length: 60 }, () => `cust-${Math.floor(rand() * 1e9)}`)];
  for (const points of [hashToPoints(ids), hashToPoints(packIds(ids))])
    ids.forEach((id, i) => assert.equal(fromLe(points.subarray(32 * i, 32 * i + 32)), reference(id), `id ${JSON.stringify(id).slice(0, 20)}`));
  // A long id grows the hashing buffer; the ids after it are hashed from the start of it again.
  assert.equal(fromLe(hashToPoints(['y'.repeat(5000), 'a']).subarray(32)), reference('a'));
});

/** Random field elements, and the ones at the edges: 0, 1, -1, -2, 2^254, 2^255 - 20, 38 (2^256 mod p). */
function elements(n: number): bigint[] {
  const out = [0n, 1n, 2n, P - 1n, P - 2n, 2n ** 254n, 2n ** 255n - 20n, 38n, 19n, 2n ** 128n - 1n];
  while (out.length < n) out.push(fromLe(randomBytes(32)) % P);
  return out;
}

test('field25519: products, inverses and canonical bytes agree with BigInt modulo 2^255 - 19', () => {
  const xs = elements(3000);
  const ys = elements(3000).reverse();
  const a = new Float64Array(LIMBS);
  const b = new Float64Array(LIMBS);
  const c = new Float64Array(LIMBS);
  const out = new Uint8Array(32);
  for (let i = 0; i < xs.length; i++) {
    unpack(a, 0, le(xs[i]), 0);
    unpack(b, 0, le(ys[i]), 0);
    mul(c, 0, a, 0, b, 0);
    mul(c, 0, c, 0, c, 0);
    pack(out, 0, c, 0);
    assert.equal(fromLe(out), (xs[i] * ys[i]) ** 2n % P, `${xs[i]} * ${ys[i]}`);
    if (i < 50 && xs[i] !== 0n) {
      invert(c, 0, a, 0);
      pack(out, 0, c, 0);
      assert.equal(fromLe(out), inverse(xs[i]));
    }
  }
  // Bytes of a value at or above p (as a peer could send them) and limbs out of range: reduced.
  for (const v of [P, P + 1n, 2n ** 255n - 1n]) {
    unpack(a, 0, le(v), 0);
    pack(out, 0, a, 0);
    assert.equal(fromLe(out), v % P);
  }
  a.fill(0xffff);
  pack(out, 0, a, 0);
  assert.equal(fromLe(out), (2n ** 256n - 1n) % P);
  a.fill(0);
  a[0] = -5;
  pack(out, 0, a, 0);
  assert.equal(fromLe(out), P - 5n);
  // The top bit of the bytes is not part of the number (it is an Edwards x's sign).
  const top = le(5n);
  top[31] |= 0x80;
  unpack(a, 0, top, 0);
  pack(out, 0, a, 0);
  assert.equal(fromLe(out), 5n);
});

test('field25519: u = (1 + y) / (1 - y) for a batch, with one inversion, as BigInt computes it point by point', () => {
  const ys = elements(5000).filter((y) => y !== 1n);
  const edwards = new Uint8Array(32 * ys.length);
  ys.forEach((y, i) => {
    edwards.set(le(y), 32 * i);
    if (i % 3 === 0) edwards[32 * i + 31] |= 0x80; // x's sign: no bearing on u
  });
  const out = new Uint8Array(edwards.length);
  edwardsToMontgomery(edwards, out, ys.length);
  ys.forEach((y, i) => assert.equal(fromLe(out.subarray(32 * i, 32 * i + 32)), ((1n + y) * inverse((1n - y + P) % P)) % P, `y = ${y}`));
  edwardsToMontgomery(edwards, out.fill(7), 0);
  assert.equal(out[0], 7, 'no points, nothing written');
});
