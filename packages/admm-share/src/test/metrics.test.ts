// /metrics and /api/status of a real coordinator with real party processes: the Prometheus
// text parses (checked by the small parser below, not by prom-client), the values move while
// the job runs, a party killed and started again shows as rejoining and then as one
// reconnect, a refused connection is counted by its close code, and at the end the metrics
// hold what the job's own trace.jsonl and summary.json say. A browser gets in with the token
// once (/?token=) and a cookie afterwards.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { syntheticDataset } from '@admm-share/core';
import { readTrace } from '@admm-share/coordinator';
import { CloseCodes } from '@admm-share/protocol';
import { writeVerticalSplit } from '../split.js';
import { BIN, killAll, run, tempDir } from './procs.js';
import { README } from './readme-blocks.js';

after(killAll);

const TOKEN = 'metrics-token-0123456789abcdef';
const ROUNDS = 400;

interface Family {
  type: string;
  help: string;
}

/**
 * The Prometheus text exposition format (version 0.0.4), parsed strictly: every sample
 * belongs to a family declared by # HELP and # TYPE before it, label values are quoted and
 * escaped, values are floats (NaN and +Inf included, in any case as Prometheus reads them), and each histogram's buckets are
 * cumulative and end at +Inf with its _count. Returns 'name{label="value",...}' -> value,
 * labels sorted by name.
 */
function parseExposition(text: string): { samples: Map<string, number>; families: Map<string, Family> } {
  const families = new Map<string, Family>();
  const samples = new Map<string, number>();
  const lines = text.split('\n');
  assert.equal(lines.at(-1), '', 'the text ends with a newline');
  for (const [k, line] of lines.slice(0, -1).entries()) {
    const where = `line ${k + 1}: ${line}`;
    if (line === '') continue; // empty lines are allowed between families
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      const f = families.get(meta[2]) ?? { type: '', help: '' };
      if (meta[1] === 'TYPE') {
        assert.match(meta[3], /^(counter|gauge|histogram|summary|untyped)$/, where);
        f.type = meta[3];
      } else f.help = meta[3];
      families.set(meta[2], f);
      continue;
    }
    assert.ok(!line.startsWith('#'), `unexpected comment: ${where}`);
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample: ${where}`);
    const [, name, labelText = '', valueText] = m;
    const labels: [string, string][] = [];
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\[\\"n])*)"(,|$)/gy;
    let lm: RegExpExecArray | null;
    let consumed = 0;
    while (consumed < labelText.length && (lm = re.exec(labelText))) {
      labels.push([lm[1], lm[2].replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))]);
      consumed = re.lastIndex;
    }
    assert.equal(consumed, labelText.length, `bad labels: ${where}`);
    // Prometheus reads values with Go's ParseFloat, which takes NaN and Inf in any case
    // (prom-client writes 'Nan', e.g. an event-loop lag not measured yet).
    const value = /^nan$/i.test(valueText) ? NaN : /^\+?inf$/i.test(valueText) ? Infinity : /^-inf$/i.test(valueText) ? -Infinity : Number(valueText);
    assert.ok(/^nan$/i.test(valueText) || (!Number.isNaN(value) && /^[-+0-9.eEinfINF]+$/.test(valueText)), `bad value: ${where}`);
    const family = [name, name.replace(/_(bucket|sum|count)$/, '')].find((n) => families.has(n));
    assert.ok(family && families.get(family)!.type, `no # TYPE for ${name}: ${where}`);
    if (family !== name) assert.match(families.get(family)!.type, /^(histogram|summary)$/, where);
    labels.sort(([a], [b]) => (a < b ? -1 : 1));
    const key = labels.length ? `${name}{${labels.map(([l, v]) => `${l}="${v}"`).join(',')}}` : name;
    assert.ok(!samples.has(key), `sample twice: ${key}`);
    samples.set(key, value);
  }
  for (const [name, f] of families) {
    assert.ok(f.help && f.type, `${name}: HELP and TYPE`);
    if (f.type !== 'histogram') continue;
    const series = new Map<string, [number, number][]>();
    for (const [key, v] of samples) {
      const b = new RegExp(`^${name}_bucket\\{(.*)le="([^"]+)"(.*)\\}$`).exec(key);
      if (!b) continue;
      const rest = (b[1] + b[3]).replace(/,$/, '').replace(/^,/, '');
      series.set(rest, [...(series.get(rest) ?? []), [b[2] === '+Inf' ? Infinity : Number(b[2]), v]]);
    }
    for (const [rest, buckets] of series) {
      buckets.sort(([a], [b]) => a - b);
      for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i][1] >= buckets[i - 1][1], `${name}{${rest}}: buckets not cumulative`);
      assert.equal(buckets.at(-1)![0], Infinity, `${name}{${rest}}: no +Inf bucket`);
      assert.equal(buckets.at(-1)![1], samples.get(rest ? `${name}_count{${rest}}` : `${name}_count`), `${name}{${rest}}: +Inf bucket vs _count`);
    }
  }
  return { samples, families };
}

test('/metrics: the text format parses, values move while the job runs, a rejoin and a refused connection are counted, and the end state is the trace and the summary; the dashboard token as a cookie', async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 3000, testRows: 500, seed: 'metrics-test' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const out = join(dir, 'out');
  writeFileSync(join(dir, 'token'), TOKEN, { mode: 0o600 });
  const ids = files.parties.map((p) => p.id);
  const coord = run(BIN.coordinator, [
    '--port', '0', '--labels', files.labels, '--test-labels', files.testLabels!, '--parties', ids.join(','), '--out', out, '--job', 'metrics-job',
    '--rounds', String(ROUNDS), '--tol-abs', '0', '--tol-rel', '0', '--anderson', '0', '--eval-every', '100',
    '--http-port', '0', '--http-token-file', join(dir, 'token'), '--http-linger', '600',
  ]);
  const { httpPort } = (await coord.waitFor((r) => r.msg === 'http listening')) as { httpPort: number };
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const url = `http://127.0.0.1:${httpPort}`;
  const auth = { authorization: `Bearer ${TOKEN}` };
  const scrape = async () => {
    const res = await fetch(`${url}/metrics`, { headers: auth });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return parseExposition(await res.text()).samples;
  };
  const status = async () => (await (await fetch(`${url}/api/status`, { headers: auth })).json()) as { phase: string; parties: { id: string; state: string; rejoins: number }[]; rounds: { round: number; objective: number }[] };

  // The token: none or a wrong one is refused; a browser's /?token= gets a cookie that works, the token itself is not in it.
  assert.equal((await fetch(`${url}/metrics`)).status, 401);
  assert.equal((await fetch(`${url}/metrics`, { headers: { authorization: 'Bearer not-the-token-0123456789' } })).status, 401);
  assert.equal((await fetch(`${url}/?token=not-the-token-0123456789`, { redirect: 'manual' })).status, 401);
  const login = await fetch(`${url}/?token=${TOKEN}`, { redirect: 'manual' });
  assert.equal(login.status, 303);
  assert.equal(login.headers.get('location'), '/');
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0];
  assert.match(login.headers.get('set-cookie') ?? '', /HttpOnly; SameSite=Strict/);
  assert.ok(!cookie.includes(TOKEN));
  assert.equal((await fetch(`${url}/api/status`, { headers: { cookie } })).status, 200);
  assert.equal((await fetch(`${url}/`, { headers: { cookie } })).status, 200);
  assert.equal((await fetch(`${url}/api/status`, { headers: { cookie: `${cookie.slice(0, -2)}00` } })).status, 401);

  const waiting = await scrape();
  assert.equal(waiting.get('admm_phase{phase="waiting"}'), 1);
  assert.equal(waiting.get('admm_rounds_total'), 0);
  assert.equal(waiting.get('admm_objective'), undefined, 'no objective before the first round');
  assert.ok(waiting.get('process_resident_memory_bytes')! > 20e6);
  assert.equal(waiting.get('admm_job_info{algorithm="auto",job="metrics-job",loss="logistic",variant="exact"}'), 1);

  // A connection that sends a text frame instead of a hello is refused with 4002 and counted.
  const closed = await new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    ws.on('open', () => ws.send('hello?'));
    ws.on('close', (code) => resolve(code));
    ws.on('error', reject);
  });
  assert.equal(closed, CloseCodes.malformed.code);
  assert.equal((await scrape()).get(`admm_rejected_connections_total{code="${CloseCodes.malformed.code}",reason="malformed"}`), 1);

  const party = (m: number) => {
    const f = files.parties[m];
    return run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--test', f.test!, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`)]);
  };
  const parties = ids.map((_, m) => party(m));
  await coord.waitFor((r) => r.msg === 'round' && Number(r.round) >= 10, 'round 10');
  const a = await scrape();
  // Party 2 is killed: the job waits for it, and says so.
  parties[1].kill();
  await coord.waitFor((r) => r.msg === 'party disconnected; waiting for it to rejoin' && r.party === 'party-2', 'party-2 lost');
  const away = await scrape();
  assert.equal(away.get('admm_party_state{party="party-2",state="rejoining"}'), 1);
  assert.equal(away.get('admm_party_state{party="party-1",state="connected"}'), 1);
  assert.equal((await status()).parties[1].state, 'rejoining');
  assert.equal(away.get('admm_phase{phase="training"}'), 1);
  // The values moved between the two scrapes while rounds ran.
  assert.ok(away.get('admm_rounds_total')! >= 10 && away.get('admm_rounds_total')! >= a.get('admm_rounds_total')!);
  assert.ok(a.get('admm_rounds_total')! >= 1 && Number.isFinite(a.get('admm_objective')));

  const again = party(1);
  await coord.waitFor((r) => r.msg === 'party rejoined' && r.party === 'party-2', 'party-2 rejoined');
  await coord.waitFor((r) => r.msg === 'job done', 'job done');
  for (const p of [parties[0], parties[2], again]) assert.equal((await p.exit).code, 0, p.stderr());
  const endText = await (await fetch(`${url}/metrics`, { headers: auth })).text();
  const end = parseExposition(endText).samples;
  // The README's table names every admm_ metric served, and no other (admm_label_epsilon is
  // there with label privacy only; this job has none).
  const readme = readFileSync(README, 'utf8');
  const table = readme.slice(readme.indexOf('<!-- metrics-table'), readme.indexOf('\n\n', readme.indexOf('| metric | type |')));
  const documented = new Set([...table.matchAll(/`(admm_[a-z_]+)/g)].map((m) => m[1]));
  const served = new Set([...parseExposition(endText).families.keys()].filter((n) => n.startsWith('admm_')));
  assert.deepEqual([...documented].filter((n) => !served.has(n)).sort(), ['admm_label_epsilon']);
  assert.deepEqual([...served].filter((n) => !documented.has(n)), [], 'metrics missing from the README table');
  const trace = readTrace(join(out, 'trace.jsonl'));
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  const last = trace.at(-1)!;
  assert.equal(trace.length, ROUNDS);
  assert.ok(end.get('admm_rounds_total')! > a.get('admm_rounds_total')!, 'rounds moved');
  assert.equal(end.get('admm_rounds_total'), ROUNDS);
  assert.equal(end.get('admm_round'), ROUNDS);
  assert.equal(end.get('admm_objective'), last.objective);
  assert.equal(end.get('admm_primal_residual'), last.primal);
  assert.equal(end.get('admm_dual_residual'), last.dual);
  assert.equal(end.get('admm_round_duration_seconds_count'), ROUNDS);
  assert.equal(end.get('admm_phase{phase="done"}'), 1);
  assert.equal(end.get('admm_job_info{algorithm="admm",job="metrics-job",loss="logistic",variant="exact"}'), 1);
  for (const id of ids) {
    // Every party answered every round once; each round it got c and sent its share, n doubles each way.
    assert.equal(end.get(`admm_party_round_duration_seconds_count{party="${id}"}`), ROUNDS, id);
    for (const dir of ['received', 'sent']) {
      const b = end.get(`admm_party_bytes_${dir}_total{party="${id}"}`)!;
      assert.ok(b >= ROUNDS * 8 * summary.rows.train && b > a.get(`admm_party_bytes_${dir}_total{party="${id}"}`)!, `${id} ${dir}: ${b}`);
    }
    assert.equal(end.get(`admm_party_reconnects_total{party="${id}"}`), id === 'party-2' ? 1 : 0, id);
    assert.equal(end.get(`admm_party_state{party="${id}",state="gone"}`), 1, id);
    assert.equal(end.get(`admm_epsilon_spent{party="${id}"}`), 0, id);
    assert.equal(end.get(`admm_epsilon_budget{party="${id}"}`), undefined, 'no budget without noise');
  }
  const partyBytes = (dir: string) => ids.reduce((acc, id) => acc + end.get(`admm_party_bytes_${dir}_total{party="${id}"}`)!, 0);
  assert.equal(end.get('admm_bytes_received_total'), summary.bytes.toCoordinator);
  assert.equal(end.get('admm_bytes_sent_total'), summary.bytes.fromCoordinator);
  assert.ok(partyBytes('received') <= summary.bytes.toCoordinator && partyBytes('sent') <= summary.bytes.fromCoordinator);
  for (const [k, metric] of [['logLoss', 'log_loss'], ['accuracy', 'accuracy'], ['auc', 'auc']]) assert.equal(end.get(`admm_test_metric{metric="${metric}"}`), summary.test[k], metric);

  // The status API holds the same curve as the trace, and `since` returns only the rounds after it.
  const st = await status();
  assert.equal(st.phase, 'done');
  assert.deepEqual(st.rounds.map((r) => [r.round, r.objective]), trace.map((r) => [r.round, r.objective]));
  assert.equal(st.parties[1].rejoins, 1);
  const tail = (await (await fetch(`${url}/api/status?since=${ROUNDS - 3}`, { headers: auth })).json()) as { rounds: { round: number }[] };
  assert.deepEqual(tail.rounds.map((r) => r.round), [ROUNDS - 2, ROUNDS - 1, ROUNDS]);
  assert.equal((await fetch(`${url}/api/status?since=-1`, { headers: auth })).status, 400);

  coord.child.kill('SIGTERM');
  assert.equal((await coord.exit).code, 130);
});
