// The Cholesky factorisation of a large x-update (RidgeXUpdate.factorInWorker), run off the
// main thread: forming the Gram matrix and factoring it takes seconds on a block of a few
// thousand columns, during which the main thread keeps answering the coordinator's heartbeats.
import { parentPort, workerData } from 'node:worker_threads';
import { type FactorInput, factorSystem } from './xupdate.js';

const factor = factorSystem(workerData as FactorInput);
parentPort!.postMessage(factor, [factor.buffer as ArrayBuffer]);
