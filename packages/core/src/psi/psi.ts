/**
 * The group operations of ECDH private set intersection (docs/privacy.md, section 11), over
 * Curve25519 as X25519 (RFC 7748), with libsodium (sodium-native) doing the curve arithmetic.
 *
 * An id becomes a point H(id): the first 32 bytes of SHA-512 of a domain tag and the id,
 * mapped onto edwards25519 by one Elligator 2 map with the cofactor cleared (libsodium's
 * from_uniform: a point of the prime-order subgroup), then written as its Montgomery
 * u-coordinate. One map, not RFC 9380's two added, is a weak encoding, and that is all the
 * proof needs (docs/privacy.md, section 11.4.1). A party blinds a point with its secret key k:
 * X25519(k, u) = u([k'] P) with k' the clamped key, a multiple of 8. Blinding commutes,
 * X25519(a, X25519(b, u)) = X25519(b, X25519(a, u)), which is what lets two sides compare ids
 * that neither can test on its own: without a key, H(id) blinded by it cannot be computed
 * (decisional Diffie-Hellman).
 *
 * Every point received from a peer is checked on its bytes before it is used: 32 bytes,
 * canonical (below p = 2^255 - 19, top bit clear), and not one of the points of small order
 * (the identity among them). A point of the twist is not refused: X25519 with a clamped key
 * takes it to the twist's subgroup of prime order about 2^253, where it never equals a
 * blinded id and reveals nothing of the key (twist security; docs/privacy.md, section 11.4.2).
 */
import { createCipheriv, randomFillSync } from 'node:crypto';
import sodium from 'sodium-native';
import type { PackedIds } from '../io/packed-ids.js';
import { edwardsToMontgomery } from './field25519.js';

/** Bytes of a point (its u-coordinate, little-endian) and of a key. */
export const POINT_BYTES = 32;
/**
 * Domain tag of the hash onto the curve: ids hashed for another purpose never collide with
 * these, nor do the points of v1 (two maps added), which a v2 peer must never match.
 */
const DST = Buffer.from('admm-share psi v2 X25519 ELL2 single-map SHA-512\0', 'latin1');

const hex = (h: string) => Uint8Array.from(Buffer.from(h, 'hex'));

/**
 * The canonical u-coordinates of the points of order 1, 2, 4 and 8 on Curve25519 and its twist
 * (u = 0 is the identity in x-only form and the point of order 2; 1 and p - 1 are of order 4,
 * one on the curve and one on the twist; the two of order 8 are on the curve, the twist having
 * only 4-torsion): libsodium's list, which refuses them because X25519 of them is all zero
 * whatever the key.
 */
const SMALL_ORDER: readonly [Uint8Array, string][] = [
  // Their first bytes (0, 1, 0xe0, 0x5f, 0xec) are tested before the whole point, in checkPoints.
  [new Uint8Array(32), 'is the identity (u = 0)'],
  [hex('0100000000000000000000000000000000000000000000000000000000000000'), 'is of small order'],
  [hex('e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800'), 'is of small order'],
  [hex('5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157'), 'is of small order'],
  [hex('ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'), 'is of small order'],
];

/** A point a peer sent that is not one: where it is and why. */
export class PointError extends Error {
  override readonly name = 'PointError';
  constructor(
    readonly index: number,
    readonly reason: string,
  ) {
    super(`point ${index} ${reason}`);
  }
}

/** A new secret key: 32 bytes from the OS CSPRNG (X25519 clamps it). */
export function newPsiKey(): Uint8Array {
  return randomFillSync(new Uint8Array(POINT_BYTES));
}

/** DST || id, written after the tag in a buffer kept between calls (grown for a long id). */
let message = Buffer.alloc(DST.length + 256);
DST.copy(message);

function withTag(id: string | Uint8Array): Buffer {
  const room = typeof id === 'string' ? 3 * id.length : id.length;
  if (DST.length + room > message.length) {
    message = Buffer.alloc(DST.length + room);
    DST.copy(message);
  }
  const len = typeof id === 'string' ? message.write(id, DST.length, 'utf8') : (message.set(id, DST.length), id.length);
  return message.subarray(0, DST.length + len);
}

/** H(id) for each id, as u-coordinates (POINT_BYTES each, in the order of `ids`). */
export function hashToPoints(ids: readonly string[] | PackedIds): Uint8Array {
  const n = ids.length;
  const packed = Array.isArray(ids) ? undefined : (ids as PackedIds);
  const digest = new Uint8Array(64);
  const uniform = digest.subarray(0, 32);
  const edwards = new Uint8Array(n * POINT_BYTES);
  for (let i = 0; i < n; i++) {
    const id = packed ? packed.bytes.subarray(packed.offsets[i], packed.offsets[i + 1]) : (ids as readonly string[])[i];
    sodium.crypto_hash_sha512(digest, withTag(id));
    const at = i * POINT_BYTES;
    sodium.crypto_core_ed25519_from_uniform(edwards.subarray(at, at + POINT_BYTES), uniform);
    // y = 1 (the identity, u at infinity) only for the few dozen of the 2^256 strings whose
    // map is a point of order dividing 8: probability below 2^-250 per id.
    if (edwards[at] === 1 && isZeroFrom(edwards, at + 1, at + POINT_BYTES)) throw new Error(`id ${i} hashed to the identity`);
  }
  const out = new Uint8Array(n * POINT_BYTES);
  edwardsToMontgomery(edwards, out, n);
  return out;
}

/** Bytes [from, to) are all 0 but for the top bit of the last (the sign of an Edwards x). */
function isZeroFrom(b: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to - 1; i++) if (b[i] !== 0) return false;
  return (b[to - 1] & 0x7f) === 0;
}

/** The 32 bytes at b[off..] equal `e`. */
function equalAt(b: Uint8Array, off: number, e: Uint8Array): boolean {
  for (let i = 0; i < POINT_BYTES; i++) if (b[off + i] !== e[i]) return false;
  return true;
}

/** The canonical u at b[off..] (top bit clear) is p or above: 0x7fff...ff ed to ff. */
function notBelowP(b: Uint8Array, off: number): boolean {
  if (b[off + 31] !== 0x7f || b[off] < 0xed) return false;
  for (let i = 1; i < 31; i++) if (b[off + i] !== 0xff) return false;
  return true;
}

/**
 * Throws a PointError for the first point that is not a valid element: wrong encoding or small
 * order, decided on the bytes (see the module comment for why the twist is not tested).
 */
export function checkPoints(points: Uint8Array): void {
  if (points.length % POINT_BYTES !== 0) throw new PointError(0, `of ${points.length % POINT_BYTES} bytes: points are ${POINT_BYTES} bytes each`);
  const n = points.length / POINT_BYTES;
  for (let i = 0; i < n; i++) {
    const off = i * POINT_BYTES;
    if (points[off + 31] & 0x80) throw new PointError(i, 'is not canonical (top bit set)');
    if (notBelowP(points, off)) throw new PointError(i, 'is not canonical (not below 2^255 - 19)');
    const first = points[off];
    if (first <= 1 || first === 0xe0 || first === 0x5f || first === 0xec)
      for (const [e, reason] of SMALL_ORDER) if (equalAt(points, off, e)) throw new PointError(i, reason);
  }
}

/** X25519(key, u) for every point, in order; a point of small order throws a PointError. */
export function blindPoints(points: Uint8Array, key: Uint8Array): Uint8Array {
  const out = new Uint8Array(points.length);
  for (let off = 0; off < points.length; off += POINT_BYTES) {
    try {
      sodium.crypto_scalarmult(out.subarray(off, off + POINT_BYTES), key, points.subarray(off, off + POINT_BYTES));
    } catch {
      throw new PointError(off / POINT_BYTES, 'is of small order');
    }
  }
  return out;
}

/**
 * A uniformly random permutation of 0..n-1 (Fisher-Yates, unbiased by rejection) from `fill`:
 * the OS CSPRNG by default, or a keyed stream (keyedStream) where the same secret must give the
 * same order again.
 */
export function randomPermutation(n: number, fill: (buf: Uint32Array) => void = randomFillSync): Uint32Array {
  const perm = new Uint32Array(n);
  for (let i = 0; i < n; i++) perm[i] = i;
  const buf = new Uint32Array(4096);
  let k = buf.length;
  const next = () => {
    if (k === buf.length) {
      fill(buf);
      k = 0;
    }
    return buf[k++];
  };
  for (let i = n - 1; i > 0; i--) {
    const range = i + 1;
    const limit = 2 ** 32 - (2 ** 32 % range);
    let r = next();
    while (r >= limit) r = next();
    const j = r % range;
    const t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  return perm;
}

/**
 * A pseudorandom stream keyed by a 32-byte secret (AES-256-CTR over zeros): as unpredictable as
 * the CSPRNG to whoever does not hold the secret, and the same again for whoever does.
 */
export function keyedStream(secret: Uint8Array): (buf: Uint32Array) => void {
  const cipher = createCipheriv('aes-256-ctr', secret, Buffer.alloc(16));
  return (buf) => {
    const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
    bytes.fill(0);
    bytes.set(cipher.update(bytes));
  };
}

/** The points as map keys (latin1 strings of 32 characters). */
export function pointKeys(points: Uint8Array): string[] {
  const b = Buffer.from(points.buffer, points.byteOffset, points.byteLength);
  const out = new Array<string>(points.length / POINT_BYTES);
  for (let i = 0; i < out.length; i++) out[i] = b.toString('latin1', i * POINT_BYTES, (i + 1) * POINT_BYTES);
  return out;
}
