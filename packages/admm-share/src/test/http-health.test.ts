// The coordinator's HTTP port (--http-port): /healthz and /readyz answer without the token and
// follow the job (waiting, training, done; failed is not ready), everything else needs the
// bearer token, --http-linger keeps the port open after the job and the process exits after
// it, and bad flags are refused with a message.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { BIN, STACK_LINE, killAll, run, tempDir } from './procs.js';

after(killAll);

const TOKEN = 'status-token-0123456789abcdef';

function setup(dir: string) {
  const s = syntheticDataset({ trainRows: 300, testRows: 50, seed: 'http-health' });
  return writeVerticalSplit(join(dir, 'data'), s.blocks, s.train);
}

type Files = ReturnType<typeof setup>;

function party(files: Files, m: number, port: number, out: string) {
  const f = files.parties[m];
  return run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`)]);
}

async function get(url: string, token?: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return { status: res.status, body: await res.text() };
}

test('/healthz and /readyz without the token follow the job to its end; other paths need the token; --http-linger keeps the port open, then the process exits 0', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const out = join(dir, 'out');
  writeFileSync(join(dir, 'token'), `${TOKEN}\n`, { mode: 0o600 });
  const ids = files.parties.map((p) => p.id).join(',');
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', ids, '--out', out, '--rounds', '20', '--http-port', '0', '--http-token-file', join(dir, 'token'), '--http-linger', '5']);
  const http = (await coord.waitFor((r) => r.msg === 'http listening', 'http listening')) as { httpPort: number; httpHost: string; token: boolean };
  assert.equal(http.httpHost, '127.0.0.1');
  assert.equal(http.token, true);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  assert.notEqual(http.httpPort, port, 'the HTTP port is not the parties\' port');
  const url = `http://127.0.0.1:${http.httpPort}`;

  assert.deepEqual(await get(`${url}/healthz`), { status: 200, body: 'ok' });
  assert.deepEqual(await get(`${url}/readyz`), { status: 200, body: 'ready: waiting\n' });
  // Everything else: 401 without the token or with a wrong one, 404 for an unknown path with it.
  assert.equal((await get(`${url}/nothing-here`)).status, 401);
  assert.equal((await get(`${url}/nothing-here`, 'wrong-token-0123456789abcdef')).status, 401);
  assert.equal((await get(`${url}/nothing-here`, TOKEN)).status, 404);
  assert.equal((await fetch(`${url}/healthz`, { method: 'POST' })).status, 405);
  // The parties' port answers no HTTP: the status is only on the HTTP port.
  assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 426);

  const parties = files.parties.map((_, m) => party(files, m, port, out));
  await coord.waitFor((r) => r.msg === 'job done', 'job done');
  // The job has ended and the parties are gone; the port stays open for --http-linger.
  assert.deepEqual(await get(`${url}/readyz`), { status: 200, body: 'ready: done\n' });
  assert.match(coord.stdout(), /"msg":"job ended; the HTTP port stays open"/);
  for (const p of parties) assert.equal((await p.exit).code, 0, p.stderr());
  assert.equal((await coord.exit).code, 0, coord.stderr());
  await assert.rejects(fetch(`${url}/healthz`), 'the HTTP port is closed after --http-linger');
});

test('/readyz is 503 once the job has failed; flags from the environment; --http-linger keeps a failed job\'s port open until a signal', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const out = join(dir, 'out');
  const ids = files.parties.map((p) => p.id).join(',');
  const env = { ...process.env, ADMM_COORDINATOR_HTTP_PORT: '0', ADMM_COORDINATOR_HTTP_LINGER: '600' };
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', ids, '--out', out, '--rounds', '1000000', '--tol-abs', '0', '--tol-rel', '0', '--rejoin-timeout', '0'], { env });
  const { httpPort, token } = (await coord.waitFor((r) => r.msg === 'http listening', 'http listening')) as { httpPort: number; token: boolean };
  assert.equal(token, false);
  const url = `http://127.0.0.1:${httpPort}`;
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((_, m) => party(files, m, port, out));
  await coord.waitFor((r) => r.msg === 'round', 'a round');
  assert.deepEqual(await get(`${url}/readyz`), { status: 200, body: 'ready: training\n' });
  // Without --http-token-file every path is open (on 127.0.0.1 only, by default).
  assert.equal((await get(`${url}/nothing-here`)).status, 404);
  parties[0].kill();
  await coord.waitFor((r) => r.msg === 'job failed', 'job failed');
  assert.deepEqual(await get(`${url}/readyz`), { status: 503, body: 'not ready: failed\n' });
  assert.deepEqual(await get(`${url}/healthz`), { status: 200, body: 'ok' });
  for (const p of parties.slice(1)) await p.exit;
  coord.child.kill('SIGTERM');
  assert.equal((await coord.exit).code, 130, coord.stderr());
});

test('bad HTTP flags are refused with a message naming them', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  writeFileSync(join(dir, 'short'), 'too-short\n');
  writeFileSync(join(dir, 'same'), 'aaaaaaaaaaaaaaaa\n', { mode: 0o600 });
  writeFileSync(join(dir, 'open'), `${TOKEN}\n`);
  chmodSync(join(dir, 'open'), 0o644);
  const base = ['--port', '0', '--labels', files.labels, '--parties', 'party-1', '--out', join(dir, 'out')];
  const cases: [string[], RegExp][] = [
    [['--http-port', '0', '--http-token-file', join(dir, 'short')], /--http-token-file .*short: the token must have at least 16 characters/],
    [['--http-port', '0', '--http-token-file', join(dir, 'absent')], /--http-token-file .*absent: cannot read it \(ENOENT\)/],
    [['--http-token-file', join(dir, 'short')], /--http-token-file needs --http-port/],
    [['--http-linger', '5'], /--http-linger needs --http-port/],
    [['--http-port', '-1'], /--http-port must be an integer >= 0, got -1/],
    [['--http-port', '0', '--http-linger', '-2'], /--http-linger must be/],
    [['--http-port', '0', '--http-host', '203.0.113.7', '--insecure-no-token'], /--http-port 0: cannot listen on 203\.0\.113\.7 \(EADDRNOTAVAIL\)/],
    // Off loopback without a token, a low-entropy token, a token others can read.
    [['--http-port', '0', '--http-host', '0.0.0.0'], /--http-host 0\.0\.0\.0 without --http-token-file: .*--insecure-no-token/],
    [['--http-port', '0', '--http-host', '::'], /--http-host :: without --http-token-file/],
    [['--http-port', '0', '--http-token-file', join(dir, 'same')], /--http-token-file .*same: the token has fewer than 8 different characters/],
    [['--http-port', '0', '--http-token-file', join(dir, 'open')], new RegExp(`--http-token-file .*open: other users can read or change it \\(mode 644\\); make it private: chmod 600 ${join(dir, 'open')}`)],
  ];
  for (const [extra, message] of cases) {
    const p = run(BIN.coordinator, [...base, ...extra]);
    const { code } = await p.exit;
    assert.equal(code, 64, `${extra.join(' ')}: ${p.stderr()}`);
    assert.match(p.stderr(), message);
    assert.doesNotMatch(p.stderr(), STACK_LINE);
  }
  // --local-baseline: a usage error without the HTTP port, a data error (65) naming the file and
  // the field when it cannot be read or its content is wrong.
  const file = (name: string, text: string) => (writeFileSync(join(dir, name), text), join(dir, name));
  const baselines: [string[], number, RegExp][] = [
    [['--local-baseline', file('ok.json', '{"party": "party-1", "objective": 0.5, "test": null}')], 64, /--local-baseline needs --http-port/],
    [['--http-port', '0', '--local-baseline', join(dir, 'absent.json')], 65, /absent\.json: local baseline: cannot read it \(ENOENT\)/],
    [['--http-port', '0', '--local-baseline', file('bad.json', '{"party": "party-1",')], 65, /bad\.json: local baseline: not JSON/],
    [['--http-port', '0', '--local-baseline', file('nan.json', '{"party": "party-1", "objective": "low", "test": null}')], 65, /nan\.json: local baseline: objective: Invalid input: expected number, received string/],
    [['--http-port', '0', '--local-baseline', file('metric.json', '{"party": "party-1", "objective": 1, "test": {"f1": 0.5}}')], 65, /metric\.json: local baseline: test: Unrecognized key: "f1"/],
  ];
  for (const [extra, want, message] of baselines) {
    const p = run(BIN.coordinator, [...base, ...extra]);
    const { code } = await p.exit;
    assert.equal(code, want, `${extra.join(' ')}: ${p.stderr()}`);
    assert.match(p.stderr(), message);
    assert.doesNotMatch(p.stderr(), STACK_LINE);
  }
});
