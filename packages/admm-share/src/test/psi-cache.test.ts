// The PSI caches (--psi-cache, docs/privacy.md 11.7) over real processes: a second simulate run
// on the same ids aligns from the caches (nothing blinded) and trains the same model as a run
// without caches; damaged caches (an edited party table, swapped entries in the coordinator's
// table, a key readable by others, a party's cache copied from another party) are each refused
// by name and the job falls back to a full intersection with the same model; and online scoring
// with the training's caches answers ids seen in training without a lookup at the parties.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, cpSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

const dir = tempDir({ after });
const caches = join(dir, 'caches');

interface Alignment {
  ids: { blinded: number; reused: number };
  caches: Record<string, { id: string; warm: boolean }>;
}

/** A short simulate run on the built-in synthetic set (3 parties, 2000 | 1000 rows): its objective, alignment and logs. */
async function simulate(name: string, cached = true): Promise<{ objective: number; alignment: Alignment; log: (process: string) => string }> {
  const out = join(dir, name);
  const p = run(BIN.share, ['simulate', '--out', out, '--rounds', '5', '--no-baselines', ...(cached ? ['--psi-cache', caches] : [])]);
  assert.equal((await p.exit).code, 0, p.stderr());
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  return { objective: summary.objective, alignment: summary.alignment, log: (process) => readFileSync(join(out, 'logs', `${process}.log`), 'utf8') };
}

/** The one file of a cache folder whose name ends with `suffix` (files are named by the cache's generation). */
function cacheFile(folder: string, suffix: string): string {
  const names = readdirSync(folder).filter((n) => n.endsWith(suffix));
  assert.equal(names.length, 1, `${folder}: ${names.join(', ')}`);
  return join(folder, names[0]);
}
const partyFolder = (party: string) => {
  const root = join(caches, `party-${party}`);
  const [name] = readdirSync(root);
  return join(root, name);
};
const coordinatorFolder = (party: string) => join(caches, 'coordinator', 'parties', party);
const PARTIES = ['party-1', 'party-2', 'party-3'];

let reference: Promise<number>;
before(() => {
  reference = simulate('reference', false).then((r) => r.objective);
  reference.catch(() => {});
});

test('a second run on the same ids aligns from the caches, blinds nothing and trains the same model', async () => {
  const cold = await simulate('cold');
  for (const p of PARTIES) assert.equal(cold.alignment.caches[p].warm, false, p);
  assert.equal(cold.alignment.ids.reused, 0);
  const warm = await simulate('warm');
  for (const p of PARTIES) assert.deepEqual(warm.alignment.caches[p], { id: cold.alignment.caches[p].id, warm: true }, p);
  // 2000 + 1000 label ids and as many party points, per party: all from the caches.
  assert.deepEqual(warm.alignment.ids, { blinded: 0, reused: 3 * 2 * 3000 });
  const intersected = warm.log('party-1').split('\n').filter((l) => l.includes('ids intersected'));
  assert.equal(intersected.length, 2, warm.log('party-1'));
  for (const line of intersected) assert.match(line, /"labelIds":0,.*"blinded":0,"reused":(2000|1000)/);
  assert.equal(cold.objective, await reference);
  assert.equal(warm.objective, await reference);
});

test('damaged caches are refused by name and the job falls back to a full intersection', async () => {
  // (The caches are warm from the test above.)
  const ids = JSON.parse(readFileSync(join(dir, 'warm', 'summary.json'), 'utf8')).alignment.caches;
  // party-3 given party-1's cache (another partner's): the ids differ.
  const three = join(caches, 'party-party-3');
  rmSync(three, { recursive: true });
  cpSync(join(caches, 'party-party-1'), three, { recursive: true });
  // party-1's own table: one byte of a point changed.
  const own = cacheFile(partyFolder('party-1'), '.own.bin');
  const bytes = readFileSync(own);
  bytes[100] ^= 1;
  writeFileSync(own, bytes);
  // The coordinator's table for party-2: two entries' points swapped (the file keeps its size),
  // and party-2's key readable by others.
  const table = cacheFile(coordinatorFolder('party-2'), '.own.bin');
  const t = readFileSync(table);
  const points = 16 + t.readUInt32LE(12) * 16;
  const first = Buffer.from(t.subarray(points, points + 32));
  t.copy(t, points, points + 32, points + 64);
  first.copy(t, points + 32);
  writeFileSync(table, t);
  chmodSync(cacheFile(partyFolder('party-2'), '.key'), 0o644);
  const r = await simulate('damaged');
  for (const p of PARTIES) assert.equal(r.alignment.caches[p].warm, false, p);
  assert.match(r.log('party-1'), /psi cache: not used \([^"]*own\.bin[^"]*MAC/);
  assert.match(r.log('coordinator'), /"party":"party-2"[^\n]*psi cache: not used \([^"]*own\.bin[^"]*MAC/);
  assert.match(r.log('party-2'), /psi cache: not used \([^"]*\.key[^"]*mode 0644/);
  assert.match(r.log('coordinator'), new RegExp(`party party-3: the party holds cache ${ids['party-1'].id}, this coordinator ${ids['party-3'].id}`));
  assert.equal(r.objective, await reference);
});

test('online scoring with the training caches scores ids seen in training without a lookup at the parties, with the scores of a service without caches', async () => {
  // (The caches are those of the last run above.)
  const runDir = join(dir, 'damaged');
  const token = join(dir, 'token');
  writeFileSync(token, 'psi-cache-serve-token-0123456789\n', { mode: 0o600 });
  const serve = async (cached: boolean) => {
    const c = run(BIN.coordinator, ['serve', '--model', join(runDir, 'job.json'), '--port', '0', '--http-port', '0', '--http-token-file', token, '--credentials', join(runDir, 'data', 'credentials.json'), ...(cached ? ['--psi-cache', join(caches, 'coordinator')] : [])]);
    const { port } = (await c.waitFor((r) => r.msg === 'listening')) as { port: number };
    const { httpPort } = (await c.waitFor((r) => r.msg === 'serving POST /score')) as { httpPort: number };
    const parties = PARTIES.map((id) =>
      run(BIN.party, ['predict', '--coordinator', `ws://127.0.0.1:${port}`, '--id', id, '--model', join(runDir, `model-${id}.json`), '--data', join(runDir, 'data', `${id}.test.libsvm`), '--ids', 'first', '--token-file', join(runDir, 'data', `${id}.token`), '--mechanism', 'none', ...(cached ? ['--psi-cache', join(caches, `party-${id}`)] : [])]),
    );
    for (const p of parties) await p.waitFor((r) => r.msg === 'ids intersected (ECDH PSI)');
    await Promise.all(PARTIES.map((id) => c.waitFor((r) => r.msg === 'party ready to score' && r.party === id)));
    const score = async (ids: string[]) => {
      const res = await fetch(`http://127.0.0.1:${httpPort}/score`, { method: 'POST', headers: { authorization: 'Bearer psi-cache-serve-token-0123456789', 'content-type': 'application/json' }, body: JSON.stringify({ ids }) });
      return { status: res.status, body: (await res.json()) as { results?: { id: string; score: number }[]; error?: string } };
    };
    return { c, parties, score };
  };
  const ids = readFileSync(join(runDir, 'data', 'labels.test.csv'), 'utf8').trim().split('\n').slice(1, 21).map((l) => l.split(',')[0]);
  const plain = await serve(false);
  const expected = await plain.score(ids);
  assert.equal(expected.status, 200, JSON.stringify(expected.body));
  plain.c.child.kill('SIGTERM');
  for (const p of [plain.c, ...plain.parties]) await p.exit;

  const cached = await serve(true);
  const got = await cached.score(ids);
  assert.equal(got.status, 200, JSON.stringify(got.body));
  assert.deepEqual(got.body.results, expected.body.results);
  // An id no one holds is not in the caches: it is looked up at every party.
  const unknown = await cached.score(['no-such-customer']);
  assert.equal(unknown.status, 422, JSON.stringify(unknown.body));
  cached.c.child.kill('SIGTERM');
  for (const p of [cached.c, ...cached.parties]) await p.exit;
  for (const p of cached.parties) {
    const looked = p.stdout().split('\n').filter((l) => l.includes('ids looked up'));
    assert.equal(looked.length, 1, p.stdout());
    assert.match(looked[0], /"ids":1[,}]/);
  }
});
