// Membership probing in online scoring (docs/privacy.md, "Membership probing"): every
// `lookup` tells the coordinator which of its ids the party holds. Before, a coordinator tested
// 99,216 ids in 30 s on one connection and the party logged nothing; now the party logs each
// lookup with its running totals, and refuses one beyond --max-lookup-ids-per-connection or
// the day's --max-probe-ids-per-day with a `found` that says why: that request fails (the
// coordinator answers it with an error), the party stays connected and answers the next.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readLibsvm } from '@admm-share/core';
import { type PartyMessage, CloseCodes } from '@admm-share/protocol';
import { psiLabels } from './psi-peer.js';
import { BIN, type Proc, killAll, run, tempDir } from './procs.js';
import { type Conn, JOB, candidates, scriptedCoordinator, welcome } from './probe-support.js';

after(killAll);

/** One simulate run (3 parties, 2000 | 1000 synthetic rows), copied by each test. */
const shared = tempDir({ after });
let simulated: Promise<string>;
before(() => {
  const out = join(shared, 'run');
  const p = run(BIN.share, ['simulate', '--out', out, '--rounds', '3']);
  simulated = p.exit.then(({ code }) => (code === 0 ? out : Promise.reject(new Error(p.stderr()))));
  simulated.catch(() => {});
});
async function runCopy(dir: string): Promise<string> {
  const out = join(dir, 'run');
  cpSync(await simulated, out, { recursive: true });
  return out;
}

function predictParty(runDir: string, party: string, url: string, extra: string[]): Proc {
  return run(BIN.party, ['predict', '--coordinator', url, '--id', party, '--model', join(runDir, `model-${party}.json`), '--data', join(runDir, 'data', `${party}.test.libsvm`), '--ids', 'first', '--token-file', join(runDir, 'data', `${party}.token`), '--mechanism', 'none', '--reconnect-timeout', '5000', ...extra]);
}

test('a coordinator that looks up ids over the caps: each lookup is logged with its totals, the one beyond the connection cap and the one beyond the day cap are refused with a reason and no points, and the party answers on and ends cleanly', async (t) => {
  const dir = tempDir(t);
  const runDir = await runCopy(dir);
  /** Lookup sizes per connection; each `found` is recorded and the next lookup sent. */
  const plan: Record<number, number[]> = { 1: [40, 20, 10], 2: [50], 3: [30] };
  const sizes = new Map<number, number>();
  const found: { conn: number; ids: number; points: number; refused: string | undefined }[] = [];
  let from = 0;
  const next = (conn: Conn) => {
    const n = plan[conn.number].shift();
    // Connections 1 and 2 break (the party reconnects), connection 3 ends the job.
    if (n === undefined) return conn.number < 3 ? conn.terminate() : conn.close(CloseCodes.done.code, 'job done');
    const lookup = psiLabels(JOB, candidates(n, from));
    from += n;
    sizes.set(conn.number, n);
    conn.send({ type: 'lookup', jobId: JOB, points: lookup.points });
  };
  const fake = await scriptedCoordinator(t, (conn: Conn, msg: PartyMessage) => {
    if (msg.type === 'hello') {
      conn.send(welcome());
      conn.send({ type: 'psi', jobId: JOB, set: 'train', total: 0, at: 0, points: new Uint8Array(0) });
    } else if (msg.type === 'ids') next(conn);
    else if (msg.type === 'found') {
      found.push({ conn: conn.number, ids: sizes.get(conn.number)!, points: msg.points.length / 32, refused: msg.refused });
      next(conn);
    }
  });
  const p = predictParty(runDir, 'party-1', fake.url, ['--max-lookup-ids-per-connection', '50', '--max-probe-ids-per-day', '120']);
  assert.equal((await p.exit).code, 0, p.stderr());
  assert.deepEqual(
    found.map((f) => [f.conn, f.ids, f.points, f.refused !== undefined]),
    [
      [1, 40, 40, false],
      [1, 20, 0, true],
      [1, 10, 10, false],
      [2, 50, 50, false],
      [3, 30, 0, true],
    ],
  );
  assert.equal(found[1].refused, 'a lookup of 20 ids refused: 40 ids were looked up on this connection already, at most 50 (--max-lookup-ids-per-connection)');
  assert.match(found[4].refused!, /^a lookup of 30 ids refused: 100 candidate ids were answered today \(UTC\) for ws:\/\/127\.0\.0\.1:\d+\/ in scoring, at most 120 a day \(--max-probe-ids-per-day\)$/);
  // Every lookup in the log: its size and the running totals; the refusals as warnings.
  const looked = p.records.filter((r) => r.msg === 'ids looked up').map((r) => [r.ids, r.connectionIds, r.idsToday, r.cap]);
  assert.deepEqual(looked, [
    [40, 40, 40, 120],
    [10, 50, 50, 120],
    [50, 50, 100, 120],
  ]);
  const refused = p.records.filter((r) => r.level === 40 && /^membership probing: a lookup of/.test(String(r.msg))).map((r) => [r.ids, r.connectionIds, r.answeredToday]);
  assert.deepEqual(refused, [
    [20, 40, 40],
    [30, 0, 100],
  ]);
  const budget = JSON.parse(readFileSync(join(runDir, 'model-party-1.probe-budget.json'), 'utf8'));
  // Kept per coordinator URL: the simulate run's coordinator has its training's label ids (2000 + 1000), this one the lookups.
  assert.deepEqual(budget.coordinators[`${fake.url}/`], { training: 0, scoring: 100 });
  assert.deepEqual(Object.values(budget.coordinators).find((c) => c !== budget.coordinators[`${fake.url}/`]), { training: 3000, scoring: 0 });
});

test('admm-coordinator serve: a lookup a party refuses fails that request with an error naming the party and its cap; the party stays and the next request is scored', async (t) => {
  const dir = tempDir(t);
  const runDir = await runCopy(dir);
  const token = 'probe-token-0123456789abcdef';
  writeFileSync(join(dir, 'token'), token + '\n', { mode: 0o600 });
  const c = run(BIN.coordinator, ['serve', '--model', join(runDir, 'job.json'), '--port', '0', '--http-port', '0', '--http-token-file', join(dir, 'token'), '--credentials', join(runDir, 'data', 'credentials.json'), '--max-request-ids', '200']);
  const { port } = (await c.waitFor((r) => r.msg === 'listening')) as { port: number };
  const { httpPort } = (await c.waitFor((r) => r.msg === 'serving POST /score')) as { httpPort: number };
  const url = `http://127.0.0.1:${httpPort}`;
  const parties = ['party-1', 'party-2', 'party-3'].map((party) => predictParty(runDir, party, `ws://127.0.0.1:${port}`, party === 'party-1' ? ['--max-lookup-ids-per-connection', '150'] : []));
  const healthy = async () => ((await (await fetch(`${url}/healthz`, { headers: { authorization: `Bearer ${token}` } })).json()) as { parties: Record<string, string> }).parties;
  for (let i = 0; i < 200 && !Object.values(await healthy()).every((s) => s === 'ready'); i++) await new Promise((r) => setTimeout(r, 100));
  const ids = readLibsvm(join(runDir, 'data', 'party-1.test.libsvm'), { ids: 'first' }).ids.slice(0, 100);
  const post = (body: unknown) => fetch(`${url}/score`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  assert.equal((await post({ ids })).status, 200);
  const over = await post({ ids });
  assert.equal(over.status, 429, "a refused lookup is a rate limit: the party counts ids a day");
  assert.match(((await over.json()) as { error: string }).error, /party party-1 refused the lookup: a lookup of 100 ids refused: 100 ids were looked up on this connection already, at most 150 \(--max-lookup-ids-per-connection\)/);
  // The party did not leave: the next request within the cap is scored.
  assert.deepEqual(Object.values(await healthy()), ['ready', 'ready', 'ready']);
  const ok = await post({ ids: ids.slice(0, 50) });
  assert.equal(ok.status, 200);
  assert.equal(((await ok.json()) as { results: unknown[] }).results.length, 50);
  assert.equal(parties[0].child.exitCode, null, 'party-1 is still running');
  assert.ok(c.records.some((r) => r.msg === 'party refused a lookup' && r.party === 'party-1'), c.stdout());
  for (const p of [c, ...parties]) p.kill();
});
