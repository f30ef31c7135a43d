// The upper half of each pass of Anderson acceleration on a large state (anderson.ts, Halves):
// it waits on shared memory for the main thread's call, runs the same kernel on its range and
// says it is done, until told to exit.
import { workerData } from 'node:worker_threads';
import { DONE, EXIT, FIRST_PASS, type HalvesInit, IDLE, NEXT_POINT, READY, STATE, firstPass, nextPoint } from './anderson-kernels.js';

const { control, slots, gamma, sums, f, point, prevF, prevG, dF, dG, from, to } = workerData as HalvesInit;
const memory = dF.length;
Atomics.store(control, READY, 1);
Atomics.notify(control, READY);
for (;;) {
  let job: number;
  while ((job = Atomics.load(control, STATE)) === IDLE || job === DONE) Atomics.wait(control, STATE, job);
  if (job === EXIT) break;
  if (job === FIRST_PASS) {
    const slot = slots[0];
    const kept = Array.from({ length: slots[1] }, (_, k) => dG[slots[2 + k]]);
    firstPass(f, point, prevF, prevG, slot >= 0 ? dF[slot] : undefined, slot >= 0 ? dG[slot] : undefined, kept, from, to, sums);
  } else if (job === NEXT_POINT) {
    const at = 2 + memory;
    const ds = Array.from({ length: slots[at] }, (_, k) => dF[slots[at + 1 + k]]);
    nextPoint(point, prevF, prevG, f, ds, ds.length > 0 ? gamma : undefined, from, to);
  }
  Atomics.store(control, STATE, DONE);
  Atomics.notify(control, STATE);
}
