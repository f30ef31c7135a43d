/**
 * The coordinator's key (`coordinator.key` in its --out folder, 32 random bytes, mode 0600,
 * created once): the keyed digests of the files it reads back (the checkpoint, the label
 * flips, job.json) are made with it, so that an edit by anyone who cannot read it is refused.
 * A run folder copied elsewhere for `predict` or `serve` takes the key with it.
 */
import { join } from 'node:path';
import { existingKeyFile, keyFile } from '@admm-share/core';

export const COORDINATOR_KEY_FILE = 'coordinator.key';

/** The key of `dir` (the coordinator's --out), created if it has none yet: for files about to be written. */
export function coordinatorKey(dir: string): Buffer {
  return keyFile(join(dir, COORDINATOR_KEY_FILE));
}

/** The key of `dir` that `file` (in it) was signed with; missing, a DataError naming `file` and the key. */
export function signingKey(dir: string, file: string): Buffer {
  return existingKeyFile(join(dir, COORDINATOR_KEY_FILE), file);
}
