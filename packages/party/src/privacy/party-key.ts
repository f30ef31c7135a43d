/**
 * The party's key (`party.key` in the folder of its --model, 32 random bytes, mode 0600,
 * created once): its model file (and its privacy ledger) carry an HMAC under it, so that an
 * edit by anyone who cannot read the key is refused. A model copied to another machine for
 * scoring takes the key with it.
 */
import { join } from 'node:path';
import { keyFile } from '@admm-share/core';

export const PARTY_KEY_FILE = 'party.key';

/** The key of `dir`, created there if it has none yet. */
export function partyKey(dir: string): Buffer {
  return keyFile(join(dir, PARTY_KEY_FILE));
}
