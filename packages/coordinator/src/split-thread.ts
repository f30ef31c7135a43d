// A worker thread of the coordinator's step (split-worker.ts): the upper part of each pass.
import { workerData } from 'node:worker_threads';
import { type HalvesInit, serveHalf } from './anderson-halves.js';
import { reportFailure } from './split-worker.js';
import { type StepInit, serveStep } from './step-split.js';

const init = workerData as HalvesInit | StepInit;
try {
  if (init.kind === 'anderson') serveHalf(init);
  else serveStep(init);
} catch (err) {
  // The main thread throws it from the step it waits in.
  reportFailure(init, err);
}
