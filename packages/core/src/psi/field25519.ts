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

/** o = a * b mod p (o may be a or b); each element at its offset in its array. Unrolled: a loop with a scratch array took 2.5 times as long. */
export function mul(o: Float64Array, oo: number, a: Float64Array, ao: number, b: Float64Array, bo: number): void {
  const b0 = b[bo + 0]; const b1 = b[bo + 1]; const b2 = b[bo + 2]; const b3 = b[bo + 3]; const b4 = b[bo + 4]; const b5 = b[bo + 5]; const b6 = b[bo + 6]; const b7 = b[bo + 7];
  const b8 = b[bo + 8]; const b9 = b[bo + 9]; const b10 = b[bo + 10]; const b11 = b[bo + 11]; const b12 = b[bo + 12]; const b13 = b[bo + 13]; const b14 = b[bo + 14]; const b15 = b[bo + 15];
  let t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0, t5 = 0, t6 = 0, t7 = 0, t8 = 0, t9 = 0, t10 = 0, t11 = 0, t12 = 0, t13 = 0, t14 = 0, t15 = 0;
  let t16 = 0, t17 = 0, t18 = 0, t19 = 0, t20 = 0, t21 = 0, t22 = 0, t23 = 0, t24 = 0, t25 = 0, t26 = 0, t27 = 0, t28 = 0, t29 = 0, t30 = 0;
  let v: number;
  v = a[ao + 0];
  t0 += v * b0; t1 += v * b1; t2 += v * b2; t3 += v * b3; t4 += v * b4; t5 += v * b5; t6 += v * b6; t7 += v * b7;
  t8 += v * b8; t9 += v * b9; t10 += v * b10; t11 += v * b11; t12 += v * b12; t13 += v * b13; t14 += v * b14; t15 += v * b15;
  v = a[ao + 1];
  t1 += v * b0; t2 += v * b1; t3 += v * b2; t4 += v * b3; t5 += v * b4; t6 += v * b5; t7 += v * b6; t8 += v * b7;
  t9 += v * b8; t10 += v * b9; t11 += v * b10; t12 += v * b11; t13 += v * b12; t14 += v * b13; t15 += v * b14; t16 += v * b15;
  v = a[ao + 2];
  t2 += v * b0; t3 += v * b1; t4 += v * b2; t5 += v * b3; t6 += v * b4; t7 += v * b5; t8 += v * b6; t9 += v * b7;
  t10 += v * b8; t11 += v * b9; t12 += v * b10; t13 += v * b11; t14 += v * b12; t15 += v * b13; t16 += v * b14; t17 += v * b15;
  v = a[ao + 3];
  t3 += v * b0; t4 += v * b1; t5 += v * b2; t6 += v * b3; t7 += v * b4; t8 += v * b5; t9 += v * b6; t10 += v * b7;
  t11 += v * b8; t12 += v * b9; t13 += v * b10; t14 += v * b11; t15 += v * b12; t16 += v * b13; t17 += v * b14; t18 += v * b15;
  v = a[ao + 4];
  t4 += v * b0; t5 += v * b1; t6 += v * b2; t7 += v * b3; t8 += v * b4; t9 += v * b5; t10 += v * b6; t11 += v * b7;
  t12 += v * b8; t13 += v * b9; t14 += v * b10; t15 += v * b11; t16 += v * b12; t17 += v * b13; t18 += v * b14; t19 += v * b15;
  v = a[ao + 5];
  t5 += v * b0; t6 += v * b1; t7 += v * b2; t8 += v * b3; t9 += v * b4; t10 += v * b5; t11 += v * b6; t12 += v * b7;
  t13 += v * b8; t14 += v * b9; t15 += v * b10; t16 += v * b11; t17 += v * b12; t18 += v * b13; t19 += v * b14; t20 += v * b15;
  v = a[ao + 6];
  t6 += v * b0; t7 += v * b1; t8 += v * b2; t9 += v * b3; t10 += v * b4; t11 += v * b5; t12 += v * b6; t13 += v * b7;
  t14 += v * b8; t15 += v * b9; t16 += v * b10; t17 += v * b11; t18 += v * b12; t19 += v * b13; t20 += v * b14; t21 += v * b15;
  v = a[ao + 7];
  t7 += v * b0; t8 += v * b1; t9 += v * b2; t10 += v * b3; t11 += v * b4; t12 += v * b5; t13 += v * b6; t14 += v * b7;
  t15 += v * b8; t16 += v * b9; t17 += v * b10; t18 += v * b11; t19 += v * b12; t20 += v * b13; t21 += v * b14; t22 += v * b15;
  v = a[ao + 8];
  t8 += v * b0; t9 += v * b1; t10 += v * b2; t11 += v * b3; t12 += v * b4; t13 += v * b5; t14 += v * b6; t15 += v * b7;
  t16 += v * b8; t17 += v * b9; t18 += v * b10; t19 += v * b11; t20 += v * b12; t21 += v * b13; t22 += v * b14; t23 += v * b15;
  v = a[ao + 9];
  t9 += v * b0; t10 += v * b1; t11 += v * b2; t12 += v * b3; t13 += v * b4; t14 += v * b5; t15 += v * b6; t16 += v * b7;
  t17 += v * b8; t18 += v * b9; t19 += v * b10; t20 += v * b11; t21 += v * b12; t22 += v * b13; t23 += v * b14; t24 += v * b15;
  v = a[ao + 10];
  t10 += v * b0; t11 += v * b1; t12 += v * b2; t13 += v * b3; t14 += v * b4; t15 += v * b5; t16 += v * b6; t17 += v * b7;
  t18 += v * b8; t19 += v * b9; t20 += v * b10; t21 += v * b11; t22 += v * b12; t23 += v * b13; t24 += v * b14; t25 += v * b15;
  v = a[ao + 11];
  t11 += v * b0; t12 += v * b1; t13 += v * b2; t14 += v * b3; t15 += v * b4; t16 += v * b5; t17 += v * b6; t18 += v * b7;
  t19 += v * b8; t20 += v * b9; t21 += v * b10; t22 += v * b11; t23 += v * b12; t24 += v * b13; t25 += v * b14; t26 += v * b15;
  v = a[ao + 12];
  t12 += v * b0; t13 += v * b1; t14 += v * b2; t15 += v * b3; t16 += v * b4; t17 += v * b5; t18 += v * b6; t19 += v * b7;
  t20 += v * b8; t21 += v * b9; t22 += v * b10; t23 += v * b11; t24 += v * b12; t25 += v * b13; t26 += v * b14; t27 += v * b15;
  v = a[ao + 13];
  t13 += v * b0; t14 += v * b1; t15 += v * b2; t16 += v * b3; t17 += v * b4; t18 += v * b5; t19 += v * b6; t20 += v * b7;
  t21 += v * b8; t22 += v * b9; t23 += v * b10; t24 += v * b11; t25 += v * b12; t26 += v * b13; t27 += v * b14; t28 += v * b15;
  v = a[ao + 14];
  t14 += v * b0; t15 += v * b1; t16 += v * b2; t17 += v * b3; t18 += v * b4; t19 += v * b5; t20 += v * b6; t21 += v * b7;
  t22 += v * b8; t23 += v * b9; t24 += v * b10; t25 += v * b11; t26 += v * b12; t27 += v * b13; t28 += v * b14; t29 += v * b15;
  v = a[ao + 15];
  t15 += v * b0; t16 += v * b1; t17 += v * b2; t18 += v * b3; t19 += v * b4; t20 += v * b5; t21 += v * b6; t22 += v * b7;
  t23 += v * b8; t24 += v * b9; t25 += v * b10; t26 += v * b11; t27 += v * b12; t28 += v * b13; t29 += v * b14; t30 += v * b15;
  // 2^256 = 38 mod p: the columns above 15 fold onto the low ones.
  t0 += 38 * t16; t1 += 38 * t17; t2 += 38 * t18; t3 += 38 * t19; t4 += 38 * t20; t5 += 38 * t21; t6 += 38 * t22; t7 += 38 * t23;
  t8 += 38 * t24; t9 += 38 * t25; t10 += 38 * t26; t11 += 38 * t27; t12 += 38 * t28; t13 += 38 * t29; t14 += 38 * t30;
  let c: number;
  c = Math.floor(t0 * INV_RADIX); t0 -= c * RADIX; t1 += c;
  c = Math.floor(t1 * INV_RADIX); t1 -= c * RADIX; t2 += c;
  c = Math.floor(t2 * INV_RADIX); t2 -= c * RADIX; t3 += c;
  c = Math.floor(t3 * INV_RADIX); t3 -= c * RADIX; t4 += c;
  c = Math.floor(t4 * INV_RADIX); t4 -= c * RADIX; t5 += c;
  c = Math.floor(t5 * INV_RADIX); t5 -= c * RADIX; t6 += c;
  c = Math.floor(t6 * INV_RADIX); t6 -= c * RADIX; t7 += c;
  c = Math.floor(t7 * INV_RADIX); t7 -= c * RADIX; t8 += c;
  c = Math.floor(t8 * INV_RADIX); t8 -= c * RADIX; t9 += c;
  c = Math.floor(t9 * INV_RADIX); t9 -= c * RADIX; t10 += c;
  c = Math.floor(t10 * INV_RADIX); t10 -= c * RADIX; t11 += c;
  c = Math.floor(t11 * INV_RADIX); t11 -= c * RADIX; t12 += c;
  c = Math.floor(t12 * INV_RADIX); t12 -= c * RADIX; t13 += c;
  c = Math.floor(t13 * INV_RADIX); t13 -= c * RADIX; t14 += c;
  c = Math.floor(t14 * INV_RADIX); t14 -= c * RADIX; t15 += c;
  c = Math.floor(t15 * INV_RADIX); t15 -= c * RADIX; t0 += 38 * c;
  c = Math.floor(t0 * INV_RADIX); t0 -= c * RADIX; t1 += c;
  c = Math.floor(t1 * INV_RADIX); t1 -= c * RADIX; t2 += c;
  c = Math.floor(t2 * INV_RADIX); t2 -= c * RADIX; t3 += c;
  c = Math.floor(t3 * INV_RADIX); t3 -= c * RADIX; t4 += c;
  c = Math.floor(t4 * INV_RADIX); t4 -= c * RADIX; t5 += c;
  c = Math.floor(t5 * INV_RADIX); t5 -= c * RADIX; t6 += c;
  c = Math.floor(t6 * INV_RADIX); t6 -= c * RADIX; t7 += c;
  c = Math.floor(t7 * INV_RADIX); t7 -= c * RADIX; t8 += c;
  c = Math.floor(t8 * INV_RADIX); t8 -= c * RADIX; t9 += c;
  c = Math.floor(t9 * INV_RADIX); t9 -= c * RADIX; t10 += c;
  c = Math.floor(t10 * INV_RADIX); t10 -= c * RADIX; t11 += c;
  c = Math.floor(t11 * INV_RADIX); t11 -= c * RADIX; t12 += c;
  c = Math.floor(t12 * INV_RADIX); t12 -= c * RADIX; t13 += c;
  c = Math.floor(t13 * INV_RADIX); t13 -= c * RADIX; t14 += c;
  c = Math.floor(t14 * INV_RADIX); t14 -= c * RADIX; t15 += c;
  c = Math.floor(t15 * INV_RADIX); t15 -= c * RADIX; t0 += 38 * c;
  o[oo + 0] = t0; o[oo + 1] = t1; o[oo + 2] = t2; o[oo + 3] = t3; o[oo + 4] = t4; o[oo + 5] = t5; o[oo + 6] = t6; o[oo + 7] = t7;
  o[oo + 8] = t8; o[oo + 9] = t9; o[oo + 10] = t10; o[oo + 11] = t11; o[oo + 12] = t12; o[oo + 13] = t13; o[oo + 14] = t14; o[oo + 15] = t15;
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
