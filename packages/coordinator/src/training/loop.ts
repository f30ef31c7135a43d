/**
 * What every training algorithm has in common: one context in, one result out. The result says
 * which algorithm ran and carries only what that algorithm has (residuals and rho for ADMM,
 * the combination for one-shot), so nothing downstream reads a placeholder.
 */
import type { Logger } from 'pino';
import { InternalError } from '@admm-share/core';
import type { StopReason } from '@admm-share/protocol';
import type { Traffic } from '../bytes.js';
import type { CoordinatorConfig } from '../config.js';
import type { Parties } from '../connections/parties.js';
import type { Job, Participation } from '../job/job.js';
import type { OneShotReport } from '../output/one-shot-report.js';
import type { TestMetrics } from '../output/test-metrics.js';
import type { TraceLine } from '../output/trace.js';

/** What a training loop works with: the job, its parties and where its trace goes. */
export interface LoopContext {
  cfg: CoordinatorConfig;
  job: Job;
  parties: Parties;
  log: Logger;
  traffic: Traffic;
  /** The job's identity in a checkpoint (ADMM writes them). */
  labelsDigest: string;
  /** Each round's trace line, as it is written (the job's monitor). */
  onTrace?: (line: TraceLine) => void;
}

/** How training ended, whichever the algorithm: for the `done` message and the summary. */
interface Ended {
  reason: StopReason;
  /** Rounds whose model the job keeps (SGD: epochs; one-shot: 1). */
  rounds: number;
  objective: number;
  metrics: TestMetrics | undefined;
  trainingSeconds: number;
  epsilonSpent: Record<string, number>;
}

export interface AdmmResult extends Ended {
  algorithm: 'admm';
  residuals: { primal: number; dual: number };
  rho: { initial: number; final: number };
  /** Anderson acceleration: extrapolated points kept and rejected (absent without it). */
  acceleration?: { memory: number; extrapolated: number; rejected: number };
}

export interface OneShotResult extends Ended {
  algorithm: 'one-shot';
  oneShot: OneShotReport;
}

export interface SgdResult extends Ended {
  algorithm: 'sgd';
}

export type TrainResult = AdmmResult | OneShotResult | SgdResult;

/** A training algorithm, made from its context: `run` trains to the end (the rounds the parties' budgets allow). */
export interface TrainingLoop {
  run(participation: Participation): Promise<TrainResult>;
}

/**
 * The coordinator never sends a non-finite value: every party would refuse it (4003) and be
 * blamed for a failure that is the coordinator's. Throws an InternalError naming the round.
 */
export function assertFinite(where: string, name: string, v: Float64Array): void {
  for (let i = 0; i < v.length; i++)
    if (!Number.isFinite(v[i])) throw new InternalError(`in ${where}`, `the coordinator's update produced ${name}[${i}] = ${v[i]}; nothing was sent`);
}
