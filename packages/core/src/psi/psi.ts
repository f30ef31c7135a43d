/**
 * The group operations of ECDH private set intersection (docs/privacy.md, section 11), over
 * Curve25519 as X25519 (RFC 7748), with libsodium (sodium-native) doing the curve arithmetic.
 *
 * An id becomes a point H(id): SHA-512 of a domain tag and the id, whose two halves are each
 * mapped onto edwards25519 by Elligator 2 with the cofactor cleared and the two points added
 * (the random-oracle construction of RFC 9380, section 3), then written as its Montgomery
 * u-coordinate. A party blinds a point with its secret key k: X25519(k, u) = u([k'] P) with k'
 * the clamped key, a multiple of 8. Blinding commutes, X25519(a, X25519(b, u)) =
 * X25519(b, X25519(a, u)), which is what lets two sides compare ids that neither can test on
 * its own: without a key, H(id) blinded by it cannot be computed (decisional Diffie-Hellman).
 *
 * Every point received from a peer is checked before it is used: 32 bytes, canonical (below
 * p = 2^255 - 19, top bit clear), not one of the points of small order (the identity among
 * them), and on the curve rather than its twist: f(u) = u^3 + A u^2 + u must be a square.
 * The Jacobi symbol (f / p), by the binary algorithm, decides it (about 7 µs here, twenty
 * times less than Euler's criterion f^((p-1)/2) in BigInt). A few points are tested one by
 * one; many in a batch: the symbol of the product of f(u) over a random subset of the points
 * is -1 with probability 1/2 if any point is off the curve, so 64 random subsets miss one
 * with probability 2^-64, and a failing batch is searched point by point for the culprit.
 */
import { createCipheriv, createHash, randomFillSync } from 'node:crypto';
import sodium from 'sodium-native';
import type { PackedIds } from '../io/packed-ids.js';

/** Bytes of a point (its u-coordinate, little-endian) and of a key. */
export const POINT_BYTES = 32;
/** Domain tag of the hash onto the curve: ids hashed for another purpose never collide with these. */
const DST = 'admm-share psi v1 X25519 ELL2 SHA-512\0';

const P = (1n << 255n) - 19n;
const A = 486662n;
const MASK64 = (1n << 64n) - 1n;

/**
 * u-coordinates of the points of order 1, 2, 4 and 8 on Curve25519 and its twist (in x-only
 * form the identity is u = 0): libsodium's list, which refuses them because X25519 of them is
 * all zero whatever the key.
 */
const SMALL_ORDER = new Set([
  0n,
  1n,
  325606250916557431795983626356110631294008115727848805560023387167927233504n,
  39382357235489614581723060781553021112529911719440698176882885853963445705823n,
  P - 1n,
]);

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

function readU(b: Uint8Array, off: number): bigint {
  const v = new DataView(b.buffer, b.byteOffset + off, POINT_BYTES);
  return (v.getBigUint64(24, true) << 192n) | (v.getBigUint64(16, true) << 128n) | (v.getBigUint64(8, true) << 64n) | v.getBigUint64(0, true);
}

function writeU(b: Uint8Array, off: number, u: bigint): void {
  const v = new DataView(b.buffer, b.byteOffset + off, POINT_BYTES);
  for (let j = 0; j < 4; j++) v.setBigUint64(8 * j, (u >> BigInt(64 * j)) & MASK64, true);
}

function modPow(b: bigint, e: bigint): bigint {
  let r = 1n;
  b %= P;
  while (e > 0n) {
    if (e & 1n) r = (r * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return r;
}

/** H(id) for each id, as u-coordinates (POINT_BYTES each, in the order of `ids`). */
export function hashToPoints(ids: readonly string[] | PackedIds): Uint8Array {
  const n = ids.length;
  const packed = Array.isArray(ids) ? undefined : (ids as PackedIds);
  const edwards = new Uint8Array(POINT_BYTES);
  const second = new Uint8Array(POINT_BYTES);
  // Edwards y to Montgomery u = (1 + y) / (1 - y), with one inversion for the whole batch.
  const num = new Array<bigint>(n);
  const den = new Array<bigint>(n);
  const prefix = new Array<bigint>(n);
  let acc = 1n;
  for (let i = 0; i < n; i++) {
    const id = packed ? packed.bytes.subarray(packed.offsets[i], packed.offsets[i + 1]) : (ids as readonly string[])[i];
    const h = createHash('sha512').update(DST).update(id).digest();
    sodium.crypto_core_ed25519_from_uniform(edwards, h.subarray(0, 32));
    sodium.crypto_core_ed25519_from_uniform(second, h.subarray(32, 64));
    sodium.crypto_core_ed25519_add(edwards, edwards, second);
    const y = readU(edwards, 0) & ((1n << 255n) - 1n);
    num[i] = (1n + y) % P;
    den[i] = (1n - y + P) % P;
    // y = 1 is the identity, which the sum of two random points is with probability 2^-252.
    if (den[i] === 0n) throw new Error(`id ${i} hashed to the identity`);
    prefix[i] = acc;
    acc = (acc * den[i]) % P;
  }
  let inv = modPow(acc, P - 2n);
  const out = new Uint8Array(n * POINT_BYTES);
  for (let i = n - 1; i >= 0; i--) {
    writeU(out, i * POINT_BYTES, (((num[i] * inv) % P) * prefix[i]) % P);
    inv = (inv * den[i]) % P;
  }
  return out;
}

/**
 * Throws a PointError for the first point that is not a valid element: wrong encoding, small
 * order, or not on Curve25519 (see the module comment).
 */
export function checkPoints(points: Uint8Array): void {
  if (points.length % POINT_BYTES !== 0) throw new PointError(0, `of ${points.length % POINT_BYTES} bytes: points are ${POINT_BYTES} bytes each`);
  const n = points.length / POINT_BYTES;
  const f = new Array<bigint>(n);
  for (let i = 0; i < n; i++) {
    if (points[i * POINT_BYTES + 31] & 0x80) throw new PointError(i, 'is not canonical (top bit set)');
    const u = readU(points, i * POINT_BYTES);
    if (u >= P) throw new PointError(i, 'is not canonical (not below 2^255 - 19)');
    if (SMALL_ORDER.has(u)) throw new PointError(i, u === 0n ? 'is the identity (u = 0)' : 'is of small order');
    f[i] = (((((u + A) * u) % P) + 1n) * u) % P;
  }
  const onCurve = (lo: number, hi: number) => {
    for (let i = lo; i < hi; i++) if (jacobi(f[i]) !== 1) throw new PointError(i, 'is not on Curve25519 (a point of its twist)');
  };
  if (n <= BATCH_FROM) return onCurve(0, n);
  const bits = new Uint8Array((n + 7) >> 3);
  for (let pass = 0; pass < 64; pass++) {
    randomFillSync(bits);
    let prod = 1n;
    for (let i = 0; i < n; i++) if (bits[i >> 3] & (1 << (i & 7))) prod = (prod * f[i]) % P;
    if (jacobi(prod) !== 1) onCurve(0, n);
  }
}

/** Points checked one by one up to this many (a batch's 64 subset products cost more below). */
const BATCH_FROM = 256;

/**
 * The Jacobi symbol (a / P), which for the prime P is the Legendre symbol: 1 for a non-zero
 * square, -1 for a non-square, 0 for 0 (binary algorithm: halvings and reciprocity).
 */
export function jacobi(a: bigint): number {
  let n = P;
  a %= n;
  let t = 1;
  while (a !== 0n) {
    while ((a & 1n) === 0n) {
      a >>= 1n;
      const r = n & 7n;
      if (r === 3n || r === 5n) t = -t;
    }
    const swap = a;
    a = n;
    n = swap;
    if ((a & 3n) === 3n && (n & 3n) === 3n) t = -t;
    a %= n;
  }
  return n === 1n ? t : 0;
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
