/**
 * The trained job's description (job.json in --out), the coordinator's half of the model: the
 * job id, the label mapping, each party's block and preprocessing, and how the parties' scores
 * combine into the model's score. A prediction job reads it back (checked against its digest)
 * and refuses parties whose model files do not match it. The digest (SHA-256) detects a
 * corrupted file only, since whoever edits it can compute it again; `mac`, an HMAC under the
 * coordinator's key (coordinator.key beside it, signed-json.ts), detects an edit by anyone who
 * cannot read that key: swapped classes would invert every prediction.
 */
import { dirname, join } from 'node:path';
import { DataError, jsonDigest, parseWith, writeFileAtomic, z } from '@admm-share/core';
import { type ModelRef, ALGORITHMS, LOSSES } from '@admm-share/protocol';
import { classesSchema, nameSchema as name } from './fields.js';
import { readSigned, signed } from './signed-json.js';
import { testMetricsSchema } from './test-metrics.js';
import type { Summary } from './summary.js';

export const JOB_FILE = 'job.json';
export const JOB_FORMAT = 'admm-share-job/2';

export const jobPartySchema = z.strictObject({
  id: name,
  features: z.int().min(1),
  role: z.enum(['active', 'passive']),
  /** Rows scaled to norm <= 1 (training with noise, or one-shot). */
  rowScaling: z.boolean(),
});
export type JobParty = z.output<typeof jobPartySchema>;

/**
 * sum: the model's score is the sum of the parties' scores (ADMM, SGD). one-shot: the active
 * party's score (or `intercept` without one) plus each passive party's clipped score times its weight.
 */
export const combinationSchema = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('sum') }),
  z.strictObject({ kind: z.literal('one-shot'), activeParty: name.nullable(), weights: z.record(name, z.number()), intercept: z.number() }),
]);
export type Combination = z.output<typeof combinationSchema>;

/** job.json without its digest: what the digest is taken over. */
const jobBodySchema = z
  .strictObject({
    format: z.literal(JOB_FORMAT, `expected '${JOB_FORMAT}' (the job.json a coordinator writes at the end of training)`),
    jobId: name,
    algorithm: z.enum(ALGORITHMS),
    loss: z.enum(LOSSES),
    labels: classesSchema,
    parties: z.array(jobPartySchema).min(1),
    combination: combinationSchema,
    /** The training run's test metrics, for reference. */
    test: testMetricsSchema.nullable(),
    createdAt: z.string(),
  })
  .superRefine((d, ctx) => {
    const c = d.combination;
    if (c.kind === 'one-shot')
      for (const p of d.parties)
        if (p.id !== c.activeParty && c.weights[p.id] === undefined) ctx.addIssue({ code: 'custom', path: ['combination', 'weights'], message: `no weight for passive party ${p.id}` });
  });

export type JobDescription = z.output<typeof jobBodySchema> & { digest: string };

export function writeJobFile(dir: string, d: Omit<JobDescription, 'format' | 'digest' | 'createdAt'>): string {
  const body = { format: JOB_FORMAT, ...d, createdAt: new Date().toISOString() };
  const path = join(dir, JOB_FILE);
  writeFileAtomic(path, JSON.stringify(signed(dirname(path), { ...body, digest: jsonDigest(body) }), null, 2) + '\n');
  return path;
}

/** The description of a finished training job, from its summary and its parties. */
export function describeJob(
  cfg: { jobId: string; loss: JobDescription['loss']; activeParty?: string },
  summary: Summary,
  parties: readonly { id: string; features: number; noise: boolean }[],
): Omit<JobDescription, 'format' | 'digest' | 'createdAt'> {
  const { algorithm, oneShot } = summary;
  return {
    jobId: cfg.jobId,
    algorithm,
    loss: cfg.loss,
    labels: summary.classes,
    parties: parties.map((p) => ({ id: p.id, features: p.features, role: p.id === cfg.activeParty ? 'active' : 'passive', rowScaling: algorithm === 'one-shot' || p.noise })),
    combination: oneShot ? { kind: 'one-shot', activeParty: oneShot.activeParty, weights: oneShot.weights, intercept: oneShot.intercept ?? 0 } : { kind: 'sum' },
    test: summary.test ?? null,
  };
}

/**
 * Read a job description, every field checked and the digests verified (under the key of its
 * folder); a DataError names the file and the field.
 */
export function readJobFile(path: string): JobDescription {
  const what = 'job description';
  // The format first (another file given as a job description is named as such), then the
  // digests (a file changed after training is refused as such, whatever it now says).
  const older = 'train the job again with this version of admm-coordinator, which signs job.json with the coordinator.key of its --out';
  const unchanged = ({ digest, ...rest }: Record<string, unknown>) => typeof digest === 'string' && jsonDigest(rest) === digest;
  const { digest, ...body } = readSigned(path, what, JOB_FORMAT, older, (b) => {
    if (!unchanged(b)) throw new DataError(path, undefined, `${what}: its content does not match its digest (the file was changed after training)`);
  });
  return { ...parseWith(jobBodySchema, body, path, what), digest: String(digest) };
}

/** Why a scoring party's model is not this job's (naming both sides), or undefined if it is. */
export function modelMismatch(d: JobDescription, party: string, features: number, model: ModelRef | null): string | undefined {
  const p = d.parties.find((q) => q.id === party);
  if (!p) return undefined; // not a party of the job: refused by the allow-list
  if (!model) return `party ${party} joined to train, but this coordinator scores with the model of job ${d.jobId} (start it with admm-party predict)`;
  if (model.jobId !== d.jobId) return `party ${party}'s model is from job ${model.jobId}, the job description is of job ${d.jobId}`;
  if (features !== p.features) return `party ${party}'s model has ${features} features, job ${d.jobId} trained it on ${p.features}`;
  if (model.rowScaling !== p.rowScaling)
    return `party ${party}'s model ${model.rowScaling ? 'scales rows to norm 1' : 'does not scale rows'}, job ${d.jobId} trained ${party} ${p.rowScaling ? 'with' : 'without'} row scaling`;
  return undefined;
}

/**
 * The model's scores from the parties' parts (each over the same rows, in the same order; a
 * party missing from `parts` contributes nothing), combined as in training, in the same order
 * of additions, so that the scores of the training run's test rows come out bit for bit.
 */
export function combineScores(d: JobDescription, parts: ReadonlyMap<string, Float64Array>, n: number): Float64Array {
  const c = d.combination;
  if (c.kind === 'sum') {
    const total = new Float64Array(n);
    for (const p of d.parties) {
      const s = parts.get(p.id);
      if (s) for (let i = 0; i < n; i++) total[i] += s[i];
    }
    return total;
  }
  const active = c.activeParty === null ? undefined : parts.get(c.activeParty);
  const total = active ? active.slice() : new Float64Array(n).fill(c.intercept);
  for (const p of d.parties) {
    if (p.id === c.activeParty) continue;
    const s = parts.get(p.id);
    const w = c.weights[p.id];
    if (s) for (let i = 0; i < n; i++) total[i] += w * s[i];
  }
  return total;
}
