/**
 * What every training algorithm has in common: one context in, one result out. The result says
 * which algorithm ran and carries only what that algorithm has (residuals and rho for ADMM,
 * the combination for one-shot), so nothing downstream reads a placeholder.
 */
import type { Logger } from 'pino';
import { InternalError } from '@admm-share/core';
import type { Done, Resume, StopReason } from '@admm-share/protocol';
import type { Traffic } from '../bytes.js';
import type { CoordinatorConfig } from '../config.js';
import type { LossPolicy, Parties } from '../connections/parties.js';
import type { PartyConnection } from '../connections/party-connection.js';
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
  /** What the `done` message says of the algorithm: ADMM's variant and final rho; the other algorithms' name and rho 0. */
  params: Pick<Done['params'], 'variant' | 'rho'>;
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
  /** What losing a party's connection during training means: the job fails, or the party may rejoin. */
  readonly lossPolicy: LossPolicy;
  run(participation: Participation): Promise<TrainResult>;
  /**
   * What a party that rejoins during training is sent after its ready, before the requests it
   * has not answered: undefined when those requests alone bring it back. Throws when the
   * algorithm cannot take a rejoining party. `atMost`: once training has ended, the rounds of
   * the model the job keeps.
   */
  resumeFor(party: PartyConnection, atMost?: number): Resume | undefined;
  /** The loops whose state a stop checkpoints and --resume continues (ADMM); absent for the others. */
  readonly resumable?: Resumable;
}

/** A loop that checkpoints: what a stop during training needs. */
export interface Resumable {
  /** The last completed round (0 before the first). */
  readonly completedRound: number;
  /** Queue the checkpoint of the last completed round. */
  checkpoint(): void;
  /** Wait until every checkpoint queued so far is on disk. */
  flushCheckpoints(): Promise<void>;
}

/**
 * The coordinator never sends a non-finite value: every party would refuse it (4003) and be
 * blamed for a failure that is the coordinator's. Throws an InternalError naming the round.
 */
export function assertFinite(where: string, name: string, v: Float64Array): void {
  for (let i = 0; i < v.length; i++)
    if (!Number.isFinite(v[i])) throw new InternalError(`in ${where}`, `the coordinator's update produced ${name}[${i}] = ${v[i]}; nothing was sent`);
}
