// Prediction with a trained model over real processes: a9a scored again by `admm-share predict`
// with the parties' rows in different orders (the training run's test metrics, recomputed here
// from the CSV); batch prediction on generated data with shuffled rows and a row one party
// lacks (refused, then scored without that party's part), and one party noising its scores;
// models that do not belong to the job, refused in words naming both sides; and online scoring
// with a party frozen (timeout) and one killed and started again between two requests. Every expected score is computed here from the model files.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Csr, csrHStack, formatLibsvmWithIds, helloProof, readLibsvm } from '@admm-share/core';
import { CloseCodes, PROTOCOL_VERSION, decode, encode } from '@admm-share/protocol';
import { WebSocket } from 'ws';
import { A9A, BIN, type Proc, STACK_LINE, freeze, killAll, run, tempDir } from './procs.js';
import { README, fencedCommands } from './readme-blocks.js';
import { modelScores } from './model-scores.js';

after(killAll);

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

/** predictions.csv as rows (no field here needs quoting); its first column is named as the ids file's id column. */
function readPredictions(path: string, idColumn = 'id'): { id: string; score: number; probability: number; positive: string; missing: string }[] {
  const [header, ...lines] = readFileSync(path, 'utf8').trimEnd().split('\n');
  assert.equal(header, `${idColumn},score,probability,positive_class,missing`);
  return lines.map((l) => {
    const [id, score, probability, positive, missing] = l.split(',');
    return { id, score: Number(score), probability: Number(probability), positive, missing };
  });
}

/** A simulate run on the built-in synthetic set (3 parties, 2000 | 1000 rows). */
async function simulate(out: string): Promise<string> {
  const p = run(BIN.share, ['simulate', '--out', out, '--rounds', '15']);
  assert.equal((await p.exit).code, 0, p.stderr());
  return out;
}

/**
 * Two simulate runs (two jobs, a and b), made once for the file and side by side: the tests
 * only score with their models, and each works on a copy of its own (a prediction writes
 * ledgers beside the model files, and one test edits them).
 */
const shared = tempDir({ after });
let runs: Promise<Record<'a' | 'b', string>>;
before(() => {
  runs = Promise.all([simulate(join(shared, 'a')), simulate(join(shared, 'b'))]).then(([a, b]) => ({ a, b }));
  runs.catch(() => {}); // reported by the tests that await it
});
async function simulated(dir: string, name: string, job: 'a' | 'b' = 'a'): Promise<string> {
  const out = join(dir, name);
  cpSync((await runs)[job], out, { recursive: true });
  return out;
}

/** Each party's expected part of the scores of `X` (its block) from its model file alone. */
function partFromModel(runDir: string, party: string, X: Csr): Float64Array {
  const m = readJson(join(runDir, `model-${party}.json`));
  const s = modelScores(X, m.coefficients, m.preprocessing.rowScaling);
  return s.map((v) => v + (m.intercept ?? 0));
}

/** A party's test block of a run, with its rows in reverse order (and some left out). */
function shuffledBlock(runDir: string, party: string, out: string, drop: Set<string> = new Set()): void {
  const t = readLibsvm(join(runDir, 'data', `${party}.test.libsvm`), { ids: 'first' });
  const order = Uint32Array.from(Array.from(t.ids.keys()).filter((i) => !drop.has(t.ids[i])).reverse());
  writeFileSync(out, Buffer.concat(formatLibsvmWithIds(t.ids, t.X, { rows: order })));
}

function predictCoordinator(runDir: string, out: string, extra: string[] = [], labels = join(runDir, 'data', 'labels.test.csv')): Proc {
  return run(BIN.coordinator, ['predict', '--model', join(runDir, 'job.json'), '--labels', labels, '--out', out, '--port', '0', '--credentials', join(runDir, 'data', 'credentials.json'), ...extra]);
}

function predictParty(runDir: string, party: string, port: number, data: string, extra: string[] = []): Proc {
  return run(BIN.party, ['predict', '--coordinator', `ws://127.0.0.1:${port}`, '--id', party, '--model', join(runDir, `model-${party}.json`), '--data', data, '--ids', 'first', '--token-file', join(runDir, 'data', `${party}.token`), '--mechanism', 'none', ...extra]);
}

const PARTIES = ['party-1', 'party-2', 'party-3'];

test('a9a, the README block: admm-share predict on a9a.t writes 16,281 predictions whose log loss and accuracy, recomputed from the CSV, are the training run\'s test metrics', async (t) => {
  const dir = tempDir(t);
  // The README's commands as written, in a fresh folder, with the repository's a9a files.
  const commands = fencedCommands(readFileSync(README, 'utf8'), '<!-- readme-test:a9a-predict');
  assert.deepEqual(commands.map((c) => c.slice(0, 3).join(' ')), ['npx admm-share simulate', 'npx admm-share predict']);
  const files: Record<string, string> = { 'data/a9a/a9a': join(A9A, 'a9a'), 'data/a9a/a9a.t': join(A9A, 'a9a.t') };
  let p!: Proc;
  for (const c of commands) {
    p = run(BIN.share, c.slice(2).map((w) => files[w] ?? w), { cwd: dir });
    assert.equal((await p.exit).code, 0, p.stderr());
  }
  const runDir = join(dir, 'runs', 'a9a');
  const trained = readJson(join(runDir, 'summary.json')).test;
  const out = join(runDir, 'predictions.csv');
  assert.match(p.stdout(), /scoring privacy: none/);
  const rows = readPredictions(out);
  assert.equal(rows.length, 16281);
  // The labels of a9a.t, read here: row i (1-based) is id i.
  const labels = readFileSync(join(A9A, 'a9a.t'), 'utf8').trimEnd().split('\n').map((l) => (Number(l.split(/\s+/)[0]) > 0 ? 1 : -1));
  let ll = 0;
  let correct = 0;
  for (const r of rows) {
    const y = labels[Number(r.id) - 1];
    ll += Math.log1p(Math.exp(-y * r.score));
    if ((r.score > 0 ? 1 : -1) === y) correct++;
    assert.equal(r.positive, '1');
    assert.equal(r.missing, '');
    assert.ok(Math.abs(r.probability - 1 / (1 + Math.exp(-r.score))) < 1e-12);
  }
  assert.ok(Math.abs(ll / rows.length - trained.logLoss) <= 1e-9 * trained.logLoss, `log loss ${ll / rows.length} against ${trained.logLoss}`);
  assert.ok(Math.abs(correct / rows.length - trained.accuracy) <= 1e-9 * trained.accuracy, `accuracy ${correct / rows.length} against ${trained.accuracy}`);
  // The parties' files hold the rows in different orders.
  const firstIds = ['party-1', 'party-2'].map((party) => readFileSync(join(runDir, 'predict', `${party}.libsvm`), 'utf8').slice(0, 200).split('\n').slice(0, 3).map((l) => l.split(' ')[0]).join());
  assert.notEqual(firstIds[0], firstIds[1]);
  assert.notEqual(firstIds[0], '1,2,3');
});

test('one-shot: a private run (active party-1, passive parties with budgets) scored again by admm-share predict gives the training run\'s test metrics: the weights and the passive clip are applied as in training', async (t) => {
  const dir = tempDir(t);
  const runDir = join(dir, 'run');
  const sim = run(BIN.share, ['simulate', '--epsilon', '2', '--out', runDir]);
  assert.equal((await sim.exit).code, 0, sim.stderr());
  const summary = readJson(join(runDir, 'summary.json'));
  assert.equal(summary.algorithm, 'one-shot');
  const job = readJson(join(runDir, 'job.json'));
  assert.deepEqual(job.combination.weights, summary.oneShot.weights);
  assert.deepEqual(job.parties.map((p: { rowScaling: boolean }) => p.rowScaling), [true, true, true]);
  // Every column of the test rows in one file, the label first (as a9a.t is).
  const blocks = PARTIES.map((party) => readLibsvm(join(runDir, 'data', `${party}.test.libsvm`), { ids: 'first' }).X);
  const labels = readFileSync(join(runDir, 'data', 'labels.test.csv'), 'utf8').trimEnd().split('\n').slice(1).map((l) => l.split(',')[1]);
  const full = join(dir, 'new.libsvm');
  writeFileSync(full, Buffer.concat(formatLibsvmWithIds(labels, csrHStack(blocks))));
  const p = run(BIN.share, ['predict', '--run', runDir, '--data', full, '--labels']);
  assert.equal((await p.exit).code, 0, p.stderr());
  const metrics = readJson(join(runDir, 'predictions.json')).metrics;
  for (const k of ['logLoss', 'accuracy', 'auc']) assert.ok(Math.abs(metrics[k] - summary.test[k]) <= 1e-9 * summary.test[k], `${k}: ${metrics[k]} against ${summary.test[k]}`);
});

test('batch prediction on generated data: shuffled rows, and an id one party lacks is refused by default and scored without that party with --missing partial', async (t) => {
  const dir = tempDir(t);
  const runDir = await simulated(dir, 'run');
  const lacking = 't17';
  const files = PARTIES.map((party) => join(dir, `${party}.libsvm`));
  PARTIES.forEach((party, m) => shuffledBlock(runDir, party, files[m], m === 2 ? new Set([lacking]) : undefined));

  // Default: refused, naming the party and the id; no predictions written.
  const refused = join(dir, 'refused.csv');
  const c1 = predictCoordinator(runDir, refused);
  const { port: p1 } = (await c1.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties1 = PARTIES.map((party, m) => predictParty(runDir, party, p1, files[m]));
  const e1 = await c1.exit;
  assert.equal(e1.code, 65, c1.stderr());
  assert.match(c1.stderr(), /party party-3 does not hold 1 of the ids \('t17'\).*--missing partial/);
  assert.doesNotMatch(c1.stderr(), STACK_LINE);
  for (const p of parties1) assert.notEqual((await p.exit).code, 0);
  assert.throws(() => readFileSync(refused));

  // --missing partial: every id scored; t17 without party-3's part, and flagged. The labels
  // file names its id column customer_id, and predictions.csv keeps that name.
  const out = join(dir, 'partial.csv');
  const customers = join(dir, 'customers.csv');
  writeFileSync(customers, readFileSync(join(runDir, 'data', 'labels.test.csv'), 'utf8').replace(/^id,/, 'customer_id,'));
  const c2 = predictCoordinator(runDir, out, ['--missing', 'partial', '--id-column', 'customer_id'], customers);
  const { port: p2 } = (await c2.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties2 = PARTIES.map((party, m) => predictParty(runDir, party, p2, files[m]));
  assert.equal((await c2.exit).code, 0, c2.stderr());
  for (const p of parties2) assert.equal((await p.exit).code, 0, p.stderr());
  assert.match(c2.stdout(), /scored 1000 rows.*1 without party-3/);
  const rows = readPredictions(out, 'customer_id');
  const blocks = PARTIES.map((party) => readLibsvm(join(runDir, 'data', `${party}.test.libsvm`), { ids: 'first' }));
  const parts = PARTIES.map((party, m) => partFromModel(runDir, party, blocks[m].X));
  const ids = blocks[0].ids;
  assert.deepEqual(rows.map((r) => r.id), ids, 'the rows in the order of the ids file');
  rows.forEach((r, i) => {
    const expected = parts[0][i] + parts[1][i] + (r.id === lacking ? 0 : parts[2][i]);
    assert.ok(Math.abs(r.score - expected) < 1e-9, `${r.id}: ${r.score} against ${expected}`);
    assert.equal(r.missing, r.id === lacking ? 'party-3' : '');
  });

  // party-2 scores with a budget for this prediction job: its part is clipped and noised, and it says what it spent.
  const noised = join(dir, 'noised.csv');
  const c3 = predictCoordinator(runDir, noised, ['--missing', 'partial', '--job', 'noised-1']);
  const { port: p3 } = (await c3.waitFor((r) => r.msg === 'listening')) as { port: number };
  const parties3 = PARTIES.map((party, m) =>
    m === 1 ? run(BIN.party, ['predict', '--coordinator', `ws://127.0.0.1:${p3}`, '--id', party, '--model', join(runDir, `model-${party}.json`), '--data', files[m], '--ids', 'first', '--token-file', join(runDir, 'data', `${party}.token`), '--epsilon', '1', '--seed', 'predict-test']) : predictParty(runDir, party, p3, files[m]),
  );
  assert.equal((await c3.exit).code, 0, c3.stderr());
  for (const p of parties3) assert.equal((await p.exit).code, 0, p.stderr());
  assert.match(c3.stdout(), /party-2 noised its scores \(epsilon 1\.00\)/);
  const ledger = readJson(join(runDir, 'model-party-2.scoring-ledger.json')).entries.findLast((e: { jobId: string }) => e.jobId === 'noised-1');
  assert.equal(ledger.releases, 1);
  const diffs = readPredictions(noised).map((r, i) => r.score - (parts[0][i] + Math.min(4, Math.max(-4, parts[1][i])) + (r.id === lacking ? 0 : parts[2][i])));
  const sd = Math.sqrt(diffs.reduce((a, d) => a + d * d, 0) / diffs.length);
  assert.ok(Math.abs(sd / ledger.sigma - 1) < 0.1, `the noise's spread ${sd} against sigma ${ledger.sigma}`);
});

test('models that do not belong to the job are refused, naming both sides: another job\'s model, more feature columns than the model, other preprocessing; an edited model or job description by its digest', async (t) => {
  const dir = tempDir(t);
  const [a, b] = [await simulated(dir, 'a'), await simulated(dir, 'b', 'b')];
  const jobA = readJson(join(a, 'job.json')).jobId;
  const jobB = readJson(join(b, 'job.json')).jobId;

  // party-2 comes with its model of job B to a prediction with job A's description.
  const c = predictCoordinator(a, join(dir, 'p.csv'));
  const { port } = (await c.waitFor((r) => r.msg === 'listening')) as { port: number };
  const wrong = run(BIN.party, ['predict', '--coordinator', `ws://127.0.0.1:${port}`, '--id', 'party-2', '--model', join(b, 'model-party-2.json'), '--data', join(a, 'data', 'party-2.test.libsvm'), '--ids', 'first', '--token-file', join(a, 'data', 'party-2.token'), '--mechanism', 'none']);
  assert.equal((await wrong.exit).code, 69);
  assert.match(wrong.stderr(), new RegExp(`code ${CloseCodes.wrongModel.code}: model mismatch: party party-2's model is from job ${jobB}, the job description is of job ${jobA}`));
  assert.doesNotMatch(wrong.stderr(), STACK_LINE);

  // party-1's data has more columns than its model (10): refused before joining.
  const wide = join(dir, 'wide.libsvm');
  writeFileSync(wide, 't1 3:1 14:0.5\nt2 1:2\n');
  const w = predictParty(a, 'party-1', port, wide);
  assert.equal((await w.exit).code, 64);
  assert.match(w.stderr(), /has 14 feature columns, but party party-1's model \(job .+\) was trained on 10/);

  // A hello whose model has the job's id but scales rows (the job trained party-3 without): 4017.
  const closed = await new Promise<{ code: number; reason: string }>((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}`);
    ws.on('message', (data: Buffer) => {
      const msg = decode(data) as { type: string; nonce: Uint8Array };
      if (msg.type !== 'challenge') return;
      const secret = readFileSync(join(a, 'data', 'party-3.token'), 'utf8').trim();
      ws.send(encode({ type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: 'party-3', jobId: null, features: 6, trainRows: 10, testRows: 0, noise: false, model: { jobId: jobA, digest: 'ab'.repeat(32), rowScaling: true, intercept: false }, proof: helloProof(secret, msg.nonce, 'party-3', null) }));
    });
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
  });
  assert.equal(closed.code, CloseCodes.wrongModel.code);
  assert.match(closed.reason, /party party-3's model scales rows to norm 1, job .+ trained party-3 without row scaling/);
  c.kill();

  // A model file or job description changed after training is refused by its digest.
  const edited = join(dir, 'edited-model.json');
  const m = readJson(join(a, 'model-party-1.json'));
  m.coefficients[0] += 1;
  writeFileSync(edited, JSON.stringify(m, null, 2));
  const e1 = run(BIN.party, ['predict', '--coordinator', 'ws://127.0.0.1:1', '--id', 'party-1', '--model', edited, '--data', join(a, 'data', 'party-1.test.libsvm'), '--ids', 'first', '--mechanism', 'none']);
  assert.equal((await e1.exit).code, 65);
  assert.match(e1.stderr(), /edited-model\.json: party model: its content does not match its digest/);
  const jobFile = join(dir, 'edited-job.json');
  const j = readJson(join(a, 'job.json'));
  j.parties[0].features = 11;
  writeFileSync(jobFile, JSON.stringify(j, null, 2));
  const e2 = run(BIN.coordinator, ['predict', '--model', jobFile, '--ids', join(a, 'data', 'labels.test.csv'), '--port', '0']);
  assert.equal((await e2.exit).code, 65);
  assert.match(e2.stderr(), /edited-job\.json: job description: its content does not match its digest/);
});

test('online: POST /score fans out to the parties and answers scores and probabilities; token, size and id limits; a frozen party times out (504); a party killed and started again between two requests', async (t) => {
  const dir = tempDir(t);
  const runDir = await simulated(dir, 'run');
  const token = 'serve-token-0123456789abcdef';
  writeFileSync(join(dir, 'token'), token + '\n', { mode: 0o600 });
  const c = run(BIN.coordinator, ['serve', '--model', join(runDir, 'job.json'), '--port', '0', '--http-port', '0', '--http-token-file', join(dir, 'token'), '--credentials', join(runDir, 'data', 'credentials.json'), '--max-request-ids', '200', '--request-timeout', '3000']);
  const { port } = (await c.waitFor((r) => r.msg === 'listening')) as { port: number };
  const { httpPort } = (await c.waitFor((r) => r.msg === 'serving POST /score')) as { httpPort: number };
  const data = (party: string) => join(runDir, 'data', `${party}.test.libsvm`);
  const parties = new Map(PARTIES.map((party) => [party, predictParty(runDir, party, port, data(party))]));
  const url = `http://127.0.0.1:${httpPort}`;
  /** Wait until /healthz shows the parties' states as `done` wants them. */
  const until = async (done: (parties: Record<string, string>) => boolean, what: string) => {
    for (let i = 0; i < 200; i++) {
      const h = (await (await fetch(`${url}/healthz`, { headers: { authorization: `Bearer ${token}` } })).json()) as { parties: Record<string, string> };
      if (done(h.parties)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(what);
  };
  const ready = () => until((states) => Object.values(states).every((s) => s === 'ready'), 'the parties did not become ready');
  await ready();
  const post = (body: unknown, auth = `Bearer ${token}`) => fetch(`${url}/score`, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });

  const blocks = PARTIES.map((party) => readLibsvm(data(party), { ids: 'first' }));
  const parts = PARTIES.map((party, m) => partFromModel(runDir, party, blocks[m].X));
  const ids = blocks[0].ids.slice(0, 100).reverse();
  const expected = ids.map((id) => {
    const i = blocks[0].ids.indexOf(id);
    return parts[0][i] + parts[1][i] + parts[2][i];
  });
  const check = async () => {
    const res = await post({ ids });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { results: { id: string; score: number; probability: number; missing: string[] }[]; positiveClass: string };
    assert.equal(body.positiveClass, '1');
    assert.deepEqual(body.results.map((r) => r.id), ids);
    body.results.forEach((r, i) => {
      assert.ok(Math.abs(r.score - expected[i]) < 1e-9, `${r.id}: ${r.score} against ${expected[i]}`);
      assert.ok(Math.abs(r.probability - 1 / (1 + Math.exp(-r.score))) < 1e-12);
      assert.deepEqual(r.missing, []);
    });
  };
  await check();

  // The endpoint's limits.
  assert.equal((await post({ ids }, 'Bearer wrong-token-0123456789')).status, 401);
  assert.equal((await post({ ids }, '')).status, 401);
  assert.equal((await post({ ids: Array.from({ length: 201 }, (_, i) => `t${i + 1}`) })).status, 413);
  assert.equal((await post('x'.repeat(2 << 20))).status, 413);
  assert.equal((await post('{"ids": 3}')).status, 400);
  assert.equal((await post({ ids: ['t1', 't1'] })).status, 400);
  const unknown = await post({ ids: ['t1', 'nobody'] });
  assert.equal(unknown.status, 422);
  assert.match(((await unknown.json()) as { error: string }).error, /party party-1 does not hold 1 of the ids \('nobody'\)/);

  // party-3 frozen: the request times out (504) after --request-timeout; its connection is closed.
  freeze(parties.get('party-3')!);
  const t0 = Date.now();
  const slow = await post({ ids });
  assert.equal(slow.status, 504);
  assert.ok(Date.now() - t0 >= 2900, 'not before --request-timeout');
  assert.match(((await slow.json()) as { error: string }).error, /party party-3: no 'found' within 3000 ms/);
  // Thawed, it reconnects by itself (4016 is retried by a scoring party) and is used again.
  parties.get('party-3')!.child.kill('SIGCONT');
  await ready();
  await check();

  // party-2 killed: a request fails at once and says why; started again, it is used again.
  parties.get('party-2')!.kill();
  await parties.get('party-2')!.exit;
  // The coordinator learns of the closed socket a moment after the process is gone; a request
  // in that moment fails on the connection instead ('disconnected (code 1006)').
  await until((states) => states['party-2'] !== 'ready', 'the coordinator did not see party-2 go');
  const down = await post({ ids });
  assert.equal(down.status, 503);
  assert.match(((await down.json()) as { error: string }).error, /party party-2 is not connected/);
  parties.set('party-2', predictParty(runDir, 'party-2', port, data('party-2')));
  await ready();
  await check();

  // Stopping the service ends the parties' jobs cleanly.
  c.child.kill('SIGTERM');
  await c.exit;
  for (const p of parties.values()) assert.equal((await p.exit).code, 0, p.stderr());
});
