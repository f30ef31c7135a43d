// Anderson acceleration's passes in two halves (anderson.ts): the main thread runs the lower
// half of each pass and a worker thread (split-worker.ts) the upper half, on shared memory.
import { type ThreadTeam, type VectorMemory, sharedArray, vectorKernels } from '@admm-share/core';
import { firstPass, nextPoint } from './anderson-kernels.js';
import { type SplitData, runSplit, splitTeam } from './split-worker.js';

/** The arrays both threads work on, in shared memory. */
export interface SharedState {
  f: Float64Array;
  point: Float64Array;
  prevF: Float64Array;
  prevG: Float64Array;
  dF: Float32Array[];
  dG: Float32Array[];
  /** Where the worker's sums of a first pass go. */
  sums: Float64Array;
  /** The WebAssembly memory the vectors are views of, when they are (the worker runs the kernels on it). */
  memory: VectorMemory | undefined;
}

const FIRST_PASS = 1;
const NEXT_POINT = 2;

/** What the worker thread is given. */
export interface HalvesInit extends SharedState, SplitData {
  kind: 'anderson';
  /** [slot, kept count, kept slots..., difference count, difference slots...] (2 * memory + 3 entries). */
  slots: Int32Array;
  gamma: Float64Array;
  from: number;
  to: number;
}

/**
 * A worker thread that does the upper half [split, dim) of each pass while the main thread does
 * the lower half: `next` stays synchronous. The worker's sums are added after the main thread's,
 * always in that order.
 */
export class Halves {
  private readonly init: HalvesInit;
  private readonly team: ThreadTeam;

  constructor(state: SharedState) {
    const dim = state.f.length;
    const memory = state.dF.length;
    // An even split keeps the two-at-a-time loops aligned as in one pass.
    const split = Math.floor(dim / 4) * 2;
    this.init = {
      ...state,
      kind: 'anderson',
      slots: sharedArray(Int32Array, 2 * memory + 3),
      gamma: sharedArray(Float64Array, memory),
      from: split,
      to: dim,
    };
    this.team = splitTeam(this.init);
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
    runSplit(this.team, FIRST_PASS, mine);
  }

  nextPoint(order: readonly number[], gamma: Float64Array | undefined, mine: () => void): void {
    const { slots } = this.init;
    const at = 2 + this.init.dF.length;
    slots[at] = order.length;
    order.forEach((j, k) => (slots[at + 1 + k] = j));
    if (gamma) this.init.gamma.set(gamma);
    runSplit(this.team, NEXT_POINT, mine);
  }

  close(): void {
    void this.team.close();
  }
}

/** The worker thread's side: the upper half of each pass asked for. */
export function halfCalls(init: HalvesInit): (job: number) => void {
  const { slots, gamma, sums, f, point, prevF, prevG, dF, dG, from, to } = init;
  const k = init.memory && vectorKernels(init.memory);
  const at = 2 + dF.length;
  return (job) => {
    if (job === FIRST_PASS) {
      const slot = slots[0];
      const kept = Array.from({ length: slots[1] }, (_, k) => dG[slots[2 + k]]);
      firstPass(f, point, prevF, prevG, slot >= 0 ? dF[slot] : undefined, slot >= 0 ? dG[slot] : undefined, kept, from, to, sums, k);
    } else if (job === NEXT_POINT) {
      const ds = Array.from({ length: slots[at] }, (_, k) => dF[slots[at + 1 + k]]);
      nextPoint(point, prevF, prevG, f, ds, ds.length > 0 ? gamma : undefined, from, to, k);
    }
  };
}
