import { createHmac } from 'node:crypto';

/** Bytes of HMAC-SHA256 kept per id: 128 bits make a collision among 2^32 ids ~2^-64 likely. */
export const ID_HASH_BYTES = 16;

/** Keyed hashes of sample ids, concatenated: id i occupies bytes [16 i, 16 i + 16). */
export function hashIds(ids: readonly string[], key: Uint8Array): Uint8Array {
  const out = new Uint8Array(ids.length * ID_HASH_BYTES);
  for (let i = 0; i < ids.length; i++) {
    const h = createHmac('sha256', key).update(ids[i], 'utf8').digest();
    out.set(h.subarray(0, ID_HASH_BYTES), i * ID_HASH_BYTES);
  }
  return out;
}

/** The hashes as hex strings, for use as map keys. */
export function hashKeys(hashes: Uint8Array): string[] {
  const n = hashes.length / ID_HASH_BYTES;
  const out = new Array<string>(n);
  for (let i = 0; i < n; i++)
    out[i] = Buffer.from(hashes.buffer, hashes.byteOffset + i * ID_HASH_BYTES, ID_HASH_BYTES).toString('hex');
  return out;
}

/**
 * A party's answer to the coordinator's challenge: HMAC-SHA256 under the party's secret of
 * a domain tag, the nonce, the party id and the job id it asks for. The secret never
 * crosses the wire, a proof is useless on another connection (fresh nonce), and it binds the
 * identity the hello claims.
 */
export function helloProof(secret: string, nonce: Uint8Array, partyId: string, jobId: string | null): Uint8Array {
  return new Uint8Array(
    createHmac('sha256', secret)
      .update('admm-share hello v4\0')
      .update(nonce)
      .update(`\0${partyId}\0${jobId ?? ''}`, 'utf8')
      .digest(),
  );
}
