/**
 * The party's key (`party.key` beside its model and ledgers, 32 random bytes, mode 0600,
 * created once and never rewritten: core's keyFile). Its model file and its privacy ledgers
 * carry an HMAC under it, so that an edit by anyone who cannot read the key is refused. A model
 * copied to another machine for scoring takes the key with it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { keyFile } from '@admm-share/core';

export const PARTY_KEY_FILE = 'party.key';

/** The key file of the party whose files are in `dir`. */
export function partyKeyPath(dir: string): string {
  return join(dir, PARTY_KEY_FILE);
}

/** The key of `dir`, created there if it has none yet. */
export function partyKey(dir: string): Buffer {
  return keyFile(partyKeyPath(dir));
}

/** The key in `dir`, if there is one (a key file of the wrong length or mode is a DataError). */
export function existingPartyKey(dir: string): Buffer | undefined {
  return existsSync(partyKeyPath(dir)) ? keyFile(partyKeyPath(dir)) : undefined;
}
