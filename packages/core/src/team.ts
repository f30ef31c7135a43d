// What a team thread's entry script and the modules it loads need from core (the coordinator's
// step thread, step-thread.ts): the team, the errors, the vector kernels and the losses, without
// the rest of the index. Through the index a thread loaded 155 modules, 95 of them zod's (for the
// files on disk, which no thread reads), against 48 before zod came in: the step thread starts
// as training starts, so its loading ran beside the first rounds on the same cores.
export { InternalError } from './errors.js';
export { type TeamThreadData, ThreadTeam, serveTeam } from './threads/thread-team.js';
export { type VectorKernels, type VectorMemory, vectorKernels } from './kernels/wasm-kernels.js';
export { sharedArray } from './linalg/dense.js';
export { type ClassWeights, type Loss, type LossName, flipCorrection, logisticProxParams, trainingLoss } from './model/losses.js';
