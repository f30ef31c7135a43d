// Membership probing in training (docs/privacy.md, "Membership probing"): a real admm-party
// against a coordinator that reads each answer of the intersection, closes with 4014 (busy) and
// comes back with a fresh candidate set. Before the party kept a probe budget it answered every
// set (210,240 candidates in 61 s at 2,000 rows); now a different set for the same job is
// refused beyond --max-label-sets-per-job, a set of another size at once, and the candidate ids
// per coordinator and day are capped by --max-probe-ids-per-day across restarts of the party.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type PartyMessage, CloseCodes, closeReason, encode } from '@admm-share/protocol';
import { psiLabels } from './psi-peer.js';
import { BIN, killAll, run, tempDir } from './procs.js';
import { type Conn, JOB, candidates, partyFiles, scriptedCoordinator, welcome } from './probe-support.js';

after(killAll);

const SET = 300;

function party(files: { id: string; train: string }, url: string, model: string, extra: string[] = []) {
  return run(BIN.party, ['--coordinator', url, '--id', files.id, '--data', files.train, '--ids', 'first', '--mechanism', 'none', '--model', model, '--connect-timeout', '5000', ...extra]);
}

/** A coordinator that sends, on connection k, the label set `sets[k - 1]` (encoded once: a resent set is the same bytes) and closes with 4014 once it is answered. */
async function prober(t: { after(fn: () => unknown): void }, sets: Uint8Array[], jobs: string[] = [], port = 0) {
  const answered: number[] = [];
  const fake = await scriptedCoordinator(
    t,
    (conn: Conn, msg: PartyMessage) => {
      if (msg.type === 'hello') {
        const set = sets[conn.number - 1];
        if (!set) return conn.close(CloseCodes.done.code, 'no more sets');
        conn.send(welcome(jobs[conn.number - 1] ?? JOB));
        conn.sendBytes(set);
      } else if (msg.type === 'ids') {
        answered.push(conn.number);
        conn.close(CloseCodes.busy.code, closeReason('busy', '64 connections are already waiting to say hello'));
      }
    },
    port,
  );
  return { ...fake, answered };
}

async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(done(), what);
}

const labelSet = (n: number, from: number, job = JOB) => encode(psiLabels(job, candidates(n, from)));
const budgetFile = (model: string) => model.replace(/\.json$/, '.probe-budget.json');
const readBudget = (model: string) => JSON.parse(readFileSync(budgetFile(model), 'utf8'));

test('a coordinator that comes back with fresh candidate sets: a rejoin that resends its set is answered again, one new set is answered (a coordinator restart), the next is refused with 4004 naming the job and the count, and warned', async (t) => {
  const dir = tempDir(t);
  const files = partyFiles(dir);
  const a = labelSet(SET, 0);
  const fake = await prober(t, [a, a, labelSet(SET, 1000), labelSet(SET, 2000)]);
  const model = join(dir, 'model.json');
  const p = party(files, fake.url, model, ['--max-label-sets-per-job', '2']);
  assert.equal((await p.exit).code, 69, p.stderr());
  assert.deepEqual(fake.answered, [1, 2, 3], 'the party answered the first set twice and one new set');
  const closed = await fake.closed(4);
  assert.equal(closed.code, CloseCodes.unexpected.code);
  // The close reason is cut at 123 bytes; the error says it all.
  assert.match(closed.reason, /^unexpected message: coordinator sent a bad message: job probe-job: a different train label set of 300 ids/);
  assert.match(p.stderr(), /job probe-job: a different train label set of 300 ids after 2 of 300 ids \(--max-label-sets-per-job 2\); a rejoin, or a coordinator restarted with its --out folder, resends the same set\n/);
  const warned = p.records.filter((r) => r.level === 40 && /^membership probing: psi refused/.test(String(r.msg)));
  assert.equal(warned.length, 1, p.stdout());
  assert.equal(warned[0].setsAnswered, 2);
  assert.equal(warned[0].labelIds, SET);
  // Three answers, two sets charged: the day's count and the job's digests, in a file only the party reads.
  const budget = readBudget(model);
  assert.deepEqual(Object.values(budget.coordinators), [{ training: 2 * SET, scoring: 0 }]);
  assert.equal(budget.jobs.length, 1);
  assert.equal(budget.jobs[0].digests.length, 2);
  assert.equal(statSync(budgetFile(model)).mode & 0o777, 0o600);
});

test('the second set is refused at once when it is of another size, or by default (--max-label-sets-per-job 1)', async (t) => {
  const dir = tempDir(t);
  const files = partyFiles(dir);
  const cases: [string[], Uint8Array, RegExp][] = [
    [[], labelSet(SET + 1, 1000), /job probe-job: a different train label set of 301 ids after 1 of 300 ids; a rejoin resends the same set, and a restarted coordinator the same ids\n/],
    [[], labelSet(SET, 1000), /job probe-job: a different train label set of 300 ids after 1 of 300 ids \(--max-label-sets-per-job 1\); a rejoin, or a coordinator restarted with its --out folder, resends the same set\n/],
  ];
  await Promise.all(
    cases.map(async ([extra, second, reason], k) => {
      const fake = await prober(t, [labelSet(SET, 0), second]);
      const p = party(files, fake.url, join(dir, `model-${k}.json`), extra);
      assert.equal((await p.exit).code, 69, p.stderr());
      assert.deepEqual(fake.answered, [1]);
      assert.equal((await fake.closed(2)).code, CloseCodes.unexpected.code);
      assert.match(p.stderr(), reason);
    }),
  );
});

test('--max-probe-ids-per-day holds across a restart of the party: the count is kept beside the ledger, a set beyond it is refused before any blinding, a set of the job answered before is still free', async (t) => {
  const dir = tempDir(t);
  const files = partyFiles(dir);
  const model = join(dir, 'model.json');
  const flags = ['--max-probe-ids-per-day', '500'];
  const first = labelSet(SET, 0, 'job-1');
  const fake = await prober(t, [first, labelSet(SET, 1000, 'job-2'), first], ['job-1', 'job-2', 'job-1']);
  // Job 1: answered; then the party is killed (its process, key and memory are gone).
  const p1 = party(files, fake.url, model, flags);
  await until(() => fake.answered.length === 1, 'the first answer');
  p1.kill();
  await p1.exit;
  assert.deepEqual(Object.values(readBudget(model).coordinators), [{ training: SET, scoring: 0 }]);
  // Started again, the same day: job 2's 300 fresh candidates would make 600 > 500.
  const p2 = party(files, fake.url, model, flags);
  assert.equal((await p2.exit).code, 69, p2.stderr());
  assert.deepEqual(fake.answered, [1]);
  const refused = p2.records.find((r) => /^membership probing: psi refused/.test(String(r.msg)));
  assert.ok(refused, p2.stdout());
  assert.deepEqual([refused.labelIds, refused.answeredToday, refused.cap, refused.jobId], [SET, SET, 500, 'job-2']);
  assert.match(String(refused.msg), /job job-2: 300 train label ids refused: 300 candidate ids were answered today \(UTC\) for ws:\/\/127\.0\.0\.1:\d+\/ in training, at most 500 a day \(--max-probe-ids-per-day\)$/);
  assert.equal(refused.file, budgetFile(model));
  assert.equal(p2.records.some((r) => /blinding|intersected/.test(String(r.msg))), false, 'nothing was blinded');
  assert.equal((await fake.closed(2)).code, CloseCodes.unexpected.code);
  // Started a third time, job 1's set again: answered without a charge.
  const p3 = party(files, fake.url, model, flags);
  await until(() => fake.answered.length === 2, 'the answer of the known set');
  assert.deepEqual(fake.answered, [1, 3]);
  assert.deepEqual(Object.values(readBudget(model).coordinators), [{ training: SET, scoring: 0 }]);
  p3.kill();
});
