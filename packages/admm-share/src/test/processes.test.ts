// The coordinator and party executables started directly, against each other and against
// misbehaving peers written here.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import { csrSelectRows, fitCentral, helloProof, logistic, syntheticDataset } from '@admm-share/core';
import { CloseCodes, PROTOCOL_VERSION, decode, encode, validateCoordinatorMessage } from '@admm-share/protocol';
import { writeVerticalSplit } from '../split.js';
import { COORDINATOR_NODE_FLAGS, PARTY_ENV, PARTY_NODE_FLAGS } from '../processes.js';
import { assertNearOptimum } from '@admm-share/core/test-support';
import { BIN, STACK_LINE, killAll, run, tempDir } from './procs.js';

after(killAll);

function dataset(dir: string) {
  const s = syntheticDataset({ trainRows: 400, testRows: 200, seed: 'processes-test' });
  return writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
}

function startCoordinator(files: ReturnType<typeof dataset>, out: string, extra: string[] = []) {
  return run(BIN.coordinator, [
    '--port', '0',
    '--labels', files.labels,
    '--test-labels', files.testLabels!,
    '--parties', files.parties.map((p) => p.id).join(','),
    '--job', 'test-job',
    '--out', out,
    '--rounds', '30',
    // Short, so that the silent client below is closed soon, but long enough for a real party
    // on a loaded machine to answer the challenge (a party turned away would fail the test).
    '--hello-timeout', '3000',
    ...extra,
  ]);
}

function startParty(files: ReturnType<typeof dataset>, m: number, port: number, out: string) {
  const f = files.parties[m];
  return run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--test', f.test!, '--ids', 'first', '--model', join(out, `model-${f.id}.json`), '--mechanism', 'none']);
}

/** Open a raw client, send `frames`, and resolve with the close code and reason it receives. */
function rawClient(port: number, frames: (Buffer | string)[]): Promise<{ code: number; reason: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    ws.on('error', reject);
    ws.on('open', () => {
      for (const f of frames) ws.send(f);
    });
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
  });
}

function hello(partyId: string, protocolVersion = PROTOCOL_VERSION) {
  return encode({ type: 'hello', protocolVersion, partyId, jobId: null, features: 3, trainRows: 10, testRows: 10, proof: null, noise: false, model: null });
}

test("the party's and the coordinator's executables start node with the flags and environment simulate gives them, and run as commands", () => {
  const env = Object.entries(PARTY_ENV).map(([k, v]) => `${k}=${v} `).join('');
  assert.equal(readFileSync(BIN.party, 'utf8').split('\n')[0], `#!/usr/bin/env -S ${env}node ${PARTY_NODE_FLAGS.join(' ')}`);
  assert.equal(readFileSync(BIN.coordinator, 'utf8').split('\n')[0], `#!/usr/bin/env -S node ${COORDINATOR_NODE_FLAGS.join(' ')}`);
  // Run through their first lines (as `admm-party` on a PATH), not as `node admm-party.js`.
  assert.match(execFileSync(BIN.party, ['--help'], { encoding: 'utf8' }), /^admm-party --coordinator/);
  assert.match(execFileSync(BIN.coordinator, ['--help'], { encoding: 'utf8' }), /^admm-coordinator/);
});

test('hostile and mistaken clients are turned away with named close codes, and the job still completes', async (t) => {
  const dir = tempDir(t);
  const files = dataset(dir);
  const out = join(dir, 'out');
  const coord = startCoordinator(files, out);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening', 'listening')) as { port: number };

  const cases = await Promise.all([
    rawClient(port, [randomBytes(64)]),
    rawClient(port, ['{"type":"hello"}']),
    rawClient(port, [hello('party-1', PROTOCOL_VERSION + 1)]),
    rawClient(port, [hello('mallory')]),
    rawClient(port, [encode({ type: 'ready', jobId: 'test-job', privacy: { mechanism: 'none', epsilon: null, delta: null, rounds: 1, sigma: 0, sensitivity: 0, accountant: null, seeded: false } })]),
    rawClient(port, []), // says nothing: closed after --hello-timeout
  ]);
  assert.equal(cases[0].code, CloseCodes.malformed.code);
  assert.equal(cases[1].code, CloseCodes.malformed.code);
  assert.equal(cases[2].code, CloseCodes.versionMismatch.code);
  assert.match(cases[2].reason, new RegExp(`coordinator speaks version ${PROTOCOL_VERSION}, party party-1 sent version ${PROTOCOL_VERSION + 1}`));
  assert.equal(cases[3].code, CloseCodes.unknownParty.code);
  assert.match(cases[3].reason, /'mallory'/);
  assert.equal(cases[4].code, CloseCodes.unexpected.code);
  assert.equal(cases[5].code, CloseCodes.helloTimeout.code);

  const parties = files.parties.map((_, m) => startParty(files, m, port, out));
  // A second process claiming an id that is already connected is refused; the first stays.
  await coord.waitFor((r) => r.msg === 'party joined' && r.party === 'party-1');
  const dup = await rawClient(port, [hello('party-1')]);
  assert.ok(dup.code === CloseCodes.duplicateParty.code || dup.code === CloseCodes.unexpected.code, `close code ${dup.code}`);

  for (const p of [coord, ...parties]) {
    const { code } = await p.exit;
    assert.equal(code, 0, p.stderr());
  }
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.rounds, 30);
  assert.ok(Number.isFinite(summary.objective));
  for (const f of files.parties) assert.ok(existsSync(join(out, `model-${f.id}.json`)));
  // Every rejection was logged with its close code.
  const closes = coord.records.filter((r) => r.msg === 'closing connection').map((r) => r.close);
  for (const c of [CloseCodes.malformed.code, CloseCodes.versionMismatch.code, CloseCodes.unknownParty.code, CloseCodes.helloTimeout.code])
    assert.ok(closes.includes(c), `logged close ${c}`);
});

test('a party refuses a coordinator that speaks another protocol version, with a clear reason on both sides', async (t) => {
  const dir = tempDir(t);
  const files = dataset(dir);
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  t.after(() => wss.close());
  await new Promise((r) => wss.once('listening', r));
  const port = (wss.address() as { port: number }).port;
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    wss.on('connection', (ws) => {
      ws.on('error', () => undefined);
      ws.send(encode({ type: 'challenge', protocolVersion: PROTOCOL_VERSION + 7, nonce: new Uint8Array(32) }));
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    }),
  );
  const party = startParty(files, 0, port, dir);
  const { code } = await party.exit;
  const seen = await closed;
  assert.equal(seen.code, CloseCodes.versionMismatch.code);
  assert.match(seen.reason, new RegExp(`party speaks version ${PROTOCOL_VERSION}, coordinator sent version ${PROTOCOL_VERSION + 7}`));
  assert.equal(code, 69);
  assert.match(party.stderr(), /admm-party: error: .*version/);
  assert.doesNotMatch(party.stderr(), STACK_LINE);
});

test('a party that dies mid-training ends the job cleanly everywhere (no hang, exit 69)', async (t) => {
  const dir = tempDir(t);
  const files = dataset(dir);
  const out = join(dir, 'out');
  const coord = startCoordinator(files, out, ['--rounds', '100000', '--tol-abs', '0', '--tol-rel', '0', '--rejoin-timeout', '0']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((_, m) => startParty(files, m, port, out));
  await coord.waitFor((r) => r.msg === 'round' && (r.round as number) >= 5, 'round 5');
  parties[1].child.kill('SIGKILL');
  const c = await coord.exit;
  assert.equal(c.code, 69);
  assert.match(coord.stderr(), /admm-coordinator: error: party party-2 disconnected/);
  for (const m of [0, 2]) {
    const r = await parties[m].exit;
    assert.equal(r.code, 69);
    assert.match(parties[m].stderr(), /job aborted/);
  }
  assert.equal(existsSync(join(out, 'summary.json')), false);
  assert.equal(existsSync(join(out, 'trace.jsonl')), false, 'an incomplete trace keeps its .partial name');
  assert.equal(existsSync(join(out, 'trace.jsonl.partial')), true);
});

test('a malformed data file gives a one-line error naming the file and line, exit 65', async (t) => {
  const dir = tempDir(t);
  const bad = join(dir, 'bad.libsvm');
  writeFileSync(bad, 'a 1:1 2:0.5\nb 1:1\nc 2:x\n');
  const party = run(BIN.party, ['--coordinator', 'ws://127.0.0.1:9', '--id', 'p', '--data', bad, '--ids', 'first', '--mechanism', 'none']);
  const { code } = await party.exit;
  assert.equal(code, 65);
  assert.match(party.stderr(), /bad\.libsvm:3: token 2 '2:x': value 'x' is not a decimal number/);
  assert.doesNotMatch(party.stderr(), STACK_LINE);

  const labels = join(dir, 'labels.csv');
  writeFileSync(labels, 'id,label\na,1\nb,0\nc,2\n');
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', labels, '--parties', 'p', '--out', dir]);
  assert.equal((await coord.exit).code, 65);
  assert.match(coord.stderr(), /labels\.csv:4: a third distinct label '2'/);
  assert.doesNotMatch(coord.stderr(), STACK_LINE);
});

test('huge and non-decimal numbers are refused at load time: exit 65 naming the file, line and value', async (t) => {
  const dir = tempDir(t);
  // 1e308 used to pass the finiteness check and crash the party later (its square overflows).
  const huge = join(dir, 'huge.libsvm');
  writeFileSync(huge, 'a 1:1 2:0.5\nb 1:1\n\nc 1:0.25 2:1e308\n');
  const hex = join(dir, 'hex.csv');
  writeFileSync(hex, 'id,f1,f2\na,1,2\nb,0x10,1\n');
  const cases: [string, RegExp][] = [
    [huge, /huge\.libsvm:4: token 3 '2:1e308': value '1e308' exceeds the largest accepted magnitude 1e\+100/],
    [hex, /hex\.csv:3: column 'f1': '0x10' is not a decimal number/],
  ];
  for (const [data, re] of cases) {
    const party = run(BIN.party, ['--coordinator', 'ws://127.0.0.1:9', '--id', 'p', '--data', data, '--ids', 'first', '--mechanism', 'none']);
    assert.equal((await party.exit).code, 65, party.stderr());
    assert.match(party.stderr(), re);
    assert.doesNotMatch(party.stderr(), STACK_LINE);
  }
  const labels = join(dir, 'labels.csv');
  writeFileSync(labels, 'id,label\na,1.5\nb,-1e300\nc,2\n');
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', labels, '--loss', 'squared', '--parties', 'p', '--out', dir]);
  assert.equal((await coord.exit).code, 65, coord.stderr());
  assert.match(coord.stderr(), /labels\.csv:3: label '-1e300' exceeds the largest accepted magnitude/);
  assert.doesNotMatch(coord.stderr(), STACK_LINE);
});

test('wrong flags give usage errors with exit 64, never a stack trace', async (t) => {
  const empty = join(tempDir(t), 'empty.libsvm'); // an empty data file inside the test's own directory
  writeFileSync(empty, '');
  const cases: [string, string[], RegExp][] = [
    [BIN.coordinator, ['--labels', 'x.csv', '--parties', 'a', '--lambda', '-1'], /--lambda must be a number >= 0/],
    [BIN.coordinator, ['--labels', 'x.csv', '--parties', 'a', '--bogus', '1'], /Unknown argument/i],
    [BIN.coordinator, ['--parties', 'a'], /Missing required argument: labels/i],
    [BIN.coordinator, ['--labels', 'x.csv', '--parties', 'a', '--checkpoint-every', '5', '--checkpoint-seconds', '60'], /give --checkpoint-every \(rounds\) or --checkpoint-seconds \(time\), not both/],
    [BIN.coordinator, ['--labels', 'x.csv', '--parties', 'a', '--checkpoint-seconds', '0'], /--checkpoint-seconds must be a positive number, got 0/],
    [BIN.party, ['--coordinator', 'http://x', '--id', 'p', '--data', empty, '--mechanism', 'none'], /not a ws:\/\/ URL|no data rows/],
    [BIN.party, ['--coordinator', 'ws://x', '--id', 'bad id', '--data', 'x', '--mechanism', 'none'], /not a valid party id/],
    [BIN.party, ['--coordinator', 'ws://x', '--id', 'p', '--data', 'x'], /choose a privacy setting: --epsilon E .* or --mechanism none/],
    [BIN.party, ['--coordinator', 'ws://x', '--id', 'p', '--data', 'x', '--mechanism', 'paper', '--epsilon', '1'], /needs --b1 and --c1/],
    [BIN.share, ['simulate', '--mechanism', 'gaussian-share'], /needs --epsilon/],
    [BIN.party, ['--coordinator', 'ws://x', '--id', 'p', '--data', 'x', '--mechanism', 'none', '--threads', 'many'], /--threads must be 'auto' or a whole number of threads, got 'many'/],
    [BIN.share, ['simulate', '--rounds', '0'], /--rounds must be an integer >= 1/],
    [BIN.share, ['simulate', '--party-threads', '-1'], /--party-threads must be an integer >= 0/],
    [BIN.share, ['frobnicate'], /Unknown argument|name a command/i],
  ];
  for (const [bin, args, re] of cases) {
    const p = run(bin, args);
    const { code } = await p.exit;
    assert.match(p.stderr(), re, `${args.join(' ')}`);
    assert.ok(code === 64 || code === 65, `${args.join(' ')}: exit ${code}`);
    assert.doesNotMatch(p.stderr(), STACK_LINE);
  }
});

test('rows missing at a party are dropped from training and counted; foreign ids are ignored', async (t) => {
  const dir = tempDir(t);
  const files = dataset(dir);
  const out = join(dir, 'out');
  // party-2 lacks 5 samples and holds 2 that nobody else has; the rows come in another order.
  const lines = readFileSync(files.parties[1].train, 'utf8').trim().split('\n');
  const kept = lines.filter((_, i) => i % 80 !== 7).reverse();
  assert.equal(lines.length - kept.length, 5);
  writeFileSync(files.parties[1].train, [...kept, 'stranger-1 1:0.5', 'stranger-2 2:1'].join('\n') + '\n');
  const n = lines.length - 5;
  const coord = startCoordinator(files, out, ['--rounds', '1000', '--rho', String(0.1 / n)]);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties = files.parties.map((_, m) => startParty(files, m, port, out));
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.rows.train, n);
  // Rows matched by id, not position: the optimum is the central one on the common rows.
  const s = syntheticDataset({ trainRows: 400, testRows: 200, seed: 'processes-test' });
  const keep = Array.from({ length: 400 }, (_, i) => i).filter((i) => i % 80 !== 7);
  const central = fitCentral(csrSelectRows(s.train.X, keep), Float64Array.from(keep, (i) => s.train.y[i]), logistic, 1e-4);
  assertNearOptimum(summary.objective, central.objective, 1e-6, 'final objective');
  // The 5 label rows party-2 lacks; its 2 foreign ids are invisible to the coordinator (PSI).
  assert.equal(summary.droppedRows, 5);
  assert.equal(summary.droppedTestRows, 0);
  assert.equal(summary.alignment.method, 'ecdh-psi');
  assert.deepEqual(summary.alignment.labelIds, { train: 400, test: 200 });
  assert.ok(summary.alignment.seconds > 0);
  assert.equal(summary.parties[1].rows, kept.length + 2);
});

test('with credentials, a hello must prove the party\'s secret: wrong, missing or replayed proofs are refused and the job goes on', async (t) => {
  const dir = tempDir(t);
  const files = dataset(dir);
  const out = join(dir, 'out');
  const secrets = Object.fromEntries(files.parties.map((p) => [p.id, randomBytes(24).toString('hex')]));
  const credentials = join(dir, 'credentials.json');
  writeFileSync(credentials, JSON.stringify(secrets), { mode: 0o600 });
  const coord = startCoordinator(files, out, ['--credentials', credentials]);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };

  /** Answer the challenge with a proof computed from `secret` (or none). */
  const attempt = (partyId: string, secret: string | null, nonceOverride?: Uint8Array) =>
    new Promise<{ code: number; reason: string }>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}`);
      ws.on('error', reject);
      ws.once('message', (data: Buffer) => {
        const msg = validateCoordinatorMessage(decode(data));
        assert.equal(msg.type, 'challenge');
        const nonce = nonceOverride ?? (msg as { nonce: Uint8Array }).nonce;
        const proof = secret === null ? null : helloProof(secret, nonce, partyId, null);
        ws.send(encode({ type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId, jobId: null, features: 3, trainRows: 10, testRows: 10, proof, noise: false, model: null }));
      });
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    });
  const wrongJob = await new Promise<{ code: number; reason: string }>((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    ws.on('error', reject);
    ws.once('message', (data: Buffer) => {
      const msg = validateCoordinatorMessage(decode(data)) as { nonce: Uint8Array };
      ws.send(encode({ type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: 'party-1', jobId: 'another-job', features: 3, trainRows: 10, testRows: 10, proof: helloProof(secrets['party-1'], msg.nonce, 'party-1', 'another-job'), noise: false, model: null }));
    });
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
  });
  assert.equal(wrongJob.code, CloseCodes.wrongJob.code);
  assert.match(wrongJob.reason, /party wants job 'another-job', this is job 'test-job'/);
  const [wrong, missing, replayed, otherParty] = await Promise.all([
    attempt('party-1', 'not-the-secret-at-all'),
    attempt('party-2', null),
    attempt('party-3', secrets['party-3'], new Uint8Array(32)), // a proof for another nonce
    attempt('party-1', secrets['party-2']), // party 2's secret does not make you party 1
  ]);
  for (const r of [wrong, missing, replayed, otherParty]) {
    assert.equal(r.code, CloseCodes.unauthorized.code);
    assert.match(r.reason, /bad or missing credential/);
  }
  assert.doesNotMatch(wrong.reason + missing.reason, new RegExp(Object.values(secrets).join('|')), 'no secret in a close reason');
  const parties = files.parties.map((f, m) => {
    const tokenFile = join(dir, `${f.id}.token`);
    writeFileSync(tokenFile, secrets[f.id], { mode: 0o600 });
    return run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--test', f.test!, '--ids', 'first', '--model', join(out, `model-${f.id}.json`), '--mechanism', 'none', '--token-file', tokenFile]);
  });
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.doesNotMatch(coord.stdout(), new RegExp(Object.values(secrets).join('|')), 'secrets never logged');
});

test('a party without its credential is refused by a coordinator that requires one (exit 69, clear reason)', async (t) => {
  const dir = tempDir(t);
  const files = dataset(dir);
  const credentials = join(dir, 'credentials.json');
  writeFileSync(credentials, JSON.stringify(Object.fromEntries(files.parties.map((p) => [p.id, randomBytes(16).toString('hex')]))), { mode: 0o600 });
  const coord = startCoordinator(files, join(dir, 'out'), ['--credentials', credentials, '--hello-timeout', '5000']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const party = startParty(files, 0, port, dir);
  assert.equal((await party.exit).code, 69);
  assert.match(party.stderr(), /authentication failed: bad or missing credential for 'party-1'/);
  coord.kill();
});
