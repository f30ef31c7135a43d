// ThreadTeam.waitOrSkip: a thread that has not begun a call by the time the caller is done
// skips it; one that has begun is waited for. The thread is a real worker (team-thread.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InternalError, ThreadTeam } from '../index.js';

function team(startMs: number, callMs: number) {
  const counts = new Int32Array(new SharedArrayBuffer(8));
  const t = new ThreadTeam({
    script: new URL('./team-thread.js', import.meta.url),
    data: () => ({ startMs, callMs, counts }),
    threads: 1,
    name: 'the test thread',
    fail: (failure) => new InternalError('in the test thread', failure),
  });
  return { t, counts };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('waitOrSkip: a thread still starting skips the call and never runs it; a thread that has begun is waited for', async () => {
  const { t, counts } = team(600, 300);
  try {
    const t0 = performance.now();
    t.begin(1);
    t.waitOrSkip();
    assert.ok(performance.now() - t0 < 400, `returned without waiting for the thread to start (${(performance.now() - t0).toFixed(0)} ms)`);
    // Started since, the thread waits for the next call: it did not run the skipped one.
    await sleep(1000);
    assert.deepEqual(Array.from(counts), [0, 0], 'the skipped call never ran');
    t.begin(1);
    // Once the thread has begun (counts[0]), the caller waits for its part to end.
    const deadline = performance.now() + 10_000;
    while (Atomics.load(counts, 0) === 0 && performance.now() < deadline) await sleep(1);
    assert.equal(Atomics.load(counts, 0), 1, 'the thread began the call');
    t.waitOrSkip();
    assert.equal(Atomics.load(counts, 1), 1, 'waitOrSkip returned once the begun part was done');
    // A call with messages is not skipped: its message would be left for the next call.
    t.begin(1, () => ({}));
    assert.throws(() => t.waitOrSkip(), InternalError);
    t.waitSync();
  } finally {
    await t.close();
  }
});
