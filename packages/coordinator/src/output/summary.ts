/**
 * What a job reports: the summary (summary.json), declared once here as a schema (its type is
 * inferred from it, and reading it back checks every field), and the one human-readable result
 * line a run ends with. The per-round trace is trace.ts; job/summary-of.ts builds a job's summary.
 */
import { join } from 'node:path';
import { readJsonFile, parseWith, writeFileAtomic, z } from '@admm-share/core';
import { ACCOUNTANT_NAMES, ALGORITHMS, LOSSES, MECHANISMS, STOP_REASONS, VARIANTS } from '@admm-share/protocol';
import { oneShotReportSchema } from './one-shot-report.js';
import { bytesSchema, classesSchema, nameSchema as name } from './fields.js';
import { testMetricsSchema } from './test-metrics.js';

export type { TestMetrics } from './test-metrics.js';
export type { OneShotReport } from './one-shot-report.js';
export type { TraceLine } from './trace.js';
export { TraceWriter } from './trace.js';

export const SUMMARY_FILE = 'summary.json';

export const partySummarySchema = z.strictObject({ id: name, features: z.int().min(1), rows: z.int().min(0), testRows: z.int().min(0) });
export type PartySummary = z.output<typeof partySummarySchema>;

/** How a job with noise is labelled when it runs the per-round noisy ADMM. */
export const RESEARCH_MODE =
  'RESEARCH MODE: per-round noisy ADMM (--algorithm admm with noise); it is known to be worse than going alone at realistic N (docs/privacy.md, section 8); the default with privacy is --algorithm one-shot';

export const ALIGNMENT_METHOD = { method: 'ecdh-psi', group: 'X25519 (Curve25519)', hashToCurve: 'v2: SHA-512 (first 32 bytes), one Elligator 2 map with the cofactor cleared (a weak encoding, docs/privacy.md 11.4.1), as a Montgomery u-coordinate' } as const;

/**
 * The coordinator's work in an intersection: ids it hashed and blinded (its ids, once per key,
 * and every party's points) and ids whose points came from a PSI cache; per party with a cache
 * (--psi-cache on both sides), the cache's id, whether it was warm, and whether it was too full
 * to keep this job's new points. Absent from files of versions before the caches.
 */
export const alignmentWork = {
  ids: z.strictObject({ blinded: z.int().min(0), reused: z.int().min(0) }).optional(),
  caches: z.record(z.string(), z.strictObject({ id: z.string(), warm: z.boolean(), full: z.literal(true).optional() })).optional(),
};

/** How rows were aligned: always the private set intersection (docs/privacy.md, section 11). */
export const alignmentReportSchema = z.strictObject({
  method: z.literal(ALIGNMENT_METHOD.method),
  group: z.string(),
  hashToCurve: z.string(),
  /** Label ids the coordinator put into the intersection, per set (test: 0 without test labels). */
  labelIds: z.strictObject({ train: z.int().min(0), test: z.int().min(0) }),
  /** From the coordinator's start until every party's ids were intersected; null for a resumed job (the parties were aligned as they rejoined). */
  seconds: z.number().min(0).nullable(),
  ...alignmentWork,
});
export type AlignmentReport = z.output<typeof alignmentReportSchema>;

/**
 * How the test rows were chosen among the aligned ids and held out of training: `--holdout`
 * (the fraction and seed) or `--test-ids` (the file, its ids, and how many of them were not
 * aligned); `aligned` = `test` + `train`.
 */
const counts = { aligned: z.int().min(2), test: z.int().min(1), train: z.int().min(1) };
export const testSelectionSchema = z
  .discriminatedUnion('method', [
    z.strictObject({ method: z.literal('holdout'), fraction: z.number().gt(0).lt(1), seed: z.string(), ...counts }),
    z.strictObject({ method: z.literal('test-ids'), file: z.string(), listed: z.int().min(1), notAligned: z.int().min(0), ...counts }),
  ])
  .refine((t) => t.test + t.train === t.aligned, { message: 'test + train is not aligned' });
export type TestSelectionReport = z.output<typeof testSelectionSchema>;

/** Anderson acceleration of the ADMM rounds (docs/rho.md): its memory, and how many extrapolated points were kept and rejected. */
export const accelerationSchema = z.strictObject({ method: z.literal('anderson'), memory: z.int().min(1), extrapolated: z.int().min(0), rejected: z.int().min(0) });
export type Acceleration = z.output<typeof accelerationSchema>;

export const summarySchema = z
  .strictObject({
    jobId: name,
    algorithm: z.enum(ALGORITHMS),
    sgd: z.strictObject({ batchSize: z.int().min(1), lr: z.number().positive(), lrDecay: z.number().min(0) }).optional(),
    variant: z.enum(VARIANTS),
    loss: z.enum(LOSSES),
    lambda: z.number().min(0),
    /** ADMM's penalty at the start and the end; 0 and 0 for the other algorithms (the field predates them). */
    rho: z.strictObject({ initial: z.number().min(0), final: z.number().min(0) }),
    alpha: z.number().positive().lt(2),
    /** Absent without Anderson acceleration. */
    acceleration: accelerationSchema.optional(),
    rounds: z.int().min(0),
    reason: z.enum(STOP_REASONS),
    converged: z.boolean(),
    objective: z.number(),
    /**
     * The coordinator computes the objective from what it receives: with noise on, from the
     * noisy shares and without the parties' penalties (which they do not send then), which is
     * not the objective of the parties' models.
     */
    objectiveFrom: z.enum(['shares', 'noisy shares']),
    residuals: z.strictObject({ primal: z.number().min(0), dual: z.number().min(0) }).nullable(),
    test: testMetricsSchema.optional(),
    /** Present when the test rows were held out of the training labels (--holdout, --test-ids). */
    testSelection: testSelectionSchema.optional(),
    /** Present when the job has test labels but did not evaluate, with the reason. */
    evaluation: z.strictObject({ skipped: z.string() }).optional(),
    seconds: z.strictObject({ total: z.number().min(0), setup: z.number().min(0), training: z.number().min(0), perRound: z.number().min(0) }),
    bytes: bytesSchema,
    parties: z.array(partySummarySchema),
    rows: z.strictObject({ train: z.int().min(0), test: z.int().min(0) }),
    droppedRows: z.int().min(0),
    droppedTestRows: z.int().min(0),
    /** How rows were aligned. */
    alignment: alignmentReportSchema,
    classes: classesSchema,
    /** Each party's privacy setting as it reported it, and the budget it had spent at the end. */
    privacy: z.array(
      z.strictObject({
        party: name,
        mechanism: z.enum(MECHANISMS),
        epsilon: z.number().positive().nullable(),
        delta: z.number().positive().nullable(),
        rounds: z.int().min(1),
        sigma: z.number().min(0),
        sensitivity: z.number().min(0),
        accountant: z.enum(ACCOUNTANT_NAMES).nullable(),
        seeded: z.boolean(),
        /** What the party's data preparation spent on its statistics (absent: nothing estimated). */
        preparation: z.strictObject({ mu: z.number().positive(), deltaThreshold: z.number().min(0) }).optional(),
        epsilonSpent: z.number().min(0),
      }),
    ),
    /**
     * Label privacy at the coordinator (--label-epsilon): randomized response on the training
     * labels, how many of the job's training labels it flipped, and whether the flips were
     * seeded (predictable); null without.
     */
    labelPrivacy: z
      // 1 / (1 + e^epsilon) is below 1/2 for every epsilon > 0.
      .strictObject({ epsilon: z.number().positive(), flipProbability: z.number().min(0).lt(0.5), flipped: z.int().min(0), seeded: z.boolean() })
      .nullable(),
    /** The class weights of the loss (--class-weight): how they were chosen, and each class's raw label and weight; absent: unweighted. */
    classWeights: z
      .strictObject({
        mode: z.enum(['balanced', 'explicit']),
        negative: z.strictObject({ label: z.string(), weight: z.number().positive() }),
        positive: z.strictObject({ label: z.string(), weight: z.number().positive() }),
      })
      .optional(),
    /** one-shot jobs only. */
    oneShot: oneShotReportSchema.optional(),
    /** Present (RESEARCH_MODE) when noisy shares were sent every round. */
    research: z.string().optional(),
    /** What the end of the job says in words: a party that contributes nothing measurable (output/model-report.ts); absent when nothing. */
    warnings: z.array(z.string()).optional(),
    /** The coordinator's peak resident memory when the job ended, in bytes (each party logs its own with 'model written'). */
    peakMemoryBytes: z.number().min(0),
  })
  .superRefine((s, ctx) => {
    const bad = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    if ((s.sgd !== undefined) !== (s.algorithm === 'sgd')) bad('sgd', s.algorithm === 'sgd' ? 'is missing' : `is not expected with algorithm '${s.algorithm}'`);
    if ((s.oneShot !== undefined) !== (s.algorithm === 'one-shot')) bad('oneShot', s.algorithm === 'one-shot' ? 'is missing' : `is not expected with algorithm '${s.algorithm}'`);
    if (s.converged !== (s.reason === 'converged')) bad('converged', `is ${s.converged} with reason '${s.reason}'`);
    if (s.labelPrivacy && s.labelPrivacy.flipped > s.rows.train) ctx.addIssue({ code: 'custom', path: ['labelPrivacy', 'flipped'], message: `is ${s.labelPrivacy.flipped}, more than the ${s.rows.train} training rows` });
    if (s.labelPrivacy && s.loss !== 'logistic') bad('labelPrivacy', `is not expected with loss '${s.loss}'`);
    if (s.testSelection && (s.testSelection.test !== s.rows.test || s.testSelection.train !== s.rows.train)) bad('testSelection', `holds out ${s.testSelection.test} and trains on ${s.testSelection.train} rows, but rows says ${s.rows.test} and ${s.rows.train}`);
  });
export type Summary = z.output<typeof summarySchema>;

/** Read summary.json back, every field checked; a DataError names the file and the field. */
export function readSummary(path: string): Summary {
  return readJsonFile(summarySchema, path, 'summary');
}

/** Check a parsed summary (as job/summary-of.ts builds it). */
export function parseSummary(value: unknown, path: string): Summary {
  return parseWith(summarySchema, value, path, 'summary');
}

export function writeSummary(dir: string, summary: Summary): string {
  const path = join(dir, SUMMARY_FILE);
  writeFileAtomic(path, JSON.stringify(summary, null, 2) + '\n');
  return path;
}

const fmt = (v: number) => (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e6 ? v.toFixed(4) : v.toExponential(3));

/** The human-readable line a coordinator run ends with. */
export function resultLine(s: Summary, summaryPath: string): string {
  const how = s.reason === 'converged' ? `converged after ${s.rounds} rounds` : s.reason === 'budget' ? `stopped by a privacy budget after ${s.rounds} rounds` : `ran ${s.rounds} rounds`;
  const t = s.test;
  const test = t
    ? t.rmse !== undefined
      ? `, test RMSE ${fmt(t.rmse)}`
      : `, test accuracy ${fmt(t.accuracy ?? NaN)}, log loss ${fmt(t.logLoss ?? NaN)}, AUC ${fmt(t.auc ?? NaN)}`
    : s.evaluation
      ? `, no test metrics (${s.evaluation.skipped})`
      : '';
  const o = s.oneShot;
  const local = o?.local?.test?.logLoss !== undefined ? `; party ${o.local.party} alone: test log loss ${fmt(o.local.test.logLoss)}` : '';
  const warnings = [...(o?.warnings ?? []), ...(s.warnings ?? []), ...(s.research ? [s.research] : [])].map((w) => `; WARNING: ${w}`).join('');
  const what = o ? `one-shot private training, ${o.activeParty ? `active party ${o.activeParty}` : 'every party passive'}` : `${s.algorithm}${s.algorithm === 'admm' ? ` ${s.variant}` : ''}`;
  const ran = o ? 'finished' : how;
  const objective = `${s.labelPrivacy ? 'corrected ' : ''}objective ${fmt(s.objective)}${s.objectiveFrom === 'noisy shares' ? ' (from noisy shares)' : ''}`;
  return `job ${s.jobId} ${ran} (${what}, ${s.rows.train} rows, ${s.parties.length} parties, ${s.seconds.total.toFixed(1)} s): ${objective}${test}${local}${labelPrivacyLine(s, '; ')}${warnings}; summary in ${summaryPath}`;
}

/** What the result lines say about label privacy: nothing without it. */
export function labelPrivacyLine(s: Pick<Summary, 'labelPrivacy' | 'rows'>, prefix: string): string {
  const l = s.labelPrivacy;
  if (!l) return '';
  return `${prefix}label privacy: label epsilon ${l.epsilon}, randomized response flipped ${l.flipped} of ${s.rows.train} training labels (probability ${l.flipProbability.toPrecision(4)}${l.seeded ? ', SEEDED: predictable, experiments only' : ''}), loss corrected for the flips`;
}
