// The Cholesky factorisation of a large x-update (RidgeXUpdate.factorInWorker), run off the
// main thread: forming the Gram matrix and factoring it takes seconds on a block of a few
// thousand columns, during which the main thread keeps answering the coordinator's heartbeats.
import { parentPort, workerData } from 'node:worker_threads';
import { ConfigError } from '@admm-share/core';
import { type FactorInput, factorSystem } from './xupdate.js';

try {
  // The factor is formed in the caller's shared memory (FactorInput.into): only `true` crosses back.
  factorSystem(workerData as FactorInput);
  parentPort!.postMessage(true);
} catch (err) {
  // A system that is not positive definite is the data's (a ConfigError); it crosses the
  // thread as its message. Anything else is a bug and crashes the worker.
  if (!(err instanceof ConfigError)) throw err;
  parentPort!.postMessage({ error: err.message });
}
