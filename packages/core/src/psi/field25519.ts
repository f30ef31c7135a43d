/**
 * Arithmetic modulo p = 2^255 - 19 without BigInt, for the one place the PSI's per-id path needs
 * it: the Edwards y of a hashed id to its Montgomery u = (1 + y) / (1 - y) (RFC 7748, section
 * 4.1). BigInt allocates a number per operation and cost more than the curve arithmetic it
 * fed; here an element is 16 limbs of 16 bits in a Float64Array, value = sum of limb i times
 * 2^(16 i). A product of two limbs is below 2^34 and a column of 16 such sums, folded once by
 * 38 (2^256 = 38 mod p), stays below 2^53: every operation is exact in doubles. Limbs may be
 * negative or above 2^16 between operations; `pack` alone gives the canonical bytes.
 */

export const LIMBS = 16;
const RADIX = 65536;
const INV_RADIX = 1 / RADIX;

/** One pass of carries: each limb to [0, 2^16) but the first, which takes 38 times the top carry. */
function carry(o: Float64Array, at: number): void {
  for (let i = 0; i < LIMBS - 1; i++) {
    const c = Math.floor(o[at + i] * INV_RADIX);
    o[at + i] -= c * RADIX;
    o[at + i + 1] += c;
  }
  const c = Math.floor(o[at + 15] * INV_RADIX);
  o[at + 15] -= c * RADIX;
  o[at] += 38 * c;
}

/** Scratch of one product: 31 columns. Module-level, as each thread runs one call at a time. */
const cols = new Float64Array(2 * LIMBS - 1);

/** o = a * b mod p (o may be a or b); each element at its offset in its array. */
export function mul(o: Float64Array, oo: number, a: Float64Array, ao: number, b: Float64Array, bo: number): void {
  cols.fill(0);
  for (let i = 0; i < LIMBS; i++) {
    const ai = a[ao + i];
    for (let j = 0; j < LIMBS; j++) cols[i + j] += ai * b[bo + j];
  }
  for (let i = 0; i < LIMBS - 1; i++) o[oo + i] = cols[i] + 38 * cols[i + LIMBS];
  o[oo + 15] = cols[15];
  carry(o, oo);
  carry(o, oo);
}

/** The limbs of the 255-bit little-endian number at b[off..off+32), its top bit ignored (below 2^255, not yet reduced). */
export function unpack(o: Float64Array, oo: number, b: Uint8Array, off: number): void {
  for (let i = 0; i < LIMBS; i++) o[oo + i] = b[off + 2 * i] | (b[off + 2 * i + 1] << 8);
  o[oo + 15] %= 32768;
}

const packed = new Float64Array(LIMBS);
const minusP = new Float64Array(LIMBS);

/** The canonical 32 bytes (below p, little-endian) of the element at a[ao..]. */
export function pack(out: Uint8Array, off: number, a: Float64Array, ao: number): void {
  for (let i = 0; i < LIMBS; i++) packed[i] = a[ao + i];
  // Each pass leaves limbs 1..15 in [0, 2^16); the first takes 38 times the top carry, which
  // after a pass or two is 0. Then the value is below 2^256, at most two subtractions of p
  // from its residue.
  do carry(packed, 0);
  while (packed[0] < 0 || packed[0] >= RADIX);
  for (let round = 0; round < 2; round++) {
    // minusP = packed - p, limb by limb with borrows; kept if it did not go below zero.
    let borrow = 0;
    for (let i = 0; i < LIMBS; i++) {
      const limb = i === 0 ? 0xffed : i === 15 ? 0x7fff : 0xffff;
      const d = packed[i] - limb - borrow;
      borrow = d < 0 ? 1 : 0;
      minusP[i] = d + borrow * RADIX;
    }
    if (borrow === 0) packed.set(minusP);
  }
  for (let i = 0; i < LIMBS; i++) {
    out[off + 2 * i] = packed[i] & 0xff;
    out[off + 2 * i + 1] = packed[i] >>> 8;
  }
}

const base = new Float64Array(LIMBS);

/** o = a^(p - 2) = 1 / a mod p (0 for 0): square-and-multiply over the bits of 2^255 - 21. */
export function invert(o: Float64Array, oo: number, a: Float64Array, ao: number): void {
  for (let i = 0; i < LIMBS; i++) base[i] = a[ao + i];
  const r = packed; // free between pack calls
  r.set(base);
  // p - 2 = 2^255 - 21: bits 254..0 are all 1 except bits 2 and 4.
  for (let bit = 253; bit >= 0; bit--) {
    mul(r, 0, r, 0, r, 0);
    if (bit !== 2 && bit !== 4) mul(r, 0, r, 0, base, 0);
  }
  for (let i = 0; i < LIMBS; i++) o[oo + i] = r[i];
}

/**
 * u = (1 + y) / (1 - y) for each of the n compressed Edwards points at edwards[32 i..] (y
 * little-endian, the top bit the sign of x, which u does not depend on), written canonically
 * at out[32 i..]. One inversion for all n (Montgomery's trick): the running products of the
 * denominators, one inversion of the last, and two multiplications back per point. No y may
 * be 1 (the identity, whose u is the point at infinity): the caller refuses it first.
 */
export function edwardsToMontgomery(edwards: Uint8Array, out: Uint8Array, n: number): void {
  const prefix = new Float64Array(LIMBS * (n + 1));
  const den = new Float64Array(LIMBS * n);
  const y = new Float64Array(LIMBS);
  prefix[0] = 1;
  for (let i = 0; i < n; i++) {
    unpack(y, 0, edwards, 32 * i);
    for (let k = 0; k < LIMBS; k++) den[LIMBS * i + k] = -y[k];
    den[LIMBS * i] += 1;
    mul(prefix, LIMBS * (i + 1), prefix, LIMBS * i, den, LIMBS * i);
  }
  // inv = 1 / (den_0 ... den_{i}) as i goes down; the u of point i is (1 + y_i) inv prefix_i.
  const inv = new Float64Array(LIMBS);
  invert(inv, 0, prefix, LIMBS * n);
  const t = new Float64Array(LIMBS);
  for (let i = n - 1; i >= 0; i--) {
    mul(t, 0, inv, 0, prefix, LIMBS * i);
    mul(inv, 0, inv, 0, den, LIMBS * i);
    unpack(y, 0, edwards, 32 * i);
    y[0] += 1;
    mul(t, 0, t, 0, y, 0);
    pack(out, 32 * i, t, 0);
  }
}
