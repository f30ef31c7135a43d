// The coordinator step's passes over the samples in two parts (admm.ts): the main thread takes
// the samples [0, split) and a worker thread (split-worker.ts) the samples [split, N).
import { type Loss, type LossName, type ThreadTeam, sharedArray, trainingLoss } from '@admm-share/core';
import { STEP_SUMS, type StepArrays, type StepParams, stepRange, unpackRange } from './admm-kernels.js';
import { type SplitData, runSplit, splitTeam } from './split-worker.js';

const STEP = 1;
const UNPACK = 2;

/** What the worker thread is given: the arrays (in shared memory) and the loss by name, to make it again there. */
export interface StepInit extends SplitData {
  kind: 'step';
  arrays: StepArrays;
  loss: { name: LossName; labelFlip: number };
  /** exact (1 or 0), rho, alpha, weight: set before each step. */
  params: Float64Array;
  sums: Float64Array;
  from: number;
  to: number;
}

export class StepSplit {
  private readonly init: StepInit;
  private readonly team: ThreadTeam;

  constructor(arrays: StepArrays, loss: { name: LossName; labelFlip: number }) {
    const n = arrays.sum.length;
    this.init = { kind: 'step', arrays, loss, params: sharedArray(Float64Array, 4), sums: sharedArray(Float64Array, STEP_SUMS), from: n >> 1, to: n };
    this.team = splitTeam(this.init);
  }

  /** Where the main thread's samples end and the worker's begin. */
  get split(): number {
    return this.init.from;
  }

  /** The worker's sums of its samples in the last step. */
  get sums(): Float64Array {
    return this.init.sums;
  }

  step(p: StepParams, mine: () => void): void {
    const { params } = this.init;
    params[0] = p.exact ? 1 : 0;
    params[1] = p.rho;
    params[2] = p.alpha;
    params[3] = p.weight;
    runSplit(this.team, STEP, mine);
  }

  unpack(mine: () => void): void {
    runSplit(this.team, UNPACK, mine);
  }

  close(): void {
    void this.team.close();
  }
}

/** The worker thread's side: its samples of each pass asked for. */
export function stepCalls(init: StepInit): (job: number) => void {
  const { arrays, params, sums, from, to } = init;
  const loss = trainingLoss(init.loss.name, init.loss.labelFlip) as Loss | undefined;
  if (!loss) throw new Error(`no loss named '${init.loss.name}' to make again in the worker thread`);
  return (job) => {
    if (job === STEP) stepRange(arrays, loss, { exact: params[0] === 1, rho: params[1], alpha: params[2], weight: params[3] }, from, to, sums);
    else if (job === UNPACK) unpackRange(arrays, from, to);
  };
}
