// A second thread for the coordinator's step. The parties wait while the coordinator steps, so
// on a machine with two cores or more the step's passes over every sample can be split: the
// main thread runs the lower part of a pass and a worker thread (a ThreadTeam of one) the upper
// part, on shared memory; the step stays synchronous. Two users: the z-update's passes (admm.ts,
// StepSplit) and Anderson acceleration's (anderson-halves.ts).
import { availableParallelism } from 'node:os';
import { InternalError, ThreadTeam } from '@admm-share/core';

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

/** What a split worker's data names: which user it serves. */
export interface SplitData {
  kind: 'anderson' | 'step';
}

/** One worker thread (split-thread.ts) for `data`'s passes; its failure is an InternalError naming it. */
export function splitTeam(data: SplitData): ThreadTeam {
  const name = `the coordinator's ${data.kind} worker thread`;
  return new ThreadTeam({ script: new URL('./split-thread.js', import.meta.url), data: () => data, threads: 1, name, fail: (failure) => new InternalError(`in ${name}`, failure) });
}

/** Run `job` in the team's thread and `mine` here, and return once both are done. */
export function runSplit(team: ThreadTeam, job: number, mine: () => void): void {
  team.begin(job);
  mine();
  team.waitSync();
}
