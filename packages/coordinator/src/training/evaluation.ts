/**
 * Test-set evaluation, shared by both loops: every party scores its aligned test rows with
 * its current model, the coordinator sums the scores and computes the metrics.
 */
import type { Job } from '../job/job.js';
import type { Parties } from '../connections/parties.js';
import { type TestMetrics, testMetrics } from '../output/test-metrics.js';

/** A job's last evaluated test scores: each party's part, in job order (their sum plus `base` is the combined score). */
export interface EvaluatedParts {
  parties: string[];
  parts: Float64Array[];
  /** What the coordinator adds itself (the one-shot intercept without an active party); undefined: nothing. */
  base?: Float64Array;
}

// Kept beside the job rather than in each loop's result: the model report at the end of a job
// (job/report-of.ts) reads the last evaluation's parts, whichever loop made them.
const lastParts = new WeakMap<Job, EvaluatedParts>();

/** Record the parts of the job's latest test scores (evaluate does; the one-shot loop calls it with its own). */
export function recordTestParts(job: Job, parts: EvaluatedParts): void {
  lastParts.set(job, parts);
}

/** The parts of the job's last evaluation, if it evaluated. */
export function lastTestParts(job: Job): EvaluatedParts | undefined {
  return lastParts.get(job);
}

export async function evaluate(job: Job, parties: Parties, round: number): Promise<TestMetrics> {
  const yTest = job.yTest;
  if (!yTest) throw new Error('internal: evaluate in a job without test labels');
  const msg = { type: 'evaluate', jobId: job.jobId, round } as const;
  const replies = await Promise.all(parties.requestAll(msg, ['scores'], () => ({ jobId: job.jobId, nTest: job.nTest, round })));
  const total = new Float64Array(job.nTest);
  for (const r of replies) for (let i = 0; i < total.length; i++) total[i] += r.scores[i];
  // Copied: a decoded vector may be a view of a frame buffer that a later message reuses.
  recordTestParts(job, { parties: parties.list.map((p) => p.id), parts: replies.map((r) => Float64Array.from(r.scores)) });
  return testMetrics(job.setup.loss, total, yTest);
}

/** Whether round t evaluates: the last round always, and every `every` rounds if set. */
export function evaluatesAt(job: Job, t: number, final: boolean, every: number): boolean {
  return job.yTest !== undefined && (final || (every > 0 && t % every === 0));
}
