/** The training loop of each algorithm: the coordinator picks one from this table. */
import type { AlgorithmName } from '@admm-share/protocol';
import type { Checkpoint } from '../output/checkpoint.js';
import { AdmmLoop } from './admm-loop.js';
import type { LoopContext, TrainingLoop } from './loop.js';
import { runOneShot } from './one-shot-loop.js';
import { runSgd } from './sgd-loop.js';

/** Each algorithm's loop; only ADMM continues from a checkpoint. */
export const LOOPS: { readonly [A in AlgorithmName]: (ctx: LoopContext, from?: Checkpoint) => TrainingLoop } = {
  admm: (ctx, from) => new AdmmLoop(ctx, from),
  'one-shot': (ctx) => ({ run: (participation) => runOneShot(ctx, participation) }),
  sgd: (ctx) => ({ run: (participation) => runSgd(ctx, participation) }),
};
