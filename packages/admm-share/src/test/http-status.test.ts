// The job's status port while a real job trains: /api/status answers a page of at most 1,000
// rounds (`more`, `nextSince`, `limit`), so a fetch stays small however long the job, and
// clients fetching in a loop are paced to 20 requests a second between them; event
// streams whose clients never read hold their 32 slots only until --http-event-seconds, after
// which a new client gets in; the training goes on meanwhile.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { type Socket, connect } from 'node:net';
import { join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

const TOKEN = 'status-page-token-0123456789abcdef';
const MAX_PAGE = 1000;

/** A GET /api/events that never reads what it is sent: the status line it got first, if any. */
function silentStream(port: number): Promise<{ s: Socket; status: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.once('data', (d: Buffer) => {
      s.pause();
      resolve({ s, status: d.toString('latin1').split('\r\n')[0] });
    });
    s.once('connect', () => s.write(`GET /api/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TOKEN}\r\n\r\n`));
    setTimeout(() => reject(new Error('no answer to GET /api/events')), 5000).unref();
  });
}

/** The status line of a raw request `line` (nothing more is read). */
function rawStatus(port: number, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    s.on('error', reject);
    s.once('data', (d: Buffer) => {
      s.destroy();
      resolve(d.toString('latin1').split('\r\n')[0]);
    });
    s.once('connect', () => s.write(`${line}\r\nhost: x\r\n\r\n`));
  });
}

test('the status API is paged (GET /api/status); event streams that never read release their slots after --http-event-seconds while the job trains', async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 200, testRows: 20, seed: 'http-status' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train);
  writeFileSync(join(dir, 'token'), TOKEN, { mode: 0o600 });
  const out = join(dir, 'out');
  const coord = run(BIN.coordinator, [
    '--port', '0', '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out,
    '--rounds', '1000000', '--tol-abs', '0', '--tol-rel', '0', '--anderson', '0',
    '--http-port', '0', '--http-token-file', join(dir, 'token'), '--http-event-seconds', '2',
  ]);
  const { httpPort } = (await coord.waitFor((r) => r.msg === 'http listening')) as { httpPort: number };
  const url = `http://127.0.0.1:${httpPort}`;
  const auth = { headers: { authorization: `Bearer ${TOKEN}` } };
  const get = async (query: string) => {
    const res = await fetch(`${url}/api/status${query}`, auth);
    const text = await res.text();
    return { status: res.status, bytes: text.length, body: res.status === 200 ? (JSON.parse(text) as { round: number; rounds: { round: number }[]; more: boolean; nextSince: number | null }) : undefined };
  };
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((f) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`)]),
  );

  // Pages of 50 rounds (the default and largest page is 1,000): rounds 1..50, then 51..100.
  const PAGE = 50;
  for (let i = 0; i < 600; i++) {
    if (((await get('?limit=1')).body?.round ?? 0) > 2 * PAGE + 10) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const first = await get(`?limit=${PAGE}`);
  assert.equal(first.status, 200);
  assert.deepEqual([first.body!.rounds.length, first.body!.rounds[0].round, first.body!.rounds.at(-1)!.round, first.body!.more, first.body!.nextSince], [PAGE, 1, PAGE, true, PAGE]);
  const second = await get(`?since=${first.body!.nextSince}&limit=${PAGE}`);
  assert.deepEqual([second.body!.rounds[0].round, second.body!.rounds.length], [PAGE + 1, PAGE]);
  const all = await get('');
  assert.ok(all.body!.rounds.length > 2 * PAGE && all.body!.rounds.length <= MAX_PAGE);
  assert.equal(all.body!.more, all.body!.rounds.length === MAX_PAGE);
  assert.equal((await get(`?limit=${MAX_PAGE + 1}`)).status, 400);
  assert.equal((await get('?limit=0')).status, 400);

  // Four clients fetching in a loop are served 20 requests a second between them, not as fast
  // as they ask: 40 requests take about 2 s.
  const t0 = Date.now();
  await Promise.all(Array.from({ length: 4 }, async () => {
    for (let i = 0; i < 10; i++) assert.equal((await get('?limit=1')).status, 200);
  }));
  assert.ok(Date.now() - t0 >= 1800, `40 status requests in ${Date.now() - t0} ms`);

  // 32 streams that never read take every slot; the 33rd is refused.
  const silent = await Promise.all(Array.from({ length: 32 }, () => silentStream(httpPort)));
  assert.ok(silent.every((c) => c.status === 'HTTP/1.1 200 OK'), silent.map((c) => c.status).join(', '));
  assert.equal((await silentStream(httpPort)).status, 'HTTP/1.1 503 Service Unavailable');
  const roundBefore = (await get('?limit=1')).body!.round;
  // Their streams end after 2 s: a new client gets a slot.
  await new Promise((r) => setTimeout(r, 2600));
  const late = await silentStream(httpPort);
  assert.equal(late.status, 'HTTP/1.1 200 OK');
  assert.ok((await get('?limit=1')).body!.round > roundBefore, 'the job trains on');
  for (const c of [...silent, late]) c.s.destroy();

  // Unauthenticated request targets that are not URLs (an absolute form with a broken 12 KB
  // host): 400, and a few short warnings rather than an error line each with the whole target.
  const logged = coord.stdout().length;
  for (let i = 0; i < 50; i++) assert.equal(await rawStatus(httpPort, `GET http://[${'A'.repeat(12_000)} HTTP/1.1`), 'HTTP/1.1 400 Bad Request');
  assert.equal(coord.records.filter((r) => r.msg === 'internal error answering an HTTP request').length, 0);
  const lines = coord.stdout().slice(logged).split('\n').filter((l) => /bad request target|HTTP request target/.test(l));
  assert.ok(lines.length <= 11 && lines.every((l) => l.length < 600), `${lines.length} log lines for 50 bad targets: ${lines.slice(0, 2).join('\n')}`);

  // The parties would wait for the coordinator to come back; the job is not what is tested.
  for (const p of parties) p.kill();
  coord.child.kill('SIGTERM');
  await coord.exit;
});
