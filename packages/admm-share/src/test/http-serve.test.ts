// Online scoring's HTTP endpoint under load and misuse, over real processes: connections over
// --max-connections get 503 and requests over --max-concurrent get 429 before their body is
// read, so 150 clients each sending 1 MiB - 1 byte cannot grow the coordinator by more than
// the slots' bodies; a chunked body over the limit gets its 413 (not a reset); a flood of
// unauthenticated requests with 15 KB paths gives a few short log lines a second; /healthz
// without the token says only that the process is up; and --max-ids-per-minute refuses ids
// over a token's budget with 429 and Retry-After, every request logged with its id count.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { type Socket, connect } from 'node:net';
import { join } from 'node:path';
import { readLibsvm } from '@admm-share/core';
import { BIN, type Proc, freeze, killAll, run, tempDir } from './procs.js';

after(killAll);

const TOKEN = 'serve-limits-token-0123456789abcdef';
const PARTIES = ['party-1', 'party-2', 'party-3'];

/** One simulate run, for its model files (job.json and each party's). */
const shared = tempDir({ after });
let model: Promise<string>;
before(() => {
  const p = run(BIN.share, ['simulate', '--out', join(shared, 'run'), '--rounds', '2', '--no-baselines']);
  model = p.exit.then(({ code }) => (assert.equal(code, 0, p.stderr()), join(shared, 'run')));
  model.catch(() => {});
});

async function serve(dir: string, extra: string[]): Promise<{ c: Proc; url: string; port: number; httpPort: number }> {
  const runDir = await model;
  const token = join(dir, 'token');
  writeFileSync(token, `${TOKEN}\n`, { mode: 0o600 });
  const c = run(BIN.coordinator, ['serve', '--model', join(runDir, 'job.json'), '--port', '0', '--http-port', '0', '--http-token-file', token, '--credentials', join(runDir, 'data', 'credentials.json'), ...extra]);
  const { port } = (await c.waitFor((r) => r.msg === 'listening')) as { port: number };
  const { httpPort } = (await c.waitFor((r) => r.msg === 'serving POST /score')) as { httpPort: number };
  return { c, url: `http://127.0.0.1:${httpPort}`, port, httpPort };
}

/** Resident memory of a process, in MiB. */
function rssMiB(p: Proc): number {
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p.child.pid}/status`, 'utf8'))![1]);
  return kb / 1024;
}

const MIB = 1 << 20;

test('connection and in-flight caps answer before a body is read; 150 clients sending 1 MiB - 1 byte grow the coordinator by less than the slots allow; a chunked body over the limit gets 413', async (t) => {
  const dir = tempDir(t);
  const SLOTS = 2;
  const CONNECTIONS = 6;
  const { c, httpPort } = await serve(dir, ['--max-concurrent', String(SLOTS), '--max-connections', String(CONNECTIONS), '--max-body-bytes', String(MIB)]);
  await new Promise((r) => setTimeout(r, 300));
  const base = rssMiB(c);
  const N = 150;
  const head = `POST /score HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\ncontent-length: ${MIB}\r\n\r\n`;
  const sockets: { s: Socket; answer: string }[] = [];
  for (let i = 0; i < N; i++) {
    const s = connect(httpPort, '127.0.0.1');
    const entry = { s, answer: '' };
    s.on('data', (d: Buffer) => (entry.answer += d.toString('latin1')));
    s.on('error', () => {});
    sockets.push(entry);
    await new Promise<void>((r) => s.once('connect', () => r()));
    s.write(head);
  }
  // Headers only so far: every request but the slots' is answered without its body.
  const status = (e: { answer: string }) => /^HTTP\/1\.1 (\d+)/.exec(e.answer)?.[1];
  for (let i = 0; i < 50 && sockets.filter(status).length < N - SLOTS; i++) await new Promise((r) => setTimeout(r, 100));
  const counts = new Map<string, number>();
  for (const e of sockets) counts.set(status(e) ?? 'none', (counts.get(status(e) ?? 'none') ?? 0) + 1);
  assert.deepEqual(Object.fromEntries(counts), { none: SLOTS, '429': CONNECTIONS - SLOTS, '503': N - CONNECTIONS });
  assert.match(sockets.find((e) => status(e) === '503')!.answer, /--max-connections/);
  assert.match(sockets.find((e) => status(e) === '429')!.answer, /retry-after: 1/i);

  // Now every client sends its body but the last byte, and holds.
  const body = Buffer.alloc(MIB - 1, 0x20);
  await Promise.all(sockets.map(({ s }) => new Promise<void>((r) => (s.destroyed ? r() : s.write(body, () => r())))));
  await new Promise((r) => setTimeout(r, 500));
  const grown = rssMiB(c) - base;
  // The bodies buffered are at most SLOTS x 1 MiB (kept twice while parsed); the rest is the
  // sockets and garbage not yet collected. 150 bodies would be 150 MiB.
  const bound = SLOTS * 2 + 24;
  t.diagnostic(`coordinator RSS ${base.toFixed(0)} MiB, +${grown.toFixed(1)} MiB under ${N} clients (bound ${bound})`);
  assert.ok(grown < bound, `RSS grew by ${grown.toFixed(1)} MiB, more than ${bound}`);
  for (const { s } of sockets) s.destroy();

  // A chunked body over --max-body-bytes: 413 with its message, the connection not reset.
  await new Promise((r) => setTimeout(r, 200));
  const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: httpPort, path: '/score', method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'transfer-encoding': 'chunked' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: text }));
    });
    req.on('error', reject);
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const more = () => {
      while (sent < 1.5 * MIB) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', more);
      }
      req.end();
    };
    more();
  });
  assert.equal(answer.status, 413);
  assert.match(answer.body, /more than --max-body-bytes 1048576 bytes/);
  c.child.kill('SIGTERM');
  await c.exit;
});

test('16 unauthenticated clients with 15 KB paths: a few short log lines a second, the rest counted; /healthz without the token shows only liveness', async (t) => {
  const dir = tempDir(t);
  const { c, url } = await serve(dir, []);
  assert.deepEqual(await (await fetch(`${url}/healthz`)).json(), { status: 'ok' });
  const full = (await (await fetch(`${url}/healthz`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { parties: Record<string, string> };
  assert.deepEqual(Object.keys(full.parties), PARTIES);

  const logged = c.stdout().length;
  const path = `/${'p'.repeat(15_000)}`;
  let sent = 0;
  const until = Date.now() + 1500;
  await Promise.all(
    Array.from({ length: 16 }, async (_, i) => {
      while (Date.now() < until) {
        // An unknown 15 KB path (404), or POST /score without the token (401).
        const res = await fetch(i % 2 ? `${url}${path}` : `${url}/score`, { method: i % 2 ? 'GET' : 'POST', body: i % 2 ? undefined : '{"ids":["a"]}' });
        await res.arrayBuffer();
        sent++;
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 1200));
  const lines = c.stdout().slice(logged).trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const bytes = c.stdout().length - logged;
  t.diagnostic(`${sent} requests, ${lines.length} log lines, ${bytes} bytes of log`);
  assert.ok(sent > 200, `only ${sent} requests sent`);
  // 10 lines a second per status (404, 401) and a count of the rest: well under 100 lines.
  assert.ok(lines.length < 100, `${lines.length} log lines`);
  assert.ok(bytes < 40_000, `${bytes} bytes of log`);
  for (const l of lines.filter((l) => l.msg === 'score request')) assert.ok(String(l.path).length < 200, 'the path is cut');
  const suppressed = lines.filter((l) => l.msg === 'warnings suppressed').reduce((n, l) => n + Number(l.suppressed), 0);
  const shown = lines.filter((l) => l.msg === 'score request').length;
  assert.equal(shown + suppressed, sent, 'every request is logged or counted');
  c.child.kill('SIGTERM');
  await c.exit;
});

test('--max-ids-per-minute: ids over a token\'s budget get 429 with Retry-After; every request is logged with its id count, whatever its status', async (t) => {
  const dir = tempDir(t);
  const runDir = await model;
  const { c, url, port } = await serve(dir, ['--max-ids-per-minute', '150', '--max-request-ids', '100', '--request-timeout', '1500']);
  const parties = PARTIES.map((id) =>
    run(BIN.party, ['predict', '--coordinator', `ws://127.0.0.1:${port}`, '--id', id, '--model', join(runDir, `model-${id}.json`), '--data', join(runDir, 'data', `${id}.test.libsvm`), '--ids', 'first', '--token-file', join(runDir, 'data', `${id}.token`), '--mechanism', 'none']),
  );
  for (const id of PARTIES) await c.waitFor((r) => r.msg === 'party ready to score' && r.party === id, `${id} ready`);
  const ids = readLibsvm(join(runDir, 'data', 'party-1.test.libsvm'), { ids: 'first' }).ids;
  const post = (body: unknown, auth = `Bearer ${TOKEN}`) => fetch(`${url}/score`, { method: 'POST', headers: { authorization: auth }, body: typeof body === 'string' ? body : JSON.stringify(body) });

  assert.equal((await post({ ids: ids.slice(0, 100) })).status, 200);
  // 50 ids left in the bucket, refilled at 2.5 a second: 100 more wait about 20 s.
  const over = await post({ ids: ids.slice(100, 200) });
  assert.equal(over.status, 429);
  const retry = Number(over.headers.get('retry-after'));
  assert.ok(retry >= 17 && retry <= 20, `Retry-After ${retry}`);
  assert.match(((await over.json()) as { error: string }).error, /--max-ids-per-minute 150/);
  assert.equal((await post({ ids: ids.slice(100, 140) })).status, 200, 'what is left of the budget may be used');
  assert.equal((await post({ ids: ids.slice(140, 160) })).status, 429);
  assert.equal((await post({ ids: ['a'] }, 'Bearer wrong')).status, 401);
  assert.equal((await post('not json')).status, 400);
  assert.equal((await post({ ids: ['x', 'x', 'y'] })).status, 400);
  // A frozen party: the request's ids went out, and it times out.
  freeze(parties[2]);
  assert.equal((await post({ ids: ids.slice(140, 145) })).status, 504);
  // Gone: a request fails at once.
  parties[2].child.kill('SIGKILL');
  await parties[2].exit;
  const health = async () => ((await (await fetch(`${url}/healthz`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { parties: Record<string, string> }).parties['party-3'];
  for (let i = 0; i < 50 && (await health()) === 'ready'; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal((await post({ ids: ids.slice(145, 147) })).status, 503);

  await c.waitFor((r) => r.msg === 'score request' && r.status === 503, 'the last request logged');
  const requests = c.stdout().trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>).filter((r) => r.msg === 'score request');
  assert.deepEqual(requests.map((r) => [r.status, r.ids]), [[200, 100], [429, 100], [200, 40], [429, 20], [401, 0], [400, 0], [400, 3], [504, 5], [503, 2]]);
  c.child.kill('SIGTERM');
  await c.exit;
  for (const p of parties.slice(0, 2)) await p.exit;
});

test('serve off loopback without a token is refused (64) unless --insecure-no-token', async () => {
  const runDir = await model;
  const base = ['serve', '--model', join(runDir, 'job.json'), '--port', '0', '--http-port', '0', '--http-host', '0.0.0.0'];
  const refused = run(BIN.coordinator, base);
  const ended = await Promise.race([refused.exit, new Promise<{ code: string }>((r) => setTimeout(() => r({ code: 'still serving after 10 s' }), 10_000))]);
  refused.kill();
  assert.equal(ended.code, 64, refused.stderr());
  assert.match(refused.stderr(), /--http-host 0\.0\.0\.0 without --http-token-file: anyone who can reach 0\.0\.0\.0 could use the HTTP port; give --http-token-file FILE \(or --insecure-no-token/);
  const open = run(BIN.coordinator, [...base, '--insecure-no-token']);
  await open.waitFor((r) => r.msg === 'serving POST /score');
  assert.match(open.stdout(), /no --http-token-file: anyone who can reach the HTTP port can score/);
  open.child.kill('SIGTERM');
  await open.exit;
});
