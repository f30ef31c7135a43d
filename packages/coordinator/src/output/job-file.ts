/**
 * The trained job's description (job.json in --out), the coordinator's half of the model: the
 * job id, the label mapping, each party's block and preprocessing, and how the parties' scores
 * combine into the model's score. A prediction job reads it back (checked against its digest)
 * and refuses parties whose model files do not match it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError, jsonDigest, writeFileAtomic } from '@admm-share/core';
import { type AlgorithmName, type Classes, type LossName, type ModelRef, type Role, ALGORITHMS, LOSSES, NAME_RE } from '@admm-share/protocol';
import type { TestMetrics } from './summary.js';

export const JOB_FILE = 'job.json';
export const JOB_FORMAT = 'admm-share-job/1';

export interface JobParty {
  id: string;
  features: number;
  role: Role;
  /** Rows scaled to norm <= 1 (training with noise, or one-shot). */
  rowScaling: boolean;
}

/**
 * sum: the model's score is the sum of the parties' scores (ADMM, SGD). one-shot: the active
 * party's score (or `intercept` without one) plus each passive party's clipped score times its weight.
 */
export type Combination = { kind: 'sum' } | { kind: 'one-shot'; activeParty: string | null; weights: Record<string, number>; intercept: number };

export interface JobDescription {
  format: typeof JOB_FORMAT;
  jobId: string;
  algorithm: AlgorithmName;
  loss: LossName;
  labels: Classes | null;
  parties: JobParty[];
  combination: Combination;
  /** The training run's test metrics, for reference. */
  test: TestMetrics | null;
  createdAt: string;
  digest: string;
}

export function writeJobFile(dir: string, d: Omit<JobDescription, 'format' | 'digest' | 'createdAt'>): string {
  const body = { format: JOB_FORMAT, ...d, createdAt: new Date().toISOString() };
  const path = join(dir, JOB_FILE);
  writeFileAtomic(path, JSON.stringify({ ...body, digest: jsonDigest(body) }, null, 2) + '\n');
  return path;
}

/** Read a job description, every field checked and the digest verified; a DataError names the file and the field. */
export function readJobFile(path: string): JobDescription {
  const bad = (detail: string): never => {
    throw new DataError(path, undefined, `job description: ${detail}`);
  };
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return bad(e.code ? `cannot read it (${e.code})` : `not JSON (${e.message})`);
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return bad('expected a JSON object');
  if (o.format !== JOB_FORMAT) bad(`format ${JSON.stringify(o.format)?.slice(0, 60)}, expected '${JOB_FORMAT}' (the job.json a coordinator writes at the end of training)`);
  const { digest, ...body } = o;
  if (typeof digest !== 'string' || jsonDigest(body) !== digest) bad('its content does not match its digest (the file was changed after training)');
  if (typeof o.jobId !== 'string' || !NAME_RE.test(o.jobId)) bad('jobId: expected a job id');
  if (!ALGORITHMS.includes(o.algorithm as AlgorithmName)) bad('algorithm: unknown');
  if (!LOSSES.includes(o.loss as LossName)) bad('loss: unknown');
  const parties = o.parties as JobParty[];
  if (!Array.isArray(parties) || parties.length === 0) return bad('parties: expected a non-empty list');
  for (const p of parties)
    if (typeof p?.id !== 'string' || !NAME_RE.test(p.id) || !Number.isSafeInteger(p.features) || p.features < 1 || typeof p.rowScaling !== 'boolean' || (p.role !== 'active' && p.role !== 'passive'))
      bad('parties: expected {id, features, role, rowScaling} each');
  const c = o.combination as Combination;
  if (c?.kind !== 'sum' && c?.kind !== 'one-shot') bad("combination: expected kind 'sum' or 'one-shot'");
  if (c.kind === 'one-shot') {
    if (!Number.isFinite(c.intercept)) bad('combination.intercept: expected a number');
    for (const p of parties) if (p.id !== c.activeParty && !Number.isFinite(c.weights?.[p.id])) bad(`combination.weights: no weight for passive party ${p.id}`);
  }
  return o as unknown as JobDescription;
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
