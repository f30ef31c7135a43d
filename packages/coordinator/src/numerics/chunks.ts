// A second thread for the coordinator's step. The parties wait while the coordinator steps, so
// on a machine with two cores or more the step's passes over every sample can be shared: the
// main thread and a worker thread (a ThreadTeam of one, its entry step-thread.ts) each take the
// next chunk of a pass left (claimChunks), on shared memory; the step stays synchronous. Two
// teams, one thread: the z-update's passes (StepTeam, step-team.ts) and Anderson
// acceleration's (AndersonTeam, anderson-team.ts).
import { availableParallelism } from 'node:os';
import { InternalError, ThreadTeam } from '@admm-share/core/team';

/**
 * The length of the state, (M + 2) N values, from which the step's passes run in a team: a9a's
 * 130k values (N = 32,561, two parties) do, the tests' few thousand do not. The passes
 * are bound by memory traffic and the exponentials of the z-update; below this length the
 * hand-over (a wake-up and a wait on shared memory, tens of microseconds) is not worth a
 * thread. On a single core there is no team.
 */
export const TEAM_FROM = 1 << 16;

/** Whether the passes over a state of `length` values run in a team by default on this machine. */
export function teamByDefault(length: number): boolean {
  return length >= TEAM_FROM && availableParallelism() > 1;
}

/** What the step's thread is given (its team's data): which user it serves. */
export interface TeamData {
  kind: 'anderson' | 'step';
}

/** One worker thread (step-thread.ts) for `data`'s passes; its failure is an InternalError naming it. */
export function stepThreadTeam(data: TeamData): ThreadTeam {
  const name = `the coordinator's ${data.kind} worker thread`;
  return new ThreadTeam({ script: new URL('./step-thread.js', import.meta.url), data: () => data, threads: 1, name, fail: (failure) => new InternalError(`in ${name}`, failure) });
}

/**
 * Run `job` in the team's thread and `mine` here (both take chunks until none is left), and
 * return once both are done; a thread that has not begun by the time `mine` has taken the last
 * chunk skips the call instead of holding the step until it wakes (ThreadTeam.waitOrSkip).
 */
export function runShared(team: ThreadTeam, job: number, mine: () => void): void {
  team.begin(job);
  mine();
  team.waitOrSkip();
}

/** The number of chunks of n values, `size` a chunk. */
export function chunkCount(n: number, size: number): number {
  return Math.ceil(n / size);
}

/**
 * Run `work` on each chunk of n values left (`size` a chunk), taking them one at a time from
 * next[0] with Atomics: in a team, both threads run this on the same counter, so a thread that
 * starts late does less. A pass's sums go to a place of each chunk's own and are then added in
 * the chunks' order (addChunkSums): the same bits whichever thread took which chunk, and as in
 * one thread, whatever the machine.
 */
export function claimChunks(next: Int32Array, n: number, size: number, work: (from: number, to: number, chunk: number) => void): void {
  const chunks = chunkCount(n, size);
  for (let k = Atomics.add(next, 0, 1); k < chunks; k = Atomics.add(next, 0, 1)) work(k * size, Math.min(n, (k + 1) * size), k);
}

/** out[0..count) = the sums of `chunks` chunks added in the chunks' order; chunk k's are sums[k * stride...]. */
export function addChunkSums(sums: Float64Array, chunks: number, stride: number, count: number, out: Float64Array): void {
  out.fill(0, 0, count);
  for (let k = 0; k < chunks; k++) for (let j = 0; j < count; j++) out[j] += sums[k * stride + j];
}
