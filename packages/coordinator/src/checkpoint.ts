import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { Packr } from 'msgpackr';
import { DataError, writeFileAtomic } from '@admm-share/core';
import type { Setup } from '@admm-share/protocol';
import type { AdmmSnapshot } from './admm.js';

/**
 * What the coordinator needs to continue a job after a crash (`--resume`): written every
 * --checkpoint-every rounds, atomically (write, fsync, rename), as MessagePack so the
 * vectors keep their exact bits. Parties rejoin by themselves and are told the round.
 */
export interface Checkpoint {
  format: 'admm-share-checkpoint/1';
  jobId: string;
  /** The last completed round. */
  round: number;
  hashKey: Uint8Array;
  /** Digest of the label files, so a resume with other labels is refused. */
  labelsDigest: string;
  labelRows: { train: Uint32Array; test: Uint32Array };
  keptKeys: { train: string[]; test: string[] | null };
  dropped: { train: number; test: number };
  setup: Omit<Setup, 'trainRows' | 'testRows'>;
  admm: AdmmSnapshot;
}

export const CHECKPOINT_FILE = 'checkpoint.bin';

const packr = new Packr({ moreTypes: true, useRecords: false });

export function writeCheckpoint(path: string, cp: Checkpoint): void {
  writeFileAtomic(path, packr.pack(cp), 0o600);
}

export function readCheckpoint(path: string): Checkpoint {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new DataError(path, undefined, `cannot read the checkpoint to resume from (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let cp: Checkpoint;
  try {
    cp = packr.unpack(bytes) as Checkpoint;
  } catch (err) {
    throw new DataError(path, undefined, `not a checkpoint (${(err as Error).message})`);
  }
  if (cp?.format !== 'admm-share-checkpoint/1') throw new DataError(path, undefined, 'not an admm-share checkpoint (format)');
  if (!(cp.admm?.replayC instanceof Float64Array) || !Array.isArray(cp.admm.replayPreviousShares))
    throw new DataError(path, undefined, 'a checkpoint from before protocol version 6 (it lacks the round a rejoining party replays); it cannot be resumed by this version');
  return cp;
}

/** Digest of label ids and values, in file order. */
export function labelsDigest(...sets: ({ ids: string[]; y: Float64Array } | undefined)[]): string {
  const h = createHash('sha256');
  for (const s of sets) {
    if (!s) {
      h.update('\0none');
      continue;
    }
    for (let i = 0; i < s.ids.length; i++) h.update(`${s.ids[i]}\0${s.y[i]}\n`);
  }
  return h.digest('hex');
}
