/**
 * Label differential privacy at the coordinator (--label-epsilon): randomized response on the
 * training labels, drawn once per job and kept in the job's output folder
 * (`label-flips.json`), so that a restart of the same job (--resume, or the same --job again)
 * trains on the same flipped labels. A second, independent draw for the same job would be a
 * second release of the labels: two draws of randomized response together are
 * 2 epsilon-label-DP, and their majority is a better guess of the true label than either.
 *
 * The file holds the label-file rows whose label was flipped, with the digest of the training
 * labels they were drawn for (ids and values in file order): a restart with another label file
 * is refused. It is as sensitive as the labels themselves (with the flipped labels it gives the
 * true ones back), so it is written with mode 0600 and never leaves the coordinator. It is
 * signed with the coordinator's key (output/signed-json.ts: an edited mask, such as `flipped: []`,
 * would train on the true labels under a label epsilon), and a mask whose number of flips is
 * implausible for its probability (core's plausibleFlipCounts) is refused even when signed.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, FLIP_COUNT_FALSE_REFUSAL, drawFlips, flipProbability, osNoise, parseWith, plausibleFlipCounts, seededNoise, writeFileAtomic, z } from '@admm-share/core';
import { digestSchema, nameSchema } from '../output/fields.js';
import { readSigned, signed } from '../output/signed-json.js';
import { type Labels, labelsDigest } from './labels.js';

export const FLIPS_FILE = 'label-flips.json';
const FORMAT = 'admm-share-label-flips/2';

/** --label-epsilon and, for reproducible experiments only, --label-seed. */
export interface LabelPrivacyConfig {
  epsilon: number;
  /** Seed of the flips: predictable by anyone who knows it. Without it the flips come from the OS CSPRNG. */
  seed?: string;
}

const flipsFileSchema = z
  .strictObject({
    format: z.literal(FORMAT),
    jobId: nameSchema,
    epsilon: z.number().positive(),
    /** 1 / (1 + e^epsilon). */
    flipProbability: z.number(),
    /** The flips came from a seeded, predictable generator. */
    seeded: z.boolean(),
    /** labelsDigest of the training labels the flips were drawn for, and their number of rows. */
    labelsDigest: digestSchema,
    rows: z.int().min(1),
    /** Rows of the training label file whose label was flipped, ascending (a list in the file). */
    flipped: z.array(z.int().min(0)),
  })
  .superRefine((f, ctx) => {
    // Refinements run on a file whose fields already failed: only a valid epsilon has a probability.
    if (!(typeof f.epsilon === 'number' && f.epsilon > 0)) return;
    const p = flipProbability(f.epsilon);
    if (f.flipProbability !== p) ctx.addIssue({ code: 'custom', path: ['flipProbability'], message: `${f.flipProbability} is not 1 / (1 + e^${f.epsilon}) = ${p}` });
    f.flipped.forEach((r, k) => {
      if (r >= f.rows) ctx.addIssue({ code: 'custom', path: ['flipped', k], message: `${r} is not a row of ${f.rows}` });
      else if (k > 0 && r <= f.flipped[k - 1]) ctx.addIssue({ code: 'custom', path: ['flipped', k], message: `${r} is not above flipped[${k - 1}]` });
    });
    if (!(Number.isInteger(f.rows) && f.rows >= 1 && Array.isArray(f.flipped))) return;
    const { lo, hi } = plausibleFlipCounts(f.rows, p);
    const k = f.flipped.length;
    if (k < lo || k > hi)
      ctx.addIssue({
        code: 'custom',
        path: ['flipped'],
        message: `${k} of ${f.rows} labels flipped, but with flip probability ${p.toPrecision(4)} a draw has between ${lo} and ${hi} but for a chance below ${FLIP_COUNT_FALSE_REFUSAL}: this mask was not drawn for label epsilon ${f.epsilon}`,
      });
  })
  .transform((f) => ({ ...f, flipped: Uint32Array.from(f.flipped) as Uint32Array }));

export type LabelFlips = z.output<typeof flipsFileSchema>;

/** What the summary says about label privacy. */
export interface LabelPrivacyReport {
  epsilon: number;
  flipProbability: number;
  /** Training labels of the job (aligned rows) that were flipped. */
  flipped: number;
  seeded: boolean;
}

/** Write the flips signed with the key of their folder (created there if it has none). */
export function writeLabelFlips(path: string, f: LabelFlips): void {
  writeFileAtomic(path, JSON.stringify(signed(dirname(path), { ...f, flipped: Array.from(f.flipped) })) + '\n', 0o600);
}

/** Read a flips file back, its keyed digest and then every field checked; a DataError names the file and the field. */
export function readLabelFlips(path: string): LabelFlips {
  const older = 'finish its job with the admm-coordinator that wrote it, or start the job again in a new --out (a new draw of the same labels costs another label epsilon)';
  return parseWith(flipsFileSchema, readSigned(path, 'label flips', FORMAT, older), path, 'label flips');
}

/**
 * The job's label flips: those kept in `out` for this job, or (a new job) a fresh draw, written
 * there before anything is sent. Refused, with what to do: another job's flips in `out` (this
 * job would draw again), a job that flipped its labels run without --label-epsilon (it would
 * send the true labels), another epsilon, another label file, and a resumed job whose flips
 * are missing (`resume`: never draw). Without label privacy and no flips of this job: undefined.
 */
export function resolveLabelFlips(
  cfg: { out: string; jobId: string; labelPrivacy?: LabelPrivacyConfig; resume: boolean },
  labels: Labels,
  log: Logger,
): LabelFlips | undefined {
  const path = join(cfg.out, FLIPS_FILE);
  const kept = existsSync(path) ? readLabelFlips(path) : undefined;
  const lp = cfg.labelPrivacy;
  if (!lp) {
    if (kept?.jobId === cfg.jobId)
      throw new ConfigError(`job '${cfg.jobId}' trains on labels flipped for label privacy (${path}): run it with --label-epsilon ${kept.epsilon} again, or it would send the true labels`);
    return undefined;
  }
  const digest = labelsDigest(labels);
  if (kept) {
    if (kept.jobId !== cfg.jobId)
      throw new ConfigError(
        `${path} holds the label flips of job '${kept.jobId}': continue that job with --job ${kept.jobId}, or give job '${cfg.jobId}' its own --out (its new draw of the same labels costs another epsilon ${lp.epsilon})`,
      );
    if (kept.epsilon !== lp.epsilon) throw new ConfigError(`job '${cfg.jobId}' flipped its labels with --label-epsilon ${kept.epsilon} (${path}), not ${lp.epsilon}`);
    if (kept.labelsDigest !== digest || kept.rows !== labels.ids.length)
      throw new ConfigError(`the training labels in ${labels.file} differ from the ones job '${cfg.jobId}' flipped (${path}); its flips cannot be reused, and a new draw for the same job would be a second release`);
    log.info({ file: path, epsilon: kept.epsilon, flipped: kept.flipped.length, rows: kept.rows, seeded: kept.seeded }, 'label privacy: the flips of this job are reused, not drawn again');
    return kept;
  }
  if (cfg.resume) throw new ConfigError(`--resume with --label-epsilon: the label flips of job '${cfg.jobId}' are missing (${path}); drawing new ones would be a second release of the labels`);
  const p = flipProbability(lp.epsilon);
  const source = lp.seed === undefined ? osNoise() : seededNoise(lp.seed);
  const flips: LabelFlips = {
    format: FORMAT,
    jobId: cfg.jobId,
    epsilon: lp.epsilon,
    flipProbability: p,
    seeded: source.seeded,
    labelsDigest: digest,
    rows: labels.ids.length,
    flipped: drawFlips(labels.ids.length, p, source),
  };
  mkdirSync(cfg.out, { recursive: true });
  writeLabelFlips(path, flips);
  log.info(
    { file: path, epsilon: lp.epsilon, flipProbability: p, flipped: flips.flipped.length, rows: flips.rows, seeded: flips.seeded },
    `label privacy: randomized response, each training label flipped with probability ${p.toPrecision(4)}${flips.seeded ? ' (SEEDED flips: predictable, for experiments only)' : ' (OS CSPRNG)'}`,
  );
  return flips;
}

/** How many of the job's training rows (label-file rows) had their label flipped. */
export function flippedAmong(flips: LabelFlips, rows: Uint32Array): number {
  const set = new Set(flips.flipped);
  let k = 0;
  for (let i = 0; i < rows.length; i++) if (set.has(rows[i])) k++;
  return k;
}
