import type { Worker } from 'node:worker_threads';

/**
 * A worker thread that answers with one message and exits: that message (none if it exited
 * without one, e.g. terminated) and its exit code. Rejects with the worker's uncaught error.
 */
export function oneAnswer<T>(worker: Worker): Promise<{ message: T | undefined; code: number }> {
  return new Promise((resolve, reject) => {
    let message: T | undefined;
    worker.once('message', (m: T) => (message = m));
    worker.once('error', reject);
    worker.once('exit', (code) => resolve({ message, code }));
  });
}
