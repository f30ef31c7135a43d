import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReplayLog } from '../training/replay.js';

const vec = (...v: number[]) => Float64Array.from(v);

test('resume for party m: round 0 before any answer, then its latest answered round with that round\'s c and rho and its shares of the round before and of that round', () => {
  const log = new ReplayLog(2, 3, 0.5);
  const zero = log.resume(1, 'job');
  assert.deepEqual([zero.round, zero.rho, zero.c.length, zero.previousShare.length, zero.share.length], [0, 0.5, 0, 0, 0]);
  const c1 = vec(1, 2, 3);
  const c2 = vec(4, 5, 6);
  const c3 = vec(7, 8, 9);
  log.record(0, 1, 0.5, c1, vec(0.1, 0.2, 0.3));
  log.record(1, 1, 0.5, c1, vec(1.1, 1.2, 1.3));
  log.record(0, 2, 0.25, c2, vec(0.4, 0.5, 0.6));
  // Party 0 answered round 2; party 1 has not yet: each resumes where it is.
  assert.deepEqual(log.resume(0, 'job'), { type: 'resume', jobId: 'job', round: 2, rho: 0.25, c: c2, previousShare: vec(0.1, 0.2, 0.3), share: vec(0.4, 0.5, 0.6) });
  assert.deepEqual(log.resume(1, 'job'), { type: 'resume', jobId: 'job', round: 1, rho: 0.5, c: c1, previousShare: vec(0, 0, 0), share: vec(1.1, 1.2, 1.3) });
  // A job that ended with round 1's model (a budget refused round 2) resumes party 0 at round 1.
  assert.equal(log.resume(0, 'job', 1).round, 1);
  assert.deepEqual(log.resume(0, 'job', 1).share, vec(0.1, 0.2, 0.3));
  log.record(0, 3, 0.25, c3, vec(0.7, 0.8, 0.9));
  assert.deepEqual(log.resume(0, 'job').previousShare, vec(0.4, 0.5, 0.6));
  // Only the last two rounds are kept.
  assert.equal(log.resume(0, 'job', 1).round, 0);
});

test('a checkpoint point restores the log at its round', () => {
  const log = new ReplayLog(2, 2, 1);
  const c1 = vec(1, 1);
  log.record(0, 1, 1, c1, vec(2, 2));
  log.record(1, 1, 1, c1, vec(3, 3));
  assert.throws(() => log.point(2), /no record of round 2/);
  const point = log.point(1);
  const again = new ReplayLog(2, 2, 1, structuredClone(point));
  for (const m of [0, 1]) assert.deepEqual(again.resume(m, 'j'), log.resume(m, 'j'));
  again.record(1, 2, 1, vec(5, 5), vec(4, 4));
  assert.deepEqual(again.resume(1, 'j').previousShare, vec(3, 3));
});

test('sentCopy: the copies the log recycles are never ones it still holds, round after round', () => {
  const log = new ReplayLog(2, 3, 1);
  const sent = (m: number, t: number) => vec(t, 10 * t + m, -t);
  for (let t = 1; t <= 7; t++) {
    const cs = [0, 1].map((m) => log.sentCopy(m, t, sent(m, t)));
    // While round t is out, the log still holds rounds t - 1 and t - 2 as they were sent.
    for (let m = 0; m < 2; m++) for (const r of [t - 1, t - 2]) if (r >= 1) assert.deepEqual(log.resume(m, 'job', r).c, sent(m, r), `party ${m}, round ${r} while round ${t} is out`);
    for (let m = 0; m < 2; m++) {
      assert.deepEqual(cs[m], sent(m, t));
      log.record(m, t, 1, cs[m], vec(m, t, 0));
    }
    // Both answered rounds the log holds still have the vectors sent in them.
    for (let m = 0; m < 2; m++) {
      assert.deepEqual(log.resume(m, 'job').c, sent(m, t));
      if (t > 1) assert.deepEqual(log.resume(m, 'job', t - 1).c, sent(m, t - 1));
      assert.deepEqual(log.point(t).cs[m], sent(m, t));
    }
  }
});
