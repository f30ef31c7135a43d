// The probe budget's file on its own (intersection/probe-budget.ts), with the day set by the
// test: counts start again on a new UTC day while the label sets of each job are kept, two
// processes on one file add up, every malformed file is refused naming it, and only the most
// recent jobs are remembered; a party that lost its own PSI cache may answer one set more.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '@admm-share/core';
import { tempDir } from '@admm-share/core/test-support';
import { ProbeBudget, ProbeRefused, probeBudgetPath } from '../intersection/probe-budget.js';

const URL_A = 'ws://coordinator-a:7000/';
const LIMITS = { idsPerDay: 100, labelSetsPerJob: 2, lookupIdsPerConnection: 60 };
const digest = (k: number) => k.toString(16).padStart(64, '0');

test('the file sits beside the ledger', () => {
  assert.equal(probeBudgetPath(join('out', 'model-p1.ledger.json')), join('out', 'model-p1.probe-budget.json'));
});

test('a new UTC day starts the counts again; the label sets of a job are kept, so a rejoin on the next day is still free and a third set still refused', (t) => {
  const path = join(tempDir(t), 'b.json');
  let day = '2026-11-28';
  const b = new ProbeBudget(path, URL_A, 'training', LIMITS, () => day);
  assert.deepEqual(b.labelSet('j', 'train', digest(1), 60), { charged: true, sets: 1, today: 60, cap: 100 });
  assert.throws(() => b.labelSet('j2', 'train', digest(2), 41), (e: unknown) => e instanceof ProbeRefused && /60 candidate ids were answered today/.test(e.message));
  day = '2026-11-29';
  assert.equal(b.labelSet('j', 'train', digest(1), 60).charged, false);
  assert.deepEqual(b.labelSet('j', 'train', digest(3), 60), { charged: true, sets: 2, today: 60, cap: 100 });
  assert.throws(() => b.labelSet('j', 'train', digest(4), 60), /job j: a different train label set of 60 ids after 2 of 60 ids \(--max-label-sets-per-job 2/);
  const f = JSON.parse(readFileSync(path, 'utf8'));
  assert.equal(f.day, '2026-11-29');
  assert.equal(statSync(path).mode & 0o777, 0o600);
});

test('two processes on one file (training and scoring, or a restart) add up; coordinators and kinds are counted apart', (t) => {
  const path = join(tempDir(t), 'b.json');
  const today = () => '2026-11-28';
  const a = new ProbeBudget(path, URL_A, 'scoring', LIMITS, today);
  const b = new ProbeBudget(path, URL_A, 'scoring', LIMITS, today);
  const other = new ProbeBudget(path, 'ws://coordinator-b:7000/', 'scoring', LIMITS, today);
  const training = new ProbeBudget(path, URL_A, 'training', LIMITS, today);
  a.lookup(50, 1);
  b.lookup(40, 1);
  assert.throws(() => a.lookup(11, 2), /a lookup of 11 ids refused: 90 candidate ids were answered today \(UTC\) for ws:\/\/coordinator-a:7000\/ in scoring, at most 100/);
  assert.equal(other.lookup(60, 1).today, 60);
  assert.equal(training.labelSet('j', 'train', digest(1), 100).today, 100);
  // Per connection: a new connection number starts again.
  assert.throws(() => other.lookup(1, 1), /60 ids were looked up on this connection already, at most 60 \(--max-lookup-ids-per-connection\)/);
  assert.equal(other.lookup(1, 2).connectionIds, 1);
  assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')).coordinators, { [URL_A]: { training: 100, scoring: 90 }, 'ws://coordinator-b:7000/': { training: 0, scoring: 61 } });
});

test('a malformed file is refused when the party starts, naming the file and what is wrong', (t) => {
  const path = join(tempDir(t), 'b.json');
  const good = { format: 'admm-share-probe-budget/1', day: '2026-11-28', coordinators: { [URL_A]: { training: 1, scoring: 0 } }, jobs: [] };
  for (const [bad, why] of [
    [{ ...good, coordinators: { [URL_A]: { training: -1, scoring: 0 } } }, /probe budget: .*training.*an integer >= 0/],
    [{ ...good, day: 'yesterday' }, /day YYYY-MM-DD/],
    [{ ...good, format: 'admm-share-probe-budget/0' }, /admm-share-probe-budget\/1/],
    [{ ...good, extra: 1 }, /extra/],
    [{ ...good, jobs: [{ coordinator: URL_A, jobId: 'j', set: 'train', labelIds: 3, digests: ['xyz'] }] }, /64 hex characters/],
  ] as const) {
    writeFileSync(path, JSON.stringify(bad));
    assert.throws(
      () => new ProbeBudget(path, URL_A, 'training', LIMITS),
      (e: unknown) => e instanceof DataError && e.message.includes(path) && why.test(e.message),
      JSON.stringify(bad),
    );
  }
  writeFileSync(path, '{');
  assert.throws(() => new ProbeBudget(path, URL_A, 'training', LIMITS), DataError);
});

test('only the 64 most recent jobs are remembered: the file stays small', (t) => {
  const path = join(tempDir(t), 'b.json');
  const b = new ProbeBudget(path, URL_A, 'training', { ...LIMITS, idsPerDay: 1000 }, () => '2026-11-28');
  for (let k = 0; k < 70; k++) b.labelSet(`job-${k}`, 'train', digest(k), 1);
  const jobs = JSON.parse(readFileSync(path, 'utf8')).jobs as { jobId: string }[];
  assert.equal(jobs.length, 64);
  assert.equal(jobs[0].jobId, 'job-6');
  // A forgotten job's set counts as new again.
  assert.equal(b.labelSet('job-0', 'train', digest(0), 1).charged, true);
});

test("a new set under a PSI cache the party had to start itself is allowed once beyond the limit, of any size; the day's budget still applies", (t) => {
  const b = new ProbeBudget(join(tempDir(t), 'b.json'), URL_A, 'training', { ...LIMITS, labelSetsPerJob: 1 }, () => '2026-11-28');
  // A warm first set: only the label ids new to the cache.
  b.labelSet('j', 'train', digest(1), 5);
  assert.throws(() => b.labelSet('j', 'train', digest(2), 40), /a different train label set of 40 ids after 1 of 5 ids/);
  assert.deepEqual(b.labelSet('j', 'train', digest(2), 40, true), { charged: true, sets: 2, today: 45, cap: 100 });
  assert.throws(() => b.labelSet('j', 'train', digest(3), 40, true), /a different train label set of 40 ids after 2 of 5 ids/);
  assert.throws(() => b.labelSet('k', 'train', digest(4), 5).charged && b.labelSet('k', 'train', digest(5), 60, true), /candidate ids were answered today/);
});
