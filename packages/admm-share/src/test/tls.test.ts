// wss:// between real processes, with certificates made at test time: CA pinning on the
// party, mutual TLS as an option, and clear failures when trust does not hold.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { writeCredentials } from '../credentials.js';
import { BIN, STACK_LINE, killAll, run, tempDir } from './procs.js';

after(killAll);

/** A CA, a server certificate for 127.0.0.1 signed by it, and a client certificate. */
function makePki(dir: string, name: string) {
  const f = (n: string) => join(dir, `${name}-${n}`);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const key = (out: string) => ssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', out);
  key(f('ca.key'));
  ssl('req', '-x509', '-new', '-key', f('ca.key'), '-out', f('ca.crt'), '-days', '1', '-subj', `/CN=${name} test CA`);
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  writeFileSync(f('client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const who of ['server', 'client']) {
    key(f(`${who}.key`));
    ssl('req', '-new', '-key', f(`${who}.key`), '-out', f(`${who}.csr`), '-subj', `/CN=${name} ${who}`);
    ssl('x509', '-req', '-in', f(`${who}.csr`), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f(`${who}.crt`), '-days', '1', '-extfile', f(`${who}.ext`));
  }
  return { ca: f('ca.crt'), serverCert: f('server.crt'), serverKey: f('server.key'), clientCert: f('client.crt'), clientKey: f('client.key') };
}

function setup(dir: string) {
  const s = syntheticDataset({ trainRows: 300, testRows: 100, seed: 'tls-test' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const credentials = writeCredentials(join(dir, 'data'), files.parties.map((p) => p.id));
  return { files, credentials };
}

function coordinator(files: ReturnType<typeof setup>['files'], credentials: string, out: string, tls: string[]) {
  return run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--credentials', credentials, '--out', out, '--rounds', '10', ...tls]);
}

function party(files: ReturnType<typeof setup>['files'], m: number, port: number, out: string, tls: string[]) {
  const f = files.parties[m];
  return run(BIN.party, [
    '--coordinator', `wss://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none',
    '--token-file', join(out, '..', 'data', `${f.id}.token`), '--model', join(out, `model-${f.id}.json`), ...tls,
  ]);
}

test('wss with a pinned CA and mutual TLS: the job completes; a party without a client certificate is refused', async (t) => {
  const dir = tempDir(t);
  const pki = makePki(dir, 'good');
  const { files, credentials } = setup(dir);
  const out = join(dir, 'out');
  const coord = coordinator(files, credentials, out, ['--tls-cert', pki.serverCert, '--tls-key', pki.serverKey, '--tls-client-ca', pki.ca]);
  const listening = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number; tls: boolean; mutualTls: boolean };
  assert.deepEqual([listening.tls, listening.mutualTls], [true, true]);
  // No client certificate: the TLS handshake fails before any message.
  const anonymous = party(files, 0, listening.port, out, ['--tls-ca', pki.ca]);
  assert.equal((await anonymous.exit).code, 69);
  assert.match(anonymous.stderr(), /admm-party: error: connection to wss:\/\/127\.0\.0\.1:\d+ failed/);
  assert.doesNotMatch(anonymous.stderr(), STACK_LINE);
  const parties = files.parties.map((_, m) => party(files, m, listening.port, out, ['--tls-ca', pki.ca, '--tls-cert', pki.clientCert, '--tls-key', pki.clientKey]));
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.equal(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).rounds, 10);
});

test('a party pinned to another CA refuses the coordinator\'s certificate', async (t) => {
  const dir = tempDir(t);
  const good = makePki(dir, 'good');
  const other = makePki(dir, 'other');
  const { files, credentials } = setup(dir);
  const out = join(dir, 'out');
  const coord = coordinator(files, credentials, out, ['--tls-cert', good.serverCert, '--tls-key', good.serverKey]);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const p = party(files, 0, port, out, ['--tls-ca', other.ca]);
  assert.equal((await p.exit).code, 69);
  assert.match(p.stderr(), /TLS: the coordinator's certificate is not trusted by --tls-ca/);
  assert.doesNotMatch(p.stderr(), STACK_LINE);
  coord.kill();
});

test('TLS flags that do not fit together are configuration errors', async () => {
  const cases: [string, string[], RegExp][] = [
    [BIN.coordinator, ['--labels', 'x.csv', '--parties', 'a', '--tls-cert', 'c.pem'], /--tls-cert and --tls-key go together/],
    [BIN.coordinator, ['--labels', 'x.csv', '--parties', 'a', '--tls-client-ca', 'ca.pem'], /--tls-client-ca needs --tls-cert and --tls-key/],
    [BIN.coordinator, ['--labels', 'x.csv', '--parties', 'a', '--tls-cert', '/nonexistent.pem', '--tls-key', '/nonexistent.key'], /--tls-cert \/nonexistent\.pem: cannot read it \(ENOENT\)/],
    [BIN.party, ['--coordinator', 'ws://127.0.0.1:1', '--id', 'p', '--data', 'x', '--mechanism', 'none', '--tls-key', 'k.pem'], /--tls-cert and --tls-key go together/],
  ];
  for (const [bin, args, re] of cases) {
    const p = run(bin, args);
    assert.equal((await p.exit).code, 64, args.join(' '));
    assert.match(p.stderr(), re);
  }
});
