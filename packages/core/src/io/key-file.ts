// A secret key in a file of its own (a party's `party.key`, the coordinator's `coordinator.key`)
// and the keyed digests made with it. A plain SHA-256 over a file detects corruption only:
// whoever edits the file recomputes it. An HMAC under a key that only its owner's account can
// read also detects an edit by anyone who cannot read the key; it does not stop an operator who can.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, linkSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { DataError } from '../errors.js';
import { writeFileAtomic } from './atomic-write.js';

/** Bytes of a key: HMAC-SHA256 gains nothing from more than its 256-bit block of security. */
export const KEY_BYTES = 32;

/** The key in `path`, checked: exactly KEY_BYTES bytes, readable by its owner only. */
function readKey(path: string): Buffer {
  const st = statSync(path);
  if ((st.mode & 0o077) !== 0)
    throw new DataError(path, undefined, `key file: mode ${(st.mode & 0o777).toString(8).padStart(4, '0')} lets group or others read it; chmod 600 it (and, if others could read it, delete it: the files it signed must then be written again)`);
  const key = readFileSync(path);
  if (key.length !== KEY_BYTES) throw new DataError(path, undefined, `key file: ${key.length} bytes, expected ${KEY_BYTES} (not a key this program wrote; it was truncated or replaced)`);
  return key;
}

/**
 * The key in `path`, created (KEY_BYTES from the OS CSPRNG, mode 0600) if there is none. Two
 * processes that start together (the parties of a simulation share a folder) get the same key:
 * the new key is written whole beside it and linked into place, which fails if another was
 * first. As with writeFileAtomic, its folder must exist and a failed write is the file
 * system's error, which the writer of the signed file reports as its own.
 */
export function keyFile(path: string): Buffer {
  if (!existsSync(path)) {
    const tmp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.new`;
    writeFileAtomic(tmp, randomBytes(KEY_BYTES), 0o600);
    try {
      linkSync(tmp, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      unlinkSync(tmp);
    }
  }
  return readKey(path);
}

/**
 * The key in `path` that `file` was signed with; its absence is refused (a fresh key could
 * only say that the file does not match it), saying where the key should come from.
 */
export function existingKeyFile(path: string, file: string): Buffer {
  if (!existsSync(path))
    throw new DataError(file, undefined, `its key ${path} is missing: the file is signed with the key created beside it when it was written (copy that key with it, mode 0600)`);
  return readKey(path);
}

/** HMAC-SHA256 (hex) of `parts` (each one after the other) under `key`. */
export function keyedDigest(key: Uint8Array, ...parts: (string | Uint8Array)[]): string {
  const h = createHmac('sha256', key);
  for (const p of parts) h.update(p);
  return h.digest('hex');
}

/** Whether two hex digests are equal, in time that does not depend on where they differ. */
export function sameDigest(a: unknown, b: string): boolean {
  if (typeof a !== 'string' || a.length !== b.length) return false;
  return timingSafeEqual(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
