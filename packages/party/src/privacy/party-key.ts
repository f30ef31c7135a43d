// The party's own secret key (party.key, beside its ledgers): the HMAC key of the ledgers'
// hash chains, so that an operator who edits a ledger consistently without it is detected.
// Created once and never rewritten: a key that changed would make every ledger unreadable.
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, linkSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '@admm-share/core';

export const PARTY_KEY_FILE = 'party.key';
const KEY_BYTES = 32;

/** The key file of the party whose files are in `dir`. */
export function partyKeyPath(dir: string): string {
  return join(dir, PARTY_KEY_FILE);
}

/** The key in `dir`, if there is one (a key file of the wrong length is a DataError). */
export function existingPartyKey(dir: string): Buffer | undefined {
  const path = partyKeyPath(dir);
  if (!existsSync(path)) return undefined;
  let key: Buffer;
  try {
    key = readFileSync(path);
  } catch (err) {
    throw new DataError(path, undefined, `party key: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (key.length !== KEY_BYTES) throw new DataError(path, undefined, `party key: expected ${KEY_BYTES} bytes, the file has ${key.length}`);
  return key;
}

/**
 * The party's key in `dir`, created on first use: 32 random bytes, mode 0600, written to a
 * temporary file, fsynced and linked into place. link() fails if the key exists, so two
 * parties starting at once in one folder end with one key, never one overwritten by the other.
 */
export function partyKey(dir: string): Buffer {
  const found = existingPartyKey(dir);
  if (found) return found;
  const path = partyKeyPath(dir);
  const tmp = join(dir, `.${PARTY_KEY_FILE}.${process.pid}.tmp`);
  try {
    unlinkSync(tmp);
  } catch {
    /* none left behind */
  }
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, randomBytes(KEY_BYTES));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
  return existingPartyKey(dir)!;
}
