// The coordinator step's passes shared with a worker thread (admm-step.ts): both threads take the
// step's chunks (chunks.ts, claimChunks) until none is left. The same thread takes
// Anderson acceleration's chunks (anderson-team.ts) right after the step's.
import { type ClassWeights, type Loss, type LossName, type ThreadTeam, sharedArray, trainingLoss, vectorKernels } from '@admm-share/core/team';
import { type StepArrays, type StepParams, lossChunks, stepChunks, unpackChunks } from './admm-kernels.js';
import { type AndersonTeamInit, andersonCalls } from './anderson-team.js';
import { type TeamData, runShared, stepThreadTeam } from './chunks.js';

const STEP = 1;
const UNPACK = 2;
/** The loss at the step's sum (Anderson's ops are 3 and 4). */
const LOSS = 5;

/** The loss by what makes it again (core's trainingLoss). */
export interface StepLoss {
  name: LossName;
  labelFlip: number;
  classWeights: ClassWeights | undefined;
}

/** What the worker thread is given: the arrays (in shared memory) and the loss by name, to make it again there. */
export interface StepInit extends TeamData {
  kind: 'step';
  arrays: StepArrays;
  loss: StepLoss;
  /** exact (1 or 0), rho, alpha, weight: set before each step. */
  params: Float64Array;
  /** The next chunk to take, and each chunk's sums (stepChunks). */
  next: Int32Array;
  sums: Float64Array;
  /** Each chunk's check of the parties' vectors (unpackChunks). */
  checks: Float64Array;
  /** The loss's own next chunk and each chunk's sum (lossChunks): it runs while the main thread does other work. */
  lossNext: Int32Array;
  lossSums: Float64Array;
  /** Anderson acceleration's arrays, when its passes run in this thread too (ops 3 and 4). */
  anderson: AndersonTeamInit | undefined;
}

export class StepTeam {
  private readonly init: StepInit;
  private readonly team: ThreadTeam;

  constructor(
    arrays: StepArrays,
    loss: StepLoss,
    shared: Pick<StepInit, 'next' | 'sums' | 'checks' | 'lossNext' | 'lossSums'>,
    anderson: AndersonTeamInit | undefined,
  ) {
    this.init = { kind: 'step', arrays, loss, params: sharedArray(Float64Array, 4), ...shared, anderson };
    this.team = stepThreadTeam(this.init);
  }

  /** The worker thread, for Anderson's passes (Anderson.useTeam). */
  get thread(): ThreadTeam {
    return this.team;
  }

  /** The step's chunks in both threads: `mine` takes them here. */
  step(p: StepParams, mine: () => void): void {
    const { params } = this.init;
    params[0] = p.exact ? 1 : 0;
    params[1] = p.rho;
    params[2] = p.alpha;
    params[3] = p.weight;
    runShared(this.team, STEP, mine);
  }

  unpack(mine: () => void): void {
    runShared(this.team, UNPACK, mine);
  }

  /**
   * The worker thread begins the loss's chunks (lossNext must be 0) and the caller goes on with
   * other work; finishLoss takes the chunks left, and returns once the worker is done. No other
   * call may come between them.
   */
  beginLoss(): void {
    this.team.begin(LOSS);
  }

  finishLoss(mine: () => void): void {
    mine();
    this.team.waitOrSkip();
  }

  close(): void {
    void this.team.close();
  }
}

/** The worker thread's side: the chunks it takes of each pass asked for, Anderson's too. */
export function stepCalls(init: StepInit): (job: number) => void {
  const { arrays, params, next, sums, checks, lossNext, lossSums } = init;
  const loss = trainingLoss(init.loss.name, init.loss.labelFlip, init.loss.classWeights) as Loss | undefined;
  if (!loss) throw new Error(`no loss named '${init.loss.name}' to make again in the worker thread`);
  const anderson = init.anderson && andersonCalls(init.anderson);
  const k = arrays.memory && vectorKernels(arrays.memory);
  return (job) => {
    if (job === STEP) stepChunks(arrays, loss, { exact: params[0] === 1, rho: params[1], alpha: params[2], weight: params[3] }, next, sums, k);
    else if (job === UNPACK) unpackChunks(arrays, next, checks);
    else if (job === LOSS) lossChunks(arrays, loss, lossNext, lossSums, k);
    else anderson?.(job);
  };
}
