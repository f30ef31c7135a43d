// A worker thread of the coordinator's step (split-worker.ts): the upper part of each pass.
import { workerData } from 'node:worker_threads';
import { type HalvesInit, serveHalf } from './anderson-halves.js';
import { type StepInit, serveStep } from './step-split.js';

const init = workerData as HalvesInit | StepInit;
if (init.kind === 'anderson') serveHalf(init);
else serveStep(init);
