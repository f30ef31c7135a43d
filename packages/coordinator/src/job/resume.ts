/** What --resume checks before a job continues from its checkpoint. */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type ClassWeightSpec, ConfigError, DataError, resolveClassWeights } from '@admm-share/core';
import type { CoordinatorConfig } from '../config.js';
import { CHECKPOINT_FILE, type Checkpoint, readCheckpoint } from '../output/checkpoint.js';
import { SUMMARY_FILE } from '../output/summary.js';
import type { Labels } from './labels.js';

/** A resumed coordinator waits at least this long for the parties to rejoin, even with --rejoin-timeout 0. */
export const MIN_RESUME_WINDOW_MS = 1000;

/** The checkpoint --resume continues from, or a truthful reason why there is none to continue. */
export function readResumable(cfg: CoordinatorConfig, labelsDigest: string, labelRows: number): Checkpoint {
  const path = join(cfg.out, CHECKPOINT_FILE);
  if (!existsSync(path) && existsSync(join(cfg.out, SUMMARY_FILE)))
    throw new ConfigError(`--resume: the job in ${cfg.out} completed (summary.json is there and its checkpoint was removed); nothing to resume`);
  if (!existsSync(path))
    throw new ConfigError(
      `--resume: no checkpoint in ${cfg.out} (ADMM writes one every --checkpoint-seconds of training, or every --checkpoint-every rounds; a one-shot job writes none: start it again without --resume and with the same --job id, and each passive party sends its stored release again at no cost; so does a job stopped before training, in the intersection: the parties still reconnecting join it again)`,
    );
  const cp = readCheckpoint(path);
  if (cp.labelsDigest !== labelsDigest) throw new ConfigError('--resume: the label files differ from the ones the checkpointed job used');
  if (cp.setup.algorithm !== 'admm') throw new ConfigError('--resume: only ADMM jobs can be resumed');
  if (cp.setup.parties !== cfg.parties.length) throw new ConfigError(`--resume: the job had ${cp.setup.parties} parties, --parties lists ${cfg.parties.length}`);
  if (cfg.jobIdGiven && cfg.jobId !== cp.jobId) throw new ConfigError(`--resume: the checkpoint is for job '${cp.jobId}', not '${cfg.jobId}'`);
  if (cp.samples.labelRows.train.some((r) => r >= labelRows)) throw new DataError(path, undefined, 'label rows beyond the label file');
  if (cp.samples.testFrom === 'train' && cp.samples.labelRows.test.some((r) => r >= labelRows)) throw new DataError(path, undefined, 'held-out test rows beyond the label file');
  if ((cp.samples.testFrom === 'train') !== (cfg.testSelection !== undefined))
    throw new ConfigError(
      cp.samples.testFrom === 'train'
        ? '--resume: the checkpointed job held out test rows of --labels: resume it with the --holdout or --test-ids it was started with'
        : `--resume: the checkpointed job did not hold out test rows: resume it without --${cfg.testSelection!.method === 'holdout' ? 'holdout' : 'test-ids'}`,
    );
  return cp;
}

/**
 * A resumed job keeps its label privacy: given whether --label-epsilon was (before the flips
 * are read), then the flip probability of the flips file (after).
 */
export function checkResumedLabelPrivacy(cp: Checkpoint, given: boolean | number): void {
  const flip = cp.setup.labelFlip;
  if (typeof given === 'boolean') {
    if (flip > 0 !== given)
      throw new ConfigError(
        flip > 0
          ? `--resume: the checkpointed job trains on labels flipped with probability ${flip} (label privacy): resume it with its --label-epsilon`
          : '--resume: the checkpointed job trains on the true labels; resume it without --label-epsilon (a job cannot start flipping its labels half-way)',
      );
  } else if (flip !== given) throw new ConfigError(`--resume: the checkpointed job flipped its labels with probability ${flip}, its flips file says ${given}`);
}

/**
 * A resumed job trains on with the class weights it was checkpointed with, which the flags must
 * still give (balanced: counted on the checkpoint's training rows of `labels`, the labels it trains on).
 */
export function checkResumedClassWeights(cp: Checkpoint, spec: ClassWeightSpec | undefined, labels: Labels): void {
  const had = cp.setup.classWeights;
  const y = Float64Array.from(cp.samples.labelRows.train, (r) => labels.y[r]);
  const given = spec && labels.classes ? resolveClassWeights(spec, y, labels.classes) : undefined;
  const say = (w: typeof had) => (w ? `class weights ${w.negative} (class -1) and ${w.positive} (class +1)` : 'no class weights');
  if (had?.negative !== given?.negative || had?.positive !== given?.positive)
    throw new ConfigError(`--resume: the checkpointed job trains with ${say(had)}, these flags give ${say(given)}: resume it with its --class-weight`);
}
