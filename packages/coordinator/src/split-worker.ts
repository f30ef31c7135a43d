// A second thread for the coordinator's step. The parties wait while the coordinator steps, so
// on a machine with two cores or more the step's passes over every sample can be split: the
// main thread runs the lower part of a pass and a worker thread the upper part, on shared
// memory. They meet with Atomics.wait and notify, so the step stays synchronous. Two users:
// the z-update's passes (admm.ts, StepSplit) and Anderson acceleration's (anderson-halves.ts).
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * The length of the state, (M + 2) N values, from which the step's passes are split: a9a's
 * 130k values (N = 32,561, two parties) are split, the tests' few thousand are not. The passes
 * are bound by memory traffic and the exponentials of the z-update; below this length the
 * hand-over (a wake-up and a wait on shared memory, tens of microseconds) is not worth a
 * thread. On a single core nothing is split.
 */
export const SPLIT_FROM = 1 << 16;

/** Whether a state of `length` values is split by default on this machine. */
export function splitByDefault(length: number): boolean {
  return length >= SPLIT_FROM && availableParallelism() > 1;
}

/** control[STATE]: IDLE, a job (>= 1), DONE or EXIT; control[READY] is 1 once the worker waits for work. */
const STATE = 0;
const READY = 1;
const IDLE = 0;
const DONE = -1;
const EXIT = -2;

/** How long the main thread waits for the worker's part of a pass before it gives up. */
const WORKER_TIMEOUT_MS = 60_000;

/** What every split worker is given, besides its user's arrays: which user it serves. */
export interface SplitInit {
  kind: 'anderson' | 'step';
  control: Int32Array;
}

export function sharedArray<T>(C: { new (b: SharedArrayBuffer): T; BYTES_PER_ELEMENT: number }, n: number): T {
  return new C(new SharedArrayBuffer(n * C.BYTES_PER_ELEMENT));
}

/** The main thread's end: `run` a job, the worker's part beside the caller's own. */
export class SplitWorker {
  private readonly worker: Worker;

  constructor(private readonly init: SplitInit) {
    this.worker = new Worker(new URL('./split-thread.js', import.meta.url), { workerData: init });
    // It never holds the process open; close() ends it with the job.
    this.worker.unref();
  }

  static control(): Int32Array {
    return sharedArray(Int32Array, 2);
  }

  /** Start `job` in the worker, run `mine` here, and return once both are done. */
  run(job: number, mine: () => void): void {
    const { control } = this.init;
    const deadline = performance.now() + WORKER_TIMEOUT_MS;
    const late = () => {
      if (performance.now() > deadline) throw new Error(`the coordinator's ${this.init.kind} worker thread did not answer within ${WORKER_TIMEOUT_MS / 1000} s`);
    };
    while (Atomics.load(control, READY) === 0) if (Atomics.wait(control, READY, 0, 1000) === 'timed-out') late();
    Atomics.store(control, STATE, job);
    Atomics.notify(control, STATE);
    mine();
    while (Atomics.load(control, STATE) !== DONE) if (Atomics.wait(control, STATE, job, 1000) === 'timed-out') late();
    Atomics.store(control, STATE, IDLE);
  }

  close(): void {
    Atomics.store(this.init.control, STATE, EXIT);
    Atomics.notify(this.init.control, STATE);
    void this.worker.terminate();
  }
}

/** The worker's loop: `handle` each job asked for, until told to exit. */
export function serveSplit(control: Int32Array, handle: (job: number) => void): void {
  Atomics.store(control, READY, 1);
  Atomics.notify(control, READY);
  for (;;) {
    let job: number;
    while ((job = Atomics.load(control, STATE)) === IDLE || job === DONE) Atomics.wait(control, STATE, job);
    if (job === EXIT) return;
    handle(job);
    Atomics.store(control, STATE, DONE);
    Atomics.notify(control, STATE);
  }
}
