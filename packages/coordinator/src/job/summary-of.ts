/**
 * A finished job's summary (output/summary.ts declares it), from what the job knows: its
 * configuration, the job, the training loop's result, who took part and what moved.
 */
import { describeClassWeights } from '@admm-share/core';
import { peakMemoryBytes } from '@admm-share/runtime';
import type { Classes } from '@admm-share/protocol';
import { type Traffic, trafficSince } from '../bytes.js';
import type { CoordinatorConfig } from '../config.js';
import { type AlignmentReport, type Summary, RESEARCH_MODE } from '../output/summary.js';
import type { TrainResult } from '../training/loop.js';
import type { Job, Participation } from './job.js';

export interface SummaryInput {
  cfg: CoordinatorConfig;
  job: Job;
  result: TrainResult;
  participation: Participation;
  parties: readonly { id: string; features: number; fileRows: { train: number; test: number } }[];
  traffic: Traffic;
  setupSeconds: number;
  totalSeconds: number;
  alignment: AlignmentReport;
  classes: Classes | null;
}

export function buildSummary({ cfg, job, result: r, participation, parties, traffic, setupSeconds, totalSeconds, alignment, classes }: SummaryInput): Summary {
  return {
    jobId: job.jobId,
    algorithm: job.setup.algorithm,
    variant: cfg.variant,
    loss: job.setup.loss,
    lambda: job.setup.lambda,
    rho: r.algorithm === 'admm' ? r.rho : { initial: 0, final: 0 },
    alpha: cfg.variant === 'exact' ? cfg.alpha : 1,
    ...(r.algorithm === 'sgd' ? { sgd: cfg.sgd } : {}),
    ...(r.algorithm === 'admm' && r.acceleration ? { acceleration: { method: 'anderson' as const, ...r.acceleration } } : {}),
    rounds: r.rounds,
    reason: r.reason,
    converged: r.reason === 'converged',
    objective: r.objective,
    objectiveFrom: participation.noisy && r.algorithm !== 'one-shot' ? 'noisy shares' : 'shares',
    residuals: r.algorithm === 'admm' ? r.residuals : null,
    ...(r.metrics ? { test: r.metrics } : {}),
    ...(job.testSelection ? { testSelection: job.testSelection } : {}),
    ...(job.evaluationSkipped ? { evaluation: { skipped: job.evaluationSkipped } } : {}),
    seconds: { total: totalSeconds, setup: setupSeconds, training: r.trainingSeconds, perRound: r.trainingSeconds / Math.max(r.rounds, 1) },
    bytes: trafficSince(traffic),
    parties: parties.map((p) => ({ id: p.id, features: p.features, rows: p.fileRows.train, testRows: p.fileRows.test })),
    rows: { train: job.n, test: job.nTest },
    droppedRows: job.dropped.train,
    droppedTestRows: job.dropped.test,
    alignment,
    classes,
    privacy: participation.privacy.map((q) => ({ ...q, epsilonSpent: r.epsilonSpent[q.party] ?? 0 })),
    labelPrivacy: job.labelPrivacy,
    ...(job.setup.classWeights && classes ? { classWeights: { mode: cfg.classWeight?.kind ?? 'explicit', ...describeClassWeights(job.setup.classWeights, classes) } } : {}),
    ...(r.algorithm === 'one-shot' ? { oneShot: r.oneShot } : {}),
    ...(participation.noisy && r.algorithm === 'admm' ? { research: RESEARCH_MODE } : {}),
    peakMemoryBytes: peakMemoryBytes(),
  };
}
