// A second thread for the coordinator's step. The parties wait while the coordinator steps, so
// on a machine with two cores or more the step's passes over every sample can be split: the
// main thread runs the lower part of a pass and a worker thread the upper part, on shared
// memory. They meet with Atomics.wait and notify, so the step stays synchronous. Two users:
// the z-update's passes (admm.ts, StepSplit) and Anderson acceleration's (anderson-halves.ts).
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { InternalError } from '@admm-share/core';

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

/**
 * control[STATE]: IDLE, a job (>= 1), DONE, EXIT or FAILED; control[READY] is 1 once the worker
 * waits for work; control[MESSAGE_BYTES] is the length of a failure's message in `message`.
 */
const STATE = 0;
const READY = 1;
const MESSAGE_BYTES = 2;
const IDLE = 0;
const DONE = -1;
const EXIT = -2;
const FAILED = -3;
const MESSAGE_CAPACITY = 1024;

/** How long the main thread waits for the worker's part of a pass before it gives up. */
const WORKER_TIMEOUT_MS = 60_000;

/** What every split worker is given, besides its user's arrays: which user it serves. */
export interface SplitInit {
  kind: 'anderson' | 'step';
  control: Int32Array;
  /** A failure's message (UTF-8), for the main thread to throw. */
  message: Uint8Array;
}

export function sharedArray<T>(C: { new (b: SharedArrayBuffer): T; BYTES_PER_ELEMENT: number }, n: number): T {
  return new C(new SharedArrayBuffer(n * C.BYTES_PER_ELEMENT));
}

/** The main thread's end: `run` a job, the worker's part beside the caller's own. */
export class SplitWorker {
  private readonly worker: Worker;
  /** Why the worker ended, if it did: every later run throws it. */
  private failure: Error | undefined;

  constructor(private readonly init: SplitInit) {
    this.worker = new Worker(new URL('./split-thread.js', import.meta.url), { workerData: init });
    // Its errors are reported through shared memory (reportFailure); one that escapes that is kept here, not thrown.
    this.worker.on('error', (err) => (this.failure ??= err));
    // It never holds the process open; close() ends it with the job.
    this.worker.unref();
  }

  /** What a new worker's init needs besides its user's arrays. */
  static shared(): Pick<SplitInit, 'control' | 'message'> {
    return { control: sharedArray(Int32Array, 3), message: sharedArray(Uint8Array, MESSAGE_CAPACITY) };
  }

  /** Start `job` in the worker, run `mine` here, and return once both are done. */
  run(job: number, mine: () => void): void {
    const { control } = this.init;
    const deadline = performance.now() + WORKER_TIMEOUT_MS;
    const check = () => {
      if (Atomics.load(control, STATE) === FAILED) this.failure ??= new Error(Buffer.from(this.init.message.slice(0, Atomics.load(control, MESSAGE_BYTES))).toString());
      if (this.failure) throw new InternalError(`in the coordinator's ${this.init.kind} worker thread`, this.failure);
      if (performance.now() > deadline) throw new InternalError(`in the coordinator's ${this.init.kind} worker thread`, `no answer within ${WORKER_TIMEOUT_MS / 1000} s`);
    };
    check();
    while (Atomics.load(control, READY) === 0) {
      Atomics.wait(control, READY, 0, 1000);
      check();
    }
    Atomics.store(control, STATE, job);
    Atomics.notify(control, STATE);
    mine();
    for (let state: number; (state = Atomics.load(control, STATE)) !== DONE; ) {
      if (state === FAILED) check();
      Atomics.wait(control, STATE, state, 1000);
      check();
    }
    Atomics.store(control, STATE, IDLE);
  }

  close(): void {
    Atomics.store(this.init.control, STATE, EXIT);
    Atomics.notify(this.init.control, STATE);
    void this.worker.terminate();
  }
}

/** In the worker: hand `err` to the main thread, which throws it from the run it waits in (or the next). */
export function reportFailure(init: Pick<SplitInit, 'control' | 'message'>, err: unknown): void {
  const text = Buffer.from(err instanceof Error ? err.message : String(err)).subarray(0, MESSAGE_CAPACITY);
  init.message.set(text);
  Atomics.store(init.control, MESSAGE_BYTES, text.length);
  Atomics.store(init.control, STATE, FAILED);
  Atomics.notify(init.control, STATE);
  Atomics.notify(init.control, READY);
}

/** The worker's loop: `handle` each job asked for, until told to exit (a job that throws ends it, reported). */
export function serveSplit(control: Int32Array, handle: (job: number) => void): void {
  Atomics.store(control, READY, 1);
  Atomics.notify(control, READY);
  for (;;) {
    let job: number;
    while ((job = Atomics.load(control, STATE)) === IDLE || job === DONE) Atomics.wait(control, STATE, job);
    if (job === EXIT || job === FAILED) return;
    handle(job);
    Atomics.store(control, STATE, DONE);
    Atomics.notify(control, STATE);
  }
}
