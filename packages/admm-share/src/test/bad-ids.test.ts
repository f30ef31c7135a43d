// One bad request must not end a party (issue 46, item 2), over real processes. Ids are compared
// as the UTF-8 bytes they are sent as: "t1\uD800" (a lone surrogate, U+FFFD in UTF-8) and
// "t1\uFFFD" used to be two ids to the coordinator and one row to the party, which refused the
// repeated row and left, and every later request got 503; now such a request is a 400 and later
// ones are scored. A scoring party that gets a malformed request (here from a coordinator
// written in this file) refuses it by closing that connection and joins again.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type WebSocket, WebSocketServer } from 'ws';
import { readLibsvm } from '@admm-share/core';
import { type CoordinatorMessage, CloseCodes, PROTOCOL_VERSION, POINT_BYTES, closeReason, decode, encode, validatePartyMessage } from '@admm-share/protocol';
import { BIN, type Proc, killAll, run, tempDir } from './procs.js';
import { psiLabels } from './psi-peer.js';
import { modelScores } from './model-scores.js';

after(killAll);

const PARTIES = ['party-1', 'party-2', 'party-3'];
/** An id every party holds, written with U+FFFD; its lone-surrogate twin is the same UTF-8 bytes. */
const ODD = 't1\uFFFD';

const shared = tempDir({ after });
let trained: Promise<string>;
before(() => {
  trained = (async () => {
    const out = join(shared, 'run');
    const p = run(BIN.share, ['simulate', '--out', out, '--rounds', '3', '--no-baselines']);
    assert.equal((await p.exit).code, 0, p.stderr());
    // Each party's test block with its first id (t1) renamed to ODD.
    for (const party of PARTIES) {
      const f = join(out, 'data', `${party}.test.libsvm`);
      writeFileSync(f, readFileSync(f, 'utf8').replace(/^t1 /, `${ODD} `));
    }
    return out;
  })();
  trained.catch(() => {}); // reported by the tests that await it
});

function scoringParty(runDir: string, party: string, url: string, extra: string[] = []): Proc {
  const f = join(runDir, 'data', `${party}.test.libsvm`);
  return run(BIN.party, ['predict', '--coordinator', url, '--id', party, '--model', join(runDir, `model-${party}.json`), '--data', f, '--ids', 'first', '--token-file', join(runDir, 'data', `${party}.token`), '--mechanism', 'none', ...extra]);
}

test('serve: ids "t1\\uD800" and "t1\\uFFFD" (the same UTF-8 bytes) are a 400 naming the position; no party leaves, and the next request is scored', async (t) => {
  const dir = tempDir(t);
  const runDir = join(dir, 'run');
  cpSync(await trained, runDir, { recursive: true });
  const c = run(BIN.coordinator, ['serve', '--model', join(runDir, 'job.json'), '--port', '0', '--http-port', '0', '--credentials', join(runDir, 'data', 'credentials.json'), '--request-timeout', '3000']);
  const { port } = (await c.waitFor((r) => r.msg === 'listening')) as { port: number };
  const { httpPort } = (await c.waitFor((r) => r.msg === 'serving POST /score')) as { httpPort: number };
  const parties = PARTIES.map((party) => scoringParty(runDir, party, `ws://127.0.0.1:${port}`));
  const url = `http://127.0.0.1:${httpPort}`;
  const states = async () => ((await (await fetch(`${url}/healthz`)).json()) as { parties: Record<string, string> }).parties;
  for (let i = 0; !Object.values(await states()).every((s) => s === 'ready'); i++) {
    assert.ok(i < 200, 'the parties did not become ready');
    await new Promise((r) => setTimeout(r, 100));
  }
  // JSON.stringify writes a lone surrogate as the escape \ud800, as a client would send it.
  const post = (ids: string[]) => fetch(`${url}/score`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ids }) });

  const bad = await post(['t1\uD800', ODD]);
  assert.equal(bad.status, 400);
  assert.match(((await bad.json()) as { error: string }).error, /^ids\[0\]: has a lone UTF-16 surrogate \(\\uD800 at character 3\)/);
  assert.equal((await post(['t2', 't3', '\uDC00'])).status, 400);
  // A body whose bytes are not UTF-8 ("t1" and 0xFF) is refused, not read as "t1\uFFFD".
  const raw = await fetch(`${url}/score`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.concat([Buffer.from('{"ids": ["t1'), Buffer.of(0xff), Buffer.from('"]}')]) });
  assert.equal(raw.status, 400);
  assert.match(((await raw.json()) as { error: string }).error, /not UTF-8/);

  // The same request without the surrogate is scored, ODD included, by every party's model.
  const ids = [ODD, 't2', 't3'];
  const res = await post(ids);
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { results: { id: string; score: number }[] };
  const expected = ids.map((id) =>
    PARTIES.reduce((sum, party) => {
      const block = readLibsvm(join(runDir, 'data', `${party}.test.libsvm`), { ids: 'first' });
      const m = JSON.parse(readFileSync(join(runDir, `model-${party}.json`), 'utf8'));
      const i = block.ids.indexOf(id);
      return sum + modelScores(block.X, m.coefficients, m.preprocessing.rowScaling)[i] + (m.intercept ?? 0);
    }, 0),
  );
  assert.deepEqual(body.results.map((r) => r.id), ids);
  body.results.forEach((r, i) => assert.ok(Math.abs(r.score - expected[i]) < 1e-9, `${r.id}: ${r.score} against ${expected[i]}`));
  assert.deepEqual(await states(), Object.fromEntries(PARTIES.map((p) => [p, 'ready'])));

  c.child.kill('SIGTERM');
  await c.exit;
  for (const p of parties) assert.equal((await p.exit).code, 0, p.stderr());
});

test('a hostile coordinator asks a scoring party for row 0 twice: the party refuses (4003), stays, rejoins, and scores the next request', async (t) => {
  const runDir = await trained;
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, maxPayload: 1 << 20 });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  t.after(() => {
    for (const ws of wss.clients) ws.terminate();
    wss.close();
  });
  const JOB = 'hostile-scoring';
  /** Each connection's close code and reason, as the party closed it. */
  const closes: { code: number; reason: string }[] = [];
  const partials: Float64Array[] = [];
  let connections = 0;
  wss.on('connection', (ws: WebSocket) => {
    ws.on('error', () => undefined);
    const number = ++connections;
    const send = (m: CoordinatorMessage) => ws.send(encode(m));
    ws.on('close', (code, reason) => (closes[number - 1] = { code, reason: reason.toString() }));
    ws.on('message', (data: Buffer) => {
      const msg = validatePartyMessage(decode(data));
      if (msg.type === 'hello') {
        send({ type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: JOB });
        send(psiLabels(JOB, []));
      } else if (msg.type === 'ids') {
        assert.ok(msg.points.length / POINT_BYTES >= 2);
        // The first connection asks for one row twice; the second for two rows, as it should.
        send({ type: 'score', jobId: JOB, rows: Uint32Array.from(number === 1 ? [0, 0] : [0, 1]) });
      } else if (msg.type === 'partial') {
        partials.push(msg.scores);
        ws.close(CloseCodes.done.code, closeReason('done', 'served'));
      }
    });
    send({ type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce: new Uint8Array(32).fill(number) });
  });
  const { port } = wss.address() as { port: number };
  const p = scoringParty(runDir, 'party-2', `ws://127.0.0.1:${port}`);
  assert.equal((await p.exit).code, 0, p.stderr());
  assert.equal(connections, 2, p.stdout());
  assert.equal(closes[0].code, CloseCodes.invalid.code);
  assert.match(closes[0].reason, /score\.rows: row 0 appears twice/);
  const refused = p.records.filter((r) => r.msg === 'refused a bad request from the coordinator; rejoining');
  assert.equal(refused.length, 1, p.stdout());
  assert.equal(partials.length, 1);
  assert.equal(partials[0].length, 2);
  assert.ok(partials[0].every(Number.isFinite));
});

test('a data file with a Latin-1 byte in an id: admm-party and admm-coordinator predict exit 65 naming the file and line; with --id-encoding latin1 they read it', async (t) => {
  const dir = tempDir(t);
  const runDir = await trained;
  // 'Müller' in Latin-1 (ü is the byte 0xFC): it used to be read as 'M\uFFFDller'.
  const mueller = Buffer.from([0x4d, 0xfc, ...Buffer.from('ller')]);
  const data = join(dir, 'party.libsvm');
  writeFileSync(data, Buffer.concat([Buffer.from('a 1:1\nb 1:2\n'), mueller, Buffer.from(' 1:3\n')]));
  const party = (extra: string[]) =>
    run(BIN.party, ['--coordinator', 'ws://127.0.0.1:1', '--id', 'party-1', '--data', data, '--ids', 'first', '--mechanism', 'none', '--model', join(dir, 'model.json'), '--connect-timeout', '300', ...extra]);
  const ids = join(dir, 'ids.csv');
  writeFileSync(ids, Buffer.concat([Buffer.from('id\nx\n'), mueller, Buffer.from('\n')]));
  const coordinator = (extra: string[]) => run(BIN.coordinator, ['predict', '--model', join(runDir, 'job.json'), '--ids', ids, '--port', '0', '--out', join(dir, 'p.csv'), ...extra]);

  const strict = [party([]), coordinator([])];
  for (const [p, file, line] of [[strict[0], data, 3], [strict[1], ids, 3]] as const) {
    assert.equal((await p.exit).code, 65, p.stderr());
    assert.ok(p.stderr().includes(`${file}:${line}: not valid UTF-8`), p.stderr());
    assert.match(p.stderr(), /--id-encoding latin1/);
  }
  // Read: the party then finds no coordinator at port 1 (69); the coordinator listens for its parties.
  const lenient = party(['--id-encoding', 'latin1']);
  assert.equal((await lenient.exit).code, 69, lenient.stderr());
  assert.match(lenient.stderr(), /ECONNREFUSED/);
  const c = coordinator(['--id-encoding', 'latin1']);
  await c.waitFor((r) => r.msg === 'listening');
  c.kill();
  await c.exit;
});
