// The HTTP limits without processes: a token's id budget (a bucket of a minute's ids refilled
// evenly), the pacing of the status API, the weak-secret rule and paths cut for the log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HttpError, IdBudget, LOGGED_PATH_CHARS, Pacer, loggedPath } from '../connections/http-limits.js';
import { weakSecret } from '@admm-share/runtime';
import { isLoopback } from '../connections/http.js';

test('IdBudget: a burst of a minute\'s ids, then the even refill; tokens apart; Retry-After is the wait for the missing ids', () => {
  const b = new IdBudget(600); // 10 ids a second
  assert.deepEqual(b.take('t', 600, 0), { ok: true });
  assert.deepEqual(b.take('t', 1, 0), { ok: false, retryAfterSeconds: 1 });
  assert.deepEqual(b.take('other', 600, 0), { ok: true }, 'another token has its own bucket');
  // After 2.5 s: 25 ids back; 40 wait (40 - 25) / 10 = 1.5 s, rounded up.
  assert.deepEqual(b.take('t', 40, 2500), { ok: false, retryAfterSeconds: 2 });
  assert.deepEqual(b.take('t', 25, 2500), { ok: true });
  // Never more than a minute's ids, however long idle.
  assert.deepEqual(b.take('t', 601, 3_600_000), { ok: false, retryAfterSeconds: 1 });
  assert.deepEqual(b.take('t', 600, 3_600_000), { ok: true });
});

test('Pacer: one request per 1/rate, a queue longer than the wait allowed is refused with 429', async () => {
  const p = new Pacer(10, 250);
  // The pacer's timers do not keep a process alive (a server does); this one does for the test.
  const alive = setTimeout(() => {}, 5000);
  const t0 = performance.now();
  await Promise.all([p.turn(t0), p.turn(t0), p.turn(t0)]); // at t0, +100, +200 ms
  clearTimeout(alive);
  assert.ok(performance.now() - t0 >= 190);
  const q = new Pacer(10, 250);
  for (let i = 0; i < 3; i++) void q.turn(0).catch(() => {});
  await assert.rejects(q.turn(0), (err: unknown) => err instanceof HttpError && err.status === 429 && err.retryAfterSeconds === 1);
});

test('weak secrets, loopback hosts and logged paths', () => {
  assert.match(weakSecret('a'.repeat(16))!, /fewer than 8 different characters/);
  assert.match(weakSecret('abababababababab')!, /fewer than 8/);
  assert.match(weakSecret('short')!, /at least 16 characters/);
  assert.equal(weakSecret('3f9a0c71e2b84d56'), undefined);
  for (const h of ['127.0.0.1', '127.1.2.3', '::1', 'localhost', '::ffff:127.0.0.1']) assert.ok(isLoopback(h), h);
  for (const h of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.2']) assert.ok(!isLoopback(h), h);
  const cut = loggedPath(`/${'p'.repeat(15_000)}`);
  assert.equal(cut, `/${'p'.repeat(LOGGED_PATH_CHARS - 1)}... (15001 characters)`);
  assert.equal(loggedPath('/score'), '/score');
});
