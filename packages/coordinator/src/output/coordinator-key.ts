/**
 * The coordinator's key (`coordinator.key` in its --out folder, 32 random bytes, mode 0600,
 * created once): the keyed digests of the files it reads back (the checkpoint, the label
 * flips, job.json) are made with it, so that an edit by anyone who cannot read it is refused.
 * A run folder copied elsewhere for `predict` or `serve` takes the key with it.
 */
import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
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

/** The key the private set intersection's secrets derive from: apart from coordinator.key, which goes with a run folder copied for scoring. */
export const PSI_KEY_FILE = 'psi.key';

/**
 * The intersection's secret of one job, the same whenever the coordinator runs that job from
 * `dir` again (a restart, --resume): HMAC of the job id under `psi.key` (created with `dir` if
 * need be). Whoever holds psi.key can test candidate ids against every label point a party ever
 * received from this folder's jobs, so it is as secret as the label ids and never needed to
 * score (docs/privacy.md, 11.3).
 */
export function jobSecret(dir: string, jobId: string): Buffer {
  mkdirSync(dir, { recursive: true });
  return createHmac('sha256', keyFile(join(dir, PSI_KEY_FILE))).update(`admm-share job ${jobId}`).digest();
}
