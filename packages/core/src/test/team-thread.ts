// A ThreadTeam thread for thread-team.test.ts: it takes `startMs` to start; each call adds 1 to
// counts[0] as it begins, takes `callMs`, and then sets counts[1] to the number of calls done.
import { type TeamThreadData, serveTeam } from '../threads/thread-team.js';

interface Data extends TeamThreadData {
  startMs: number;
  callMs: number;
  counts: Int32Array;
}

const nap = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

serveTeam<Data>(({ startMs, callMs, counts }) => {
  nap(startMs);
  return () => {
    Atomics.add(counts, 0, 1);
    nap(callMs);
    Atomics.add(counts, 1, 1);
  };
});
