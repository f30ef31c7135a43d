// Anderson acceleration's passes shared with a worker thread (anderson.ts): both threads take
// the passes' chunks (chunks.ts, claimChunks) until none is left, on shared memory.
import { type ThreadTeam, type VectorKernels, type VectorMemory, sharedArray, vectorKernels } from '@admm-share/core/team';
import { ROW, firstPass, nextPoint } from './anderson-kernels.js';
import { claimChunks, runShared, type TeamData, stepThreadTeam } from './chunks.js';

/**
 * Elements of the state in a chunk of Anderson's passes: even, so that the kernels' two lanes
 * take the same elements in every chunk as in one pass over the state.
 */
export const ANDERSON_CHUNK = 8192;

/** The arrays both threads work on, in shared memory. */
export interface SharedState {
  f: Float64Array;
  point: Float64Array;
  prevF: Float64Array;
  prevG: Float64Array;
  dF: Float32Array[];
  dG: Float32Array[];
  /** The next chunk to take, and each chunk's sums of a first pass (ROW + memory a chunk). */
  next: Int32Array;
  sums: Float64Array;
  /** The WebAssembly memory the vectors are views of, when they are (the worker runs the kernels on it). */
  memory: VectorMemory | undefined;
}

/** The ops of a call (the step's own are 1, 2 and 5, step-team.ts: one thread can serve both). */
const FIRST_PASS = 3;
const NEXT_POINT = 4;

/** What the worker thread is given. */
export interface AndersonTeamInit extends SharedState, TeamData {
  kind: 'anderson';
  /** [slot, kept count, kept slots..., difference count, difference slots...] (2 * memory + 3 entries). */
  slots: Int32Array;
  gamma: Float64Array;
}

/** Pass 1 over the chunks left, on f (s.f, or the caller's array in one thread): chunk c's sums go to sums[c * (ROW + memory)...]. */
export function firstPassChunks(s: SharedState, f: Float64Array, dFs: Float32Array | undefined, dGs: Float32Array | undefined, kept: readonly Float32Array[], k: VectorKernels | undefined): void {
  const stride = ROW + s.dF.length;
  claimChunks(s.next, f.length, ANDERSON_CHUNK, (from, to, c) => firstPass(f, s.point, s.prevF, s.prevG, dFs, dGs, kept, from, to, s.sums.subarray(c * stride, (c + 1) * stride), k));
}

/** Pass 2 over the chunks left, from f (as in pass 1). */
export function nextPointChunks(s: SharedState, f: Float64Array, ds: readonly Float32Array[], gamma: Float64Array | undefined, k: VectorKernels | undefined): void {
  claimChunks(s.next, f.length, ANDERSON_CHUNK, (from, to) => nextPoint(s.point, s.prevF, s.prevG, f, ds, gamma, from, to, k));
}

/** What a worker thread needs for Anderson's passes on `state`. */
export function andersonInit(state: SharedState): AndersonTeamInit {
  const memory = state.dF.length;
  return { ...state, kind: 'anderson', slots: sharedArray(Int32Array, 2 * memory + 3), gamma: sharedArray(Float64Array, memory) };
}

/**
 * A worker thread that takes chunks of each pass while the main thread does: `next` stays
 * synchronous. Its own thread, or the coordinator step's (`team`, started with `init` among its
 * data, step-team.ts), which it then leaves for its owner to close.
 */
export class AndersonTeam {
  private readonly team: ThreadTeam;

  constructor(
    private readonly init: AndersonTeamInit,
    private readonly shared?: ThreadTeam,
  ) {
    this.team = shared ?? stepThreadTeam(init);
  }

  firstPass(slot: number, keep: readonly number[], mine: () => void): void {
    const { slots } = this.init;
    slots[0] = slot;
    slots[1] = keep.length;
    keep.forEach((j, k) => (slots[2 + k] = j));
    runShared(this.team, FIRST_PASS, mine);
  }

  nextPoint(order: readonly number[], gamma: Float64Array | undefined, mine: () => void): void {
    const { slots } = this.init;
    const at = 2 + this.init.dF.length;
    slots[at] = order.length;
    order.forEach((j, k) => (slots[at + 1 + k] = j));
    if (gamma) this.init.gamma.set(gamma);
    runShared(this.team, NEXT_POINT, mine);
  }

  close(): void {
    if (!this.shared) void this.team.close();
  }
}

/** The worker thread's side: the chunks it takes of each pass asked for. */
export function andersonCalls(init: AndersonTeamInit): (job: number) => void {
  const { slots, gamma, dF, dG } = init;
  const k = init.memory && vectorKernels(init.memory);
  const at = 2 + dF.length;
  return (job) => {
    if (job === FIRST_PASS) {
      const slot = slots[0];
      const kept = Array.from({ length: slots[1] }, (_, j) => dG[slots[2 + j]]);
      firstPassChunks(init, init.f, slot >= 0 ? dF[slot] : undefined, slot >= 0 ? dG[slot] : undefined, kept, k);
    } else if (job === NEXT_POINT) {
      const ds = Array.from({ length: slots[at] }, (_, j) => dF[slots[at + 1 + j]]);
      nextPointChunks(init, init.f, ds, ds.length > 0 ? gamma : undefined, k);
    }
  };
}
