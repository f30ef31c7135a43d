// `admm-share credentials` over a real process: the files it writes, their modes, its
// refusals, and a coordinator and parties that accept what it wrote.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { BIN, STACK_LINE, killAll, run, tempDir } from './procs.js';

after(killAll);

const HEX64 = /^[0-9a-f]{64}$/;

function readSecrets(dir: string): Record<string, string> {
  return JSON.parse(readFileSync(join(dir, 'credentials.json'), 'utf8'));
}

test('credentials: credentials.json and one token per party, mode 0600, 256-bit secrets, nothing printed but paths', async (t) => {
  const dir = join(tempDir(t), 'creds');
  const p = run(BIN.share, ['credentials', '--parties', 'bank,telecom', 'shop', '--out', dir]);
  assert.equal((await p.exit).code, 0, p.stderr());
  const printed = JSON.parse(p.stdout());
  assert.deepEqual(printed, {
    credentials: join(dir, 'credentials.json'),
    tokens: { bank: join(dir, 'bank.token'), telecom: join(dir, 'telecom.token'), shop: join(dir, 'shop.token') },
  });
  assert.deepEqual(readdirSync(dir).sort(), ['bank.token', 'credentials.json', 'shop.token', 'telecom.token'], 'no temporary files left');
  const secrets = readSecrets(dir);
  assert.deepEqual(Object.keys(secrets), ['bank', 'telecom', 'shop']);
  for (const [id, secret] of Object.entries(secrets)) {
    assert.match(secret, HEX64, id);
    assert.equal(readFileSync(join(dir, `${id}.token`), 'utf8'), `${secret}\n`);
    assert.ok(!p.stdout().includes(secret) && !p.stderr().includes(secret), 'secrets are never printed');
  }
  assert.equal(new Set(Object.values(secrets)).size, 3, 'one secret per party');
  for (const f of readdirSync(dir)) assert.equal(statSync(join(dir, f)).mode & 0o777, 0o600, f);
  assert.equal(statSync(dir).mode & 0o777, 0o700, 'a directory it creates is private too');
});

test('credentials: refuses to overwrite without --force (writing nothing), replaces with --force', async (t) => {
  const dir = join(tempDir(t), 'creds');
  const first = run(BIN.share, ['credentials', '--parties', 'a,b', '--out', dir]);
  assert.equal((await first.exit).code, 0, first.stderr());
  const before = readSecrets(dir);

  const again = run(BIN.share, ['credentials', '--parties', 'a,b', '--out', dir]);
  assert.equal((await again.exit).code, 64);
  assert.match(again.stderr(), new RegExp(`${join(dir, 'credentials.json')}, ${join(dir, 'a.token')}, ${join(dir, 'b.token')} already exist; pass --force`));
  assert.doesNotMatch(again.stderr(), STACK_LINE);
  assert.deepEqual(readSecrets(dir), before);

  // One existing token is enough to refuse, and then no other file is written either.
  const other = join(dirname(dir), 'other');
  mkdirSync(other);
  writeFileSync(join(other, 'b.token'), 'keep\n');
  const partial = run(BIN.share, ['credentials', '--parties', 'a,b,c', '--out', other]);
  assert.equal((await partial.exit).code, 64);
  assert.match(partial.stderr(), /b\.token already exists; pass --force/);
  assert.deepEqual(readdirSync(other), ['b.token']);
  assert.equal(readFileSync(join(other, 'b.token'), 'utf8'), 'keep\n');

  const forced = run(BIN.share, ['credentials', '--parties', 'a,b', '--out', dir, '--force']);
  assert.equal((await forced.exit).code, 0, forced.stderr());
  const after = readSecrets(dir);
  assert.deepEqual(Object.keys(after), ['a', 'b']);
  for (const id of ['a', 'b']) {
    assert.notEqual(after[id], before[id], 'new secrets');
    assert.equal(readFileSync(join(dir, `${id}.token`), 'utf8'), `${after[id]}\n`);
    assert.equal(statSync(join(dir, `${id}.token`)).mode & 0o777, 0o600);
  }
});

test('credentials: invalid or repeated party ids are usage errors (exit 64), nothing written', async (t) => {
  const base = tempDir(t);
  const cases: [string[], RegExp][] = [
    [['--parties', '../evil'], /'\.\.\/evil' is not a valid party id/],
    [['--parties', 'a,b c,d'], /'b c'|not a valid party id/],
    [['--parties', 'ok,bad/id'], /'bad\/id' is not a valid party id/],
    [['--parties', 'a,b,a'], /party id 'a' is given twice/],
    [['--parties', ','], /no party ids given/],
    [[], /Missing required argument: parties/],
  ];
  for (const [i, [args, re]] of cases.entries()) {
    const dir = join(base, `d${i}`);
    const p = run(BIN.share, ['credentials', ...args, '--out', dir]);
    assert.equal((await p.exit).code, 64, `${args.join(' ')}: ${p.stderr()}`);
    assert.match(p.stderr(), re, args.join(' '));
    assert.doesNotMatch(p.stderr(), STACK_LINE);
    assert.equal(existsSync(dir), false, `${args.join(' ')}: nothing written`);
  }
});

test('credentials: a malformed credentials file stops the coordinator with exit 65, naming the file and what is wrong', async (t) => {
  const dir = tempDir(t);
  const long = 'abcdefgh12345678';
  const cases: [string, RegExp][] = [
    [JSON.stringify({ '../evil': long }), /credentials: \.\.\/evil: not a valid party id/],
    [JSON.stringify({ bank: 'short' }), /credentials: bank: a secret must have at least 16 characters/],
    [JSON.stringify({ bank: 16 }), /credentials: bank: expected a secret/],
    [JSON.stringify({ bank: 'x'.repeat(16) }), /credentials: bank: a secret must have at least 8 different characters/],
    [JSON.stringify([long]), /credentials: expected a JSON object/],
    ['{"bank": ', /credentials: not JSON/],
  ];
  for (const [i, [text, re]] of cases.entries()) {
    const file = join(dir, `c${i}.json`);
    writeFileSync(file, text);
    const p = run(BIN.coordinator, ['--labels', join(dir, 'none.csv'), '--parties', 'bank', '--credentials', file]);
    assert.equal((await p.exit).code, 65, `${text}: ${p.stderr()}`);
    assert.ok(p.stderr().includes(file), `${text}: names the file: ${p.stderr()}`);
    assert.match(p.stderr(), re, text);
    assert.doesNotMatch(p.stderr(), STACK_LINE);
  }
  // Valid secrets in a file other users can read: refused (64), naming the fix.
  const open = join(dir, 'open.json');
  writeFileSync(open, JSON.stringify({ bank: long }));
  chmodSync(open, 0o644);
  const p = run(BIN.coordinator, ['--labels', join(dir, 'none.csv'), '--parties', 'bank', '--credentials', open]);
  assert.equal((await p.exit).code, 64, p.stderr());
  assert.ok(p.stderr().includes(`--credentials ${open}: other users can read or change it (mode 644); make it private: chmod 600 ${open}`), p.stderr());
});

test('credentials: a coordinator and its parties accept the files (--credentials, --token-file) and train', async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: 300, testRows: 100, seed: 'credentials-test' });
  const files = writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
  const ids = files.parties.map((f) => f.id);
  const creds = join(dir, 'creds');
  const gen = run(BIN.share, ['credentials', '--parties', ids.join(','), '--out', creds]);
  assert.equal((await gen.exit).code, 0, gen.stderr());
  const out = join(dir, 'out');
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', ids.join(','), '--job', 'cred-job', '--out', out, '--rounds', '5', '--credentials', join(creds, 'credentials.json')]);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((f) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--model', join(out, `model-${f.id}.json`), '--mechanism', 'none', '--token-file', join(creds, `${f.id}.token`)]),
  );
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.equal(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).rounds, 5);
  // And a party holding another party's token is refused.
  const wrong = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', ids.join(','), '--out', join(dir, 'out2'), '--credentials', join(creds, 'credentials.json'), '--hello-timeout', '5000']);
  const p2 = ((await wrong.waitFor((r) => r.msg === 'listening')) as { port: number }).port;
  const f = files.parties[0];
  const impostor = run(BIN.party, ['--coordinator', `ws://127.0.0.1:${p2}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--model', join(dir, 'x.json'), '--mechanism', 'none', '--token-file', join(creds, `${ids[1]}.token`)]);
  assert.equal((await impostor.exit).code, 69);
  assert.match(impostor.stderr(), /bad or missing credential/);
  wrong.kill();
});

test("credentials: a party's --token-file holds a strong secret in a private file, or the party stops with exit 64 naming the file and the fix", async (t) => {
  const dir = tempDir(t);
  const cases: [string, number, RegExp][] = [
    ['x'.repeat(16), 0o600, /--token-file .*weak\.token: the token has fewer than 8 different characters/],
    ['short', 0o600, /--token-file .*weak\.token: the token must have at least 16 characters/],
    ['abcdefgh12345678', 0o644, /--token-file .*weak\.token: other users can read or change it \(mode 644\); make it private: chmod 600 /],
  ];
  for (const [secret, mode, re] of cases) {
    const file = join(dir, 'weak.token');
    rmSync(file, { force: true });
    writeFileSync(file, secret, { mode });
    const p = run(BIN.party, ['--coordinator', 'ws://127.0.0.1:9', '--id', 'bank', '--data', join(dir, 'none.libsvm'), '--model', join(dir, 'm.json'), '--mechanism', 'none', '--token-file', file]);
    assert.equal((await p.exit).code, 64, p.stderr());
    assert.match(p.stderr(), re);
    assert.doesNotMatch(p.stderr(), STACK_LINE);
  }
});
