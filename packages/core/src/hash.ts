import { createHash, createHmac } from 'node:crypto';

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

/** SHA-256 (hex) of a value's JSON: the digest a model file or job description carries of its own content. */
export function jsonDigest(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}
