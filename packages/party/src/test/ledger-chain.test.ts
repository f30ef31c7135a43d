// The ledgers' hash chain and the party's key (issue 46, item 4): the key is made once (0600,
// 32 bytes) and kept; a chain verifies only as written (an edited, removed, moved or resealed
// entry is refused, naming the file); a job's history cannot go back; the release file
// cannot hold more than the ledger accounts for; a job run again gets its own release back;
// the old formats are converted once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@admm-share/core/test-support';
import { DataError } from '@admm-share/core';
import { CHAIN_START, canonical, seal, verifyChain } from '../privacy/chain.js';
import { LEDGER_FORMAT, LedgerBook, releaseVectorPath } from '../privacy/ledger.js';
import { existingPartyKey, partyKey, partyKeyPath } from '../privacy/party-key.js';
import { Privacy } from '../privacy/privacy.js';
import { ScoringLedger } from '../privacy/scoring-ledger.js';
import { ScoringPrivacy } from '../scoring/scoring.js';

const job = { lambda: 1e-3, rho: 1e-2, rounds: 1, parties: 2, features: 3, n: 100, algorithm: 'one-shot' as const, bw: 1 };
const cfg = { mechanism: 'score-release', epsilon: 2, delta: 1e-5, bx: 20 } as const;
const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
const isData = (path: string, re: RegExp) => (e: unknown) => e instanceof DataError && e.file === path && re.test(e.message);

test('partyKey: 32 random bytes made once, mode 0600, the same on every later call; a key of another length is refused', (t) => {
  const dir = tempDir(t, 'key-');
  assert.equal(existingPartyKey(dir), undefined);
  const key = partyKey(dir);
  assert.equal(key.length, 32);
  assert.equal(statSync(partyKeyPath(dir)).mode & 0o777, 0o600);
  assert.ok(partyKey(dir).equals(key), 'kept, not made again');
  assert.ok(!partyKey(tempDir(t, 'key2-')).equals(key), 'another folder, another key');
  writeFileSync(partyKeyPath(dir), 'short');
  assert.throws(() => partyKey(dir), isData(partyKeyPath(dir), /5 bytes, expected 32/));
});

test('the chain: each entry covers the one before; an edit, a removal, a move or a reseal without the key is refused naming the entry', (t) => {
  const key = partyKey(tempDir(t, 'chain-'));
  const entries: ReturnType<typeof seal<{ jobId: string; releases: number }>>[] = [];
  for (const [jobId, releases] of [['a', 1], ['b', 1], ['a', 2]] as const) entries.push(seal(key, entries, { jobId, releases }));
  // Computed here from the definition: HMAC-SHA256 of the sorted-key JSON, prev included.
  assert.equal(entries[0].prev, CHAIN_START);
  assert.equal(entries[0].mac, createHmac('sha256', key).update('{"jobId":"a","prev":"' + CHAIN_START + '","releases":1,"seq":0}').digest('hex'));
  assert.equal(entries[1].prev, entries[0].mac);
  verifyChain('l', 'privacy ledger', key, entries);

  const edited = entries.map((e) => ({ ...e }));
  edited[2].releases = 0;
  assert.throws(() => verifyChain('l', 'privacy ledger', key, edited), isData('l', /entries\[2\]: its MAC does not match \(job a\)/));
  // Resealed by someone without the key: with a key of their own, or a plain SHA-256.
  const { mac: _, ...body } = edited[2];
  for (const mac of [createHmac('sha256', Buffer.alloc(32)).update(canonical(body)).digest('hex'), createHash('sha256').update(canonical(body)).digest('hex')])
    assert.throws(() => verifyChain('l', 'privacy ledger', key, [...entries.slice(0, 2), { ...body, mac }]), /entries\[2\]: its MAC does not match/);
  assert.throws(() => verifyChain('l', 'privacy ledger', key, [entries[0], entries[2]]), /entries\[1\]: seq 2, expected 1/);
  assert.throws(() => verifyChain('l', 'privacy ledger', key, [entries[0], { ...entries[2], seq: 1 }]), /entries\[1\]: prev does not match/);
  assert.throws(() => verifyChain('l', 'privacy ledger', key, [entries[1], entries[0]]), /entries\[0\]: seq 1, expected 0/);
  // What a chain alone cannot see (docs/privacy.md says so): its last entries cut off.
  verifyChain('l', 'privacy ledger', key, entries.slice(0, 2));
});

test('a job run again finds its own release after another job: the same values, nothing booked or drawn again', (t) => {
  const dir = tempDir(t, 'book-');
  const ledger = join(dir, 'model.ledger.json');
  const rows = Uint32Array.from([3, 1, 0]);
  const scores = Float64Array.from([0.5, -0.5, 0.25]);
  const run = (jobId: string) => {
    const p = new Privacy(cfg);
    p.restoreLedger(ledger, jobId);
    p.calibrate(job);
    return p.scoreRelease(scores, rows, ledger, jobId);
  };
  const a = run('job-a');
  const b = run('job-b');
  assert.notDeepEqual(b, a, 'job B: its own draw');
  const file = readFileSync(releaseVectorPath(ledger));
  assert.deepEqual(run('job-a'), a, 'job A again: its release');
  assert.deepEqual(run('job-b'), b);
  assert.ok(readFileSync(releaseVectorPath(ledger)).equals(file), 'the release file unchanged');
  assert.equal(file.length, 2 * 2 * 3 * 8, 'two releases of three rows: row numbers and values');
  assert.deepEqual(Array.from(new Float64Array(file.buffer, file.byteOffset + 48, 6)), [3, 1, 0, ...b], "B's release after A's");
  const l = readJson(ledger);
  assert.equal(l.format, LEDGER_FORMAT);
  assert.deepEqual(l.entries.map((e: { jobId: string; release: { offset: number } }) => [e.jobId, e.release.offset]), [['job-a', 0], ['job-b', 48]]);
  assert.equal(statSync(ledger).mode & 0o777, 0o600);
});

test('LedgerBook refuses a ledger behind its release file, a ledger without its key, and a history that goes back', (t) => {
  const dir = tempDir(t, 'rewind-');
  const ledger = join(dir, 'model.ledger.json');
  const p = new Privacy(cfg);
  p.calibrate(job);
  p.scoreRelease(Float64Array.from([1, 2]), Uint32Array.from([0, 1]), ledger, 'job-a');
  const saved = readFileSync(ledger);
  const release = releaseVectorPath(ledger);

  rmSync(ledger);
  assert.throws(() => LedgerBook.open(ledger), isData(ledger, new RegExp(`goes backwards: the release file ${release} holds 32 bytes of releases, the ledger does not exist`)));
  writeFileSync(ledger, saved);
  writeFileSync(release, Buffer.concat([readFileSync(release), Buffer.alloc(32)]));
  assert.throws(() => LedgerBook.open(ledger), isData(ledger, /holds 64 bytes of releases, the ledger accounts for 32 bytes of it/));
  writeFileSync(release, readFileSync(release).subarray(0, 32));
  LedgerBook.open(ledger);

  const key = readFileSync(partyKeyPath(dir));
  rmSync(partyKeyPath(dir));
  assert.throws(() => LedgerBook.open(ledger), isData(ledger, /sealed with the party's key .*party\.key, which is missing; restore that file/));
  writeFileSync(partyKeyPath(dir), key, { mode: 0o600 });

  // Sealed with the right key (as only the party could), a count that goes back is still refused.
  const l = readJson(ledger);
  const { seq: _s, prev: _p, mac: _m, ...state } = l.entries[0];
  l.entries.push(seal(key, l.entries, { ...state, releases: 0, epsilonSpent: 0, release: null }));
  writeFileSync(ledger, JSON.stringify(l));
  assert.throws(() => LedgerBook.open(ledger), isData(ledger, /entries\[1\]: job job-a goes backwards: 0 releases after entries\[0\] recorded 1/));
});

test('an old single-job ledger is read once and converted into the first entry of a chain; an old scoring ledger likewise', (t) => {
  const dir = tempDir(t, 'old-');
  const ledger = join(dir, 'model.ledger.json');
  const p = new Privacy(cfg);
  p.calibrate(job);
  p.scoreRelease(Float64Array.from([1, 2]), Uint32Array.from([0, 1]), ledger, 'job-a');
  const entry = readJson(ledger).entries[0];
  const { seq: _s, prev: _p, mac: _m, release, ...state } = entry;
  rmSync(partyKeyPath(dir));
  writeFileSync(ledger, JSON.stringify({ format: 'admm-share-ledger/3', ...state, release: { rows: release.rows, sha256: release.sha256 } }));
  const again = new Privacy(cfg);
  again.restoreLedger(ledger, 'job-a');
  assert.equal(again.releases, 1);
  const converted = readJson(ledger);
  assert.equal(converted.format, LEDGER_FORMAT);
  assert.deepEqual(converted.entries[0].release, release);
  assert.ok(existsSync(partyKeyPath(dir)), 'a key made for it');
  LedgerBook.open(ledger);
  // Once a signed ledger may exist (the key does), an old unsigned one written over it is refused.
  const signed = readFileSync(ledger);
  writeFileSync(ledger, JSON.stringify({ format: 'admm-share-ledger/3', ...state, jobId: 'decoy', release: { rows: 1000, sha256: release.sha256 } }));
  assert.throws(() => LedgerBook.open(ledger), isData(ledger, /format admm-share-ledger\/3 \(unsigned\) in a folder whose files are signed with .*party\.key/));
  writeFileSync(ledger, signed);

  const scoringDir = tempDir(t, 'old-scoring-');
  const scoring = join(scoringDir, 'model.scoring-ledger.json');
  const s = new ScoringPrivacy({ epsilon: 1, delta: 1e-5, requests: 3 }, 1);
  const old = { epsilon: 1, delta: 1e-5, sigma: s.sigma, sensitivity: 2, requests: 3, releases: 2, epsilonSpent: s.spentAfter(2) };
  writeFileSync(scoring, JSON.stringify({ format: 'admm-share-scoring-ledger/1', jobs: { 'p-1': old } }));
  assert.deepEqual(ScoringLedger.open(scoring).job('p-1'), { jobId: 'p-1', ...old });
  s.release(new Float64Array(1), scoring, 'p-1');
  assert.throws(() => s.release(new Float64Array(1), scoring, 'p-1'), /scoring budget spent/);
  assert.deepEqual(readJson(scoring).entries.map((e: { releases: number }) => e.releases), [2, 3]);
  writeFileSync(scoring, JSON.stringify({ format: 'admm-share-scoring-ledger/1', jobs: {} }));
  assert.throws(() => ScoringLedger.open(scoring), isData(scoring, /format admm-share-scoring-ledger\/1 \(unsigned\)/));
});

test("two processes on one ledger: the second to book finds the first one's entry and is refused, instead of writing over it", (t) => {
  const dir = tempDir(t, 'two-');
  const ledger = join(dir, 'model.ledger.json');
  const p = new Privacy(cfg);
  p.calibrate(job);
  p.scoreRelease(Float64Array.from([1, 2]), Uint32Array.from([0, 1]), ledger, 'job-a');
  const { seq: _s, prev: _p, mac: _m, ...state } = readJson(ledger).entries[0];
  const [first, second] = [LedgerBook.open(ledger), LedgerBook.open(ledger)];
  first.append({ ...state, jobId: 'job-b' });
  assert.throws(() => second.append({ ...state, jobId: 'job-c' }), isData(ledger, /privacy ledger: another process wrote it since this party read it; run one job at a time with one --model/));
  assert.deepEqual(readJson(ledger).entries.map((e: { jobId: string }) => e.jobId), ['job-a', 'job-b']);
});

test('the scoring ledger: a count edited back is refused by its MAC, one resealed with the key by its history', (t) => {
  const dir = tempDir(t, 'scoring-');
  const path = join(dir, 'model.scoring-ledger.json');
  const s = new ScoringPrivacy({ epsilon: 1, delta: 1e-5, requests: 2 }, 1);
  s.release(new Float64Array(1), path, 'p-1');
  s.release(new Float64Array(1), path, 'p-1');
  const l = readJson(path);
  // Edited consistently (every entry of the job at 0), so that only the MAC can tell.
  const reset = { ...l, entries: l.entries.map((e: object) => ({ ...e, releases: 0, epsilonSpent: 0 })) };
  writeFileSync(path, JSON.stringify(reset));
  assert.throws(() => new ScoringPrivacy({ epsilon: 1, delta: 1e-5, requests: 2 }, 1).release(new Float64Array(1), path, 'p-1'), isData(path, /scoring ledger: entries\[0\]: its MAC does not match/));
  const { seq: _s, prev: _p, mac: _m, ...state } = l.entries[0];
  writeFileSync(path, JSON.stringify({ ...l, entries: [...l.entries, seal(partyKey(dir), l.entries, { ...state, releases: 0, epsilonSpent: 0 })] }));
  assert.throws(() => ScoringLedger.open(path), isData(path, /entries\[2\]\.releases: job p-1 goes backwards: 0 releases after entries\[1\] recorded 2/));
});
