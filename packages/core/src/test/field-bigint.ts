// GF(2^255 - 19) in BigInt for the PSI tests: the independent arithmetic the typed-array field
// and libsodium's points are checked against (never on the product's path).

export const P = 2n ** 255n - 19n;

/** b^e mod m. */
export function modPow(b: bigint, e: bigint, m = P): bigint {
  let r = 1n;
  b %= m;
  for (; e > 0n; e >>= 1n, b = (b * b) % m) if (e & 1n) r = (r * b) % m;
  return r;
}

/** u as 32 little-endian bytes. */
export const le = (u: bigint): Uint8Array => {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = Number((u >> BigInt(8 * i)) & 0xffn);
  return out;
};

/** Little-endian bytes as a number. */
export const fromLe = (b: Uint8Array): bigint => b.reduceRight((acc, x) => (acc << 8n) | BigInt(x), 0n);
