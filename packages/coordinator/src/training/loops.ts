/** The training loop of each algorithm: the coordinator picks one from this table. */
import { PeerError } from '@admm-share/core';
import type { AlgorithmName } from '@admm-share/protocol';
import type { Checkpoint } from '../output/checkpoint.js';
import { AdmmLoop } from './admm-loop.js';
import type { LoopContext, TrainingLoop } from './loop.js';
import { runOneShot } from './one-shot-loop.js';
import { runSgd } from './sgd-loop.js';

/** Each algorithm's loop; only ADMM continues from a checkpoint. */
export const LOOPS: { readonly [A in AlgorithmName]: (ctx: LoopContext, from?: Checkpoint) => TrainingLoop } = {
  admm: (ctx, from) => new AdmmLoop(ctx, from),
  'one-shot': (ctx) => ({
    lossPolicy: 'may-rejoin',
    run: (participation) => runOneShot(ctx, participation),
    // A one-shot party is brought back by the request it has not answered (release or fit).
    resumeFor: () => undefined,
  }),
  sgd: (ctx) => ({
    // An SGD party's coefficients live only in its process: losing one ends the job.
    lossPolicy: 'fatal',
    run: (participation) => runSgd(ctx, participation),
    resumeFor: (p) => {
      throw new PeerError(`party ${p.id} cannot rejoin an SGD job`);
    },
  }),
};
