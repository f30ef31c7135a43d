#!/usr/bin/env node
// Prediction figures, over real processes (docs: README "Using the model"):
//   throughput  a model trained by `admm-share simulate` on 4 parties of 100 sparse features
//               (about 6 non-zeros per party and row) scores --rows new rows (default 1e6) with
//               `admm-share predict`: end-to-end seconds, and how much of it is the private set
//               intersection (predictions.json).
//   online      `admm-coordinator serve` with 2 parties: --requests POST /score of 100 ids each,
//               one at a time over loopback; p50 and p99 latency.
// --psi-warm: every process keeps PSI caches (--psi-cache, in a new folder): the throughput job
// runs twice, the second with the caches warm, and the online requests are timed again once
// every id of them has been looked up (so the caches hold it).
// The data is generated once (seeded) into runs/bench-predict/. Prints figures; asserts nothing.
//   npm run bench:predict [-- --rows 1000000 --requests 200 --skip-throughput --psi-warm]
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { rng, writeRows } from './lib/sparse-data.mjs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    requests: { type: 'string', default: '200' },
    'skip-throughput': { type: 'boolean', default: false },
    'skip-online': { type: 'boolean', default: false },
    'psi-warm': { type: 'boolean', default: false },
  },
});
const root = fileURLToPath(new URL('..', import.meta.url));
const BIN = {
  share: join(root, 'packages/admm-share/bin/admm-share.js'),
  coordinator: join(root, 'packages/coordinator/bin/admm-coordinator.js'),
  party: join(root, 'packages/party/bin/admm-party.js'),
};
const cache = join(root, 'runs', 'bench-predict');
mkdirSync(cache, { recursive: true });
// A cached run is reused only if this version can score with it: one from before job.json and the
// models were signed (no coordinator.key) is refused by predict and serve, so it is made again.
const cachedRun = (run) => {
  if (existsSync(join(run, 'job.json')) && existsSync(join(run, 'coordinator.key'))) return true;
  rmSync(run, { recursive: true, force: true });
  return false;
};

/** Every process started, ended with this script even when it fails (a failed request must not leave a service running). */
const children = new Set();
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

function node(script, args, opts = {}) {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  children.add(child);
  let out = '';
  let err = '';
  const lines = [];
  child.stdout.on('data', (d) => {
    out += d;
    for (const l of d.toString().split('\n')) if (l.startsWith('{')) try { lines.push(JSON.parse(l)); } catch {}
  });
  child.stderr.on('data', (d) => (err += d));
  const exit = new Promise((res) => child.on('close', (code) => res(code)));
  return { child, exit, lines, out: () => out, err: () => err };
}

async function must(p, what) {
  const code = await p.exit;
  if (code !== 0) throw new Error(`${what} exited with ${code}: ${p.err().slice(-2000)}`);
}

const waitFor = async (p, pred) => {
  for (;;) {
    const hit = p.lines.find(pred);
    if (hit) return hit;
    if (p.child.exitCode !== null) throw new Error(`exited: ${p.err()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

if (!values['skip-throughput']) {
  const n = Number(values.rows);
  const train = join(cache, 'train-20000.libsvm');
  const score = join(cache, `score-${n}.libsvm`);
  let t0 = performance.now();
  await writeRows(train, 20000, 1);
  await writeRows(score, n, 2);
  console.log(`data ready (${((performance.now() - t0) / 1000).toFixed(1)} s, cached in ${cache})`);
  const run = join(cache, 'run-4x100');
  if (!cachedRun(run)) await must(node(BIN.share, ['simulate', '--data', train, '--split', '100,100,100,100', '--rounds', '10', '--out', run]), 'simulate');
  const psiCache = values['psi-warm'] ? join(cache, `psi-caches-${process.pid}`) : undefined;
  for (const pass of psiCache ? ['caches cold', 'caches warm'] : ['']) {
    t0 = performance.now();
    const p = node(BIN.share, ['predict', '--run', run, '--data', score, '--out', join(cache, 'predictions.csv'), ...(psiCache ? ['--psi-cache', psiCache] : [])]);
    await must(p, 'predict');
    const total = (performance.now() - t0) / 1000;
    const s = JSON.parse(readFileSync(join(cache, 'predictions.json'), 'utf8'));
    console.log(`throughput: ${n.toLocaleString('en')} rows, 4 parties x 100 sparse features${pass ? `, ${pass}` : ''}`);
    console.log(`  end to end (admm-share predict: split, write 4 party files, 5 processes, PSI, score, write CSV): ${total.toFixed(1)} s`);
    console.log(`  prediction job (coordinator start to predictions written): ${s.seconds.total.toFixed(1)} s, of which until every party's ids were intersected: ${s.seconds.alignment.toFixed(1)} s${s.alignment?.ids ? ` (the coordinator blinded ${s.alignment.ids.blinded.toLocaleString('en')} ids, reused ${s.alignment.ids.reused.toLocaleString('en')})` : ''}`);
    console.log(`  after the intersection (score requests, combination, CSV): ${(s.seconds.total - s.seconds.alignment).toFixed(1)} s`);
  }
  if (psiCache) rmSync(psiCache, { recursive: true, force: true });
}

if (!values['skip-online']) {
  const run = join(cache, 'run-online');
  if (!cachedRun(run)) await must(node(BIN.share, ['simulate', '--split', '12,12', '--rounds', '10', '--out', run]), 'simulate');
  const token = 'bench-token-0123456789abcdef';
  writeFileSync(join(cache, 'token'), token);
  chmodSync(join(cache, 'token'), 0o600);
  const psiCache = values['psi-warm'] ? join(cache, `psi-caches-online-${process.pid}`) : undefined;
  const cacheArgs = (who) => (psiCache ? ['--psi-cache', join(psiCache, who)] : []);
  const c = node(BIN.coordinator, ['serve', '--model', join(run, 'job.json'), '--port', '0', '--http-port', '0', '--http-token-file', join(cache, 'token'), '--credentials', join(run, 'data', 'credentials.json'), '--max-ids-per-minute', '100000000', ...cacheArgs('coordinator')]);
  const { port } = await waitFor(c, (r) => r.msg === 'listening');
  const { httpPort } = await waitFor(c, (r) => r.msg === 'serving POST /score');
  const parties = ['party-1', 'party-2'].map((id) =>
    node(BIN.party, ['predict', '--coordinator', `ws://127.0.0.1:${port}`, '--id', id, '--model', join(run, `model-${id}.json`), '--data', join(run, 'data', `${id}.test.libsvm`), '--ids', 'first', '--token-file', join(run, 'data', `${id}.token`), '--mechanism', 'none', '--log-level', 'warn', '--max-lookup-ids-per-connection', '100000000', '--max-probe-ids-per-day', '100000000', ...cacheArgs(id)]),
  );
  const url = `http://127.0.0.1:${httpPort}`;
  for (;;) {
    const h = await (await fetch(`${url}/healthz`, { headers: { authorization: `Bearer ${token}` } })).json();
    if (Object.values(h.parties).every((v) => v === 'ready')) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const ids = readFileSync(join(run, 'data', 'labels.test.csv'), 'utf8').trim().split('\n').slice(1).map((l) => l.split(',')[0]);
  const requests = Number(values.requests);
  const timed = async (what) => {
    const r = rng(3);
    const times = [];
    for (let k = 0; k < requests + 10; k++) {
      const pick = new Set();
      while (pick.size < 100) pick.add(ids[Math.floor(r() * ids.length)]);
      const t0 = performance.now();
      const res = await fetch(`${url}/score`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ ids: [...pick] }) });
      const body = await res.json();
      if (res.status !== 200 || body.results.length !== 100) throw new Error(`request ${k}: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
      if (k >= 10) times.push(performance.now() - t0); // the first 10 warm up
    }
    times.sort((x, y) => x - y);
    const q = (f) => times[Math.min(times.length - 1, Math.floor(f * times.length))].toFixed(1);
    console.log(`online${what}: POST /score with 100 ids, 2 parties, loopback, ${requests} requests one at a time: p50 ${q(0.5)} ms, p90 ${q(0.9)} ms, p99 ${q(0.99)} ms`);
  };
  await timed(psiCache ? ', PSI caches on, ids not seen before' : '');
  // The same requests again: every id has been looked up once, so the caches hold it.
  if (psiCache) await timed(', PSI caches on, ids already seen');
  c.child.kill('SIGTERM');
  await Promise.all([c, ...parties].map((p) => p.exit));
  if (psiCache) rmSync(psiCache, { recursive: true, force: true });
}
