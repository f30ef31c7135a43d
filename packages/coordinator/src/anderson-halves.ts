// Anderson acceleration's passes in two halves (anderson.ts): the main thread runs the lower
// half of each pass and a worker thread (anderson-worker.ts, serveHalf) the upper half, on
// shared memory. They meet with Atomics.wait and notify, so a call stays synchronous.
import { Worker } from 'node:worker_threads';
import { ROW, firstPass, nextPoint } from './anderson-kernels.js';

/** The arrays both threads work on, in shared memory. */
export interface SharedState {
  f: Float64Array;
  point: Float64Array;
  prevF: Float64Array;
  prevG: Float64Array;
  dF: Float32Array[];
  dG: Float32Array[];
}

/** What the main thread asks of the worker (control[STATE]); control[READY] is 1 once it waits for work. */
const STATE = 0;
const READY = 1;
const IDLE = 0;
const FIRST_PASS = 1;
const NEXT_POINT = 2;
const DONE = 3;
const EXIT = 4;

/** What the worker thread is given. */
export interface HalvesInit extends SharedState {
  control: Int32Array;
  /** [slot, kept count, kept slots..., difference count, difference slots...] (2 * memory + 3 entries). */
  slots: Int32Array;
  gamma: Float64Array;
  sums: Float64Array;
  from: number;
  to: number;
}

/** How long the main thread waits for the worker's half of a pass before it gives up. */
const WORKER_TIMEOUT_MS = 60_000;

/**
 * A worker thread that does the upper half [split, dim) of each pass while the main thread does
 * the lower half. The two meet on shared memory (Atomics.wait and notify): `next` stays
 * synchronous. The worker's sums are added after the main thread's, always in that order.
 */
export class Halves {
  private readonly init: HalvesInit;
  private readonly worker: Worker;

  constructor(state: SharedState) {
    const dim = state.f.length;
    const memory = state.dF.length;
    // An even split keeps the two-at-a-time loops aligned as in one pass.
    const split = Math.floor(dim / 4) * 2;
    const shared = <T>(C: { new (b: SharedArrayBuffer): T; BYTES_PER_ELEMENT: number }, n: number) => new C(new SharedArrayBuffer(n * C.BYTES_PER_ELEMENT));
    this.init = { ...state, control: shared(Int32Array, 2), slots: shared(Int32Array, 2 * memory + 3), gamma: shared(Float64Array, memory), sums: shared(Float64Array, ROW + memory), from: split, to: dim };
    this.worker = new Worker(new URL('./anderson-worker.js', import.meta.url), { workerData: this.init });
    // It never holds the process open; close() ends it with the job.
    this.worker.unref();
  }

  /** Where the main thread's half ends and the worker's begins. */
  get split(): number {
    return this.init.from;
  }

  /** The worker's sums of its half of the last first pass. */
  get sums(): Float64Array {
    return this.init.sums;
  }

  firstPass(slot: number, keep: readonly number[], mine: () => void): void {
    const { slots } = this.init;
    slots[0] = slot;
    slots[1] = keep.length;
    keep.forEach((j, k) => (slots[2 + k] = j));
    this.run(FIRST_PASS, mine);
  }

  nextPoint(order: readonly number[], gamma: Float64Array | undefined, mine: () => void): void {
    const { slots } = this.init;
    const at = 2 + this.init.dF.length;
    slots[at] = order.length;
    order.forEach((j, k) => (slots[at + 1 + k] = j));
    if (gamma) this.init.gamma.set(gamma);
    this.run(NEXT_POINT, mine);
  }

  close(): void {
    Atomics.store(this.init.control, STATE, EXIT);
    Atomics.notify(this.init.control, STATE);
    void this.worker.terminate();
  }

  private run(job: number, mine: () => void): void {
    const { control } = this.init;
    const deadline = performance.now() + WORKER_TIMEOUT_MS;
    const late = () => {
      if (performance.now() > deadline) throw new Error(`Anderson acceleration's worker thread did not answer within ${WORKER_TIMEOUT_MS / 1000} s`);
    };
    while (Atomics.load(control, READY) === 0) if (Atomics.wait(control, READY, 0, 1000) === 'timed-out') late();
    Atomics.store(control, STATE, job);
    Atomics.notify(control, STATE);
    mine();
    while (Atomics.load(control, STATE) !== DONE) if (Atomics.wait(control, STATE, job, 1000) === 'timed-out') late();
    Atomics.store(control, STATE, IDLE);
  }
}

/** The worker thread's loop (anderson-worker.ts): the upper half of each pass asked for, until told to exit. */
export function serveHalf(init: HalvesInit): void {
  const { control, slots, gamma, sums, f, point, prevF, prevG, dF, dG, from, to } = init;
  const at = 2 + dF.length;
  Atomics.store(control, READY, 1);
  Atomics.notify(control, READY);
  for (;;) {
    let job: number;
    while ((job = Atomics.load(control, STATE)) === IDLE || job === DONE) Atomics.wait(control, STATE, job);
    if (job === EXIT) return;
    if (job === FIRST_PASS) {
      const slot = slots[0];
      const kept = Array.from({ length: slots[1] }, (_, k) => dG[slots[2 + k]]);
      firstPass(f, point, prevF, prevG, slot >= 0 ? dF[slot] : undefined, slot >= 0 ? dG[slot] : undefined, kept, from, to, sums);
    } else if (job === NEXT_POINT) {
      const ds = Array.from({ length: slots[at] }, (_, k) => dF[slots[at + 1 + k]]);
      nextPoint(point, prevF, prevG, f, ds, ds.length > 0 ? gamma : undefined, from, to);
    }
    Atomics.store(control, STATE, DONE);
    Atomics.notify(control, STATE);
  }
}
