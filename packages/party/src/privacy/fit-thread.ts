// The active party's one-shot fit, run off the main thread (see fitInThread): on a large block
// it takes tens of seconds, during which the main thread keeps answering the coordinator's
// heartbeats.
import { parentPort, workerData } from 'node:worker_threads';
import { trainingLoss } from '@admm-share/core';
import { type FitInput, fitActive } from './release.js';

const input = workerData as FitInput;
parentPort!.postMessage(fitActive(input.D, input.y, input.releases, trainingLoss(input.loss, input.labelFlip, input.classWeights), input.lambda, input.labelFlip));
