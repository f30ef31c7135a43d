// The alignment's progress as the status port shows it (monitoring/alignment.ts), on a clock
// the test moves: the estimate of the time left is measured from when a step's work began (time
// queued behind another step is not its rate), a finished step's clock stops, a rejoining
// party's step starts again, and the phase and seconds follow the job.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AlignmentProgress } from '../monitoring/alignment.js';

const PARTIES = [
  { id: 'p1', joined: true },
  { id: 'p2', joined: false },
];

function clocked(resumed = false) {
  let ms = 0;
  const a = new AlignmentProgress(resumed, () => ms);
  return { a, at: (t: number) => (ms = t) };
}

test('a step: no total or estimate before its first report; then the rate since its work began (after the step it queued behind); 0 left and a stopped clock once done', () => {
  const { a, at } = clocked();
  const hashing = a.step({ set: 'train', what: 'hashing label ids', party: null });
  const report = a.step({ set: 'train', what: 'intersecting ids', party: 'p1' });
  at(3000);
  hashing(500, 500);
  assert.deepEqual(a.status(PARTIES).steps[1], { step: 'intersecting ids', party: 'p1', set: 'train', done: 0, total: null, seconds: 3, etaSeconds: null });
  // Queued until the hashing ended at 3 s; 1,000 ids by 4 s: 1 ms an id, 9,000 left.
  at(4000);
  report(1000, 10_000);
  assert.equal(a.status(PARTIES).steps[1].etaSeconds, 9);
  // 4,000 by 5 s: 2,000 ids a second since 3 s, 6,000 left.
  at(5000);
  report(4000, 10_000);
  at(5500);
  const mid = a.status(PARTIES).steps[1];
  assert.deepEqual([mid.done, mid.total, mid.seconds, mid.etaSeconds], [4000, 10_000, 5.5, 3]);
  at(7000);
  report(10_000, 10_000);
  at(60_000);
  const end = a.status(PARTIES).steps[1];
  assert.deepEqual([end.done, end.seconds, end.etaSeconds], [10_000, 7, 0]);
  // A step asked for after the last one ended is timed from when it was asked for.
  const late = a.step({ set: 'train', what: 'intersecting ids', party: 'p2' });
  at(62_000);
  late(100, 400);
  assert.equal(a.status(PARTIES).steps[2].etaSeconds, 6);
});

test('phase and seconds: aligning (so far, waiting for the parties without a step), then done with the seconds given; failed stops the clock; a resumed job has none', () => {
  const { a, at } = clocked();
  at(1000);
  a.step({ set: 'train', what: 'hashing label ids', party: null })(5, 5);
  a.step({ set: 'train', what: 'intersecting ids', party: 'p1' });
  at(3500);
  assert.deepEqual(
    (({ phase, seconds, waitingFor }) => ({ phase, seconds, waitingFor }))(a.status(PARTIES)),
    { phase: 'aligning', seconds: 2.5, waitingFor: [{ party: 'p2', joined: false }] },
  );
  a.aligned(2.75);
  at(9000);
  const done = a.status(PARTIES);
  assert.deepEqual([done.phase, done.seconds, done.waitingFor], ['done', 2.75, []]);

  const f = clocked();
  f.at(1000);
  f.a.step({ set: 'train', what: 'intersecting ids', party: 'p1' })(10, 100);
  f.at(4000);
  f.a.failed();
  f.at(9000);
  const failed = f.a.status(PARTIES);
  assert.deepEqual([failed.phase, failed.seconds, failed.steps[0].seconds], ['failed', 3, 3]);

  const r = clocked(true);
  r.a.failed();
  assert.deepEqual((({ phase, seconds, waitingFor }) => ({ phase, seconds, waitingFor }))(r.a.status(PARTIES)), { phase: 'resumed', seconds: null, waitingFor: [] });
});

test('a party that rejoins starts its step again: the old one is replaced, the new one listed last', () => {
  const { a, at } = clocked();
  a.step({ set: 'train', what: 'intersecting ids', party: 'p1' })(100, 100);
  a.step({ set: 'test', what: 'intersecting ids', party: 'p1' })(50, 50);
  at(2000);
  a.step({ set: 'train', what: 'intersecting ids', party: 'p1' });
  const steps = a.status(PARTIES).steps.map((s) => [s.set, s.done, s.total]);
  assert.deepEqual(steps, [['test', 50, 50], ['train', 0, null]]);
});
