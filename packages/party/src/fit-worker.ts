// The active party's one-shot fit, run off the main thread (see fitInWorker): on a large block
// it takes tens of seconds, during which the main thread keeps answering the coordinator's
// heartbeats.
import { parentPort, workerData } from 'node:worker_threads';
import { lossByName } from '@admm-share/core';
import { type FitInput, fitActive } from './release.js';

const input = workerData as FitInput;
parentPort!.postMessage(fitActive(input.D, input.y, input.releases, lossByName(input.loss), input.lambda));
