/**
 * Test-set evaluation, shared by both loops: every party scores its aligned test rows with
 * its current model, the coordinator sums the scores and computes the metrics.
 */
import type { Job } from '../job/job.js';
import type { Parties } from '../connections/parties.js';
import { type TestMetrics, testMetrics } from '../output/test-metrics.js';

export async function evaluate(job: Job, parties: Parties, round: number): Promise<TestMetrics> {
  const yTest = job.yTest;
  if (!yTest) throw new Error('internal: evaluate in a job without test labels');
  const msg = { type: 'evaluate', jobId: job.jobId, round } as const;
  const replies = await Promise.all(parties.requestAll(msg, ['scores'], () => ({ jobId: job.jobId, nTest: job.nTest, round })));
  const total = new Float64Array(job.nTest);
  for (const r of replies) for (let i = 0; i < total.length; i++) total[i] += r.scores[i];
  return testMetrics(job.setup.loss, total, yTest);
}

/** Whether round t evaluates: the last round always, and every `every` rounds if set. */
export function evaluatesAt(job: Job, t: number, final: boolean, every: number): boolean {
  return job.yTest !== undefined && (final || (every > 0 && t % every === 0));
}
