// Restarts that race with the rest of the job, over real processes on the first ROWS rows of a9a
// and a9a.t (66 | 57 features; fewer than all, because every join and rejoin aligns the rows by
// private set intersection, whose cost grows with them):
//
// 1. A party killed while another is mid-round: party-1 is frozen (SIGSTOP) before it has
//    answered round r+1 (or the final evaluation); party-2 answers, is killed with SIGKILL,
//    started again with the same flags and rejoins; then party-1 is thawed. The job must end
//    exactly as the uninterrupted run of the same job ends.
// 2. The checkpoint of the final round: a completed job leaves no checkpoint behind, a
//    --resume of a completed job says so, and a coordinator killed after the final round's
//    checkpoint (parties frozen in the evaluation) is resumed to the uninterrupted result.
//
// The scenario is sequenced on the wire, not on timing: every party talks to the coordinator
// through a relay in this process that decodes the WebSocket frames in both directions. It
// freezes party-1 synchronously before the frame that asks it for round r+1 is forwarded, so
// party-1 cannot have answered it; it reports party-2's answer, the coordinator closing the
// dead connection, and the coordinator answering the restarted party's ready. Two log lines
// are relied on besides 'listening': a coordinator record with `party` and a msg matching
// /disconnect/ when a party's connection drops (today 'party disconnected; waiting for it to
// rejoin'), and the debug line 'checkpoint written' with `round`.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type Server, type Socket, createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTrace } from '@admm-share/coordinator';
import { type LabelledSet, binaryLabels, csrSelectRows, readLibsvm } from '@admm-share/core';
import { decode } from '@admm-share/protocol';
import { type SplitFiles, writeVerticalSplit } from '../split.js';
import { A9A, BIN, type Proc, STACK_LINE, freeze, killAll, run } from './procs.js';
import { FrameStream } from './ws-frames.js';

after(killAll);

const FEATURES = 123;
/** Rows of a9a (training) and a9a.t (test) the jobs use. */
const ROWS = { train: 2000, test: 1000 };
const SPLIT = [66, 57];
const JOB = 'race-job';
/** Defect 1: the job of the report (today r = 97 ends in `round 99 after round 97`). */
const ROUNDS = 100;
/** Defect 2: --checkpoint-every divides --rounds, so the final round is checkpointed. */
const CP_ROUNDS = 20;
const CP_EVERY = 10;
const CP_FLAGS = ['--checkpoint-every', String(CP_EVERY), '--log-level', 'debug'];
/** Relative tolerance against the uninterrupted run (ADMM here is deterministic: no noise, fixed order). */
const REL = 1e-9;
/** Generous: on a loaded machine a run takes a few times its usual 5 s. */
const TIMEOUT = { timeout: 300_000 };

let root: string;
let files: SplitFiles;

before(() => {
  root = mkdtempSync(join(tmpdir(), 'admm-race-'));
  const load = (path: string, rows: number): LabelledSet => {
    const t = readLibsvm(path, { ids: 'auto', features: FEATURES });
    const y = binaryLabels({ file: path, ids: t.ids, raw: t.firstTokens!, lines: t.lines }).y;
    return { ids: t.ids.slice(0, rows), X: csrSelectRows(t.X, Uint32Array.from({ length: rows }, (_, i) => i)), y: y.slice(0, rows) };
  };
  files = writeVerticalSplit(join(root, 'data'), SPLIT, load(join(A9A, 'a9a'), ROWS.train), load(join(A9A, 'a9a.t'), ROWS.test));
});
after(() => rmSync(root, { recursive: true, force: true }));

let dirs = 0;
const newDir = (name: string) => join(root, `${name}-${++dirs}`);

// ---- processes ------------------------------------------------------------

function coordinator(out: string, rounds: number, extra: string[] = []): Proc {
  return run(BIN.coordinator, [
    '--port', '0',
    '--labels', files.labels,
    '--test-labels', files.testLabels!,
    '--parties', files.parties.map((p) => p.id).join(','),
    '--out', out,
    '--rounds', String(rounds),
    '--tol-abs', '0',
    '--tol-rel', '0',
    '--job', JOB,
    // A freeze here lasts while another process restarts. Heartbeats every 60 s keep it from
    // becoming a dropped connection, so the scenario stays the one described (resume.test.ts
    // covers a party dropped for a missed heartbeat).
    '--heartbeat', '60000',
    ...extra,
  ]);
}

/** The arguments of party m; a restarted party gets the same ones. */
function partyArgs(m: number, url: string, out: string): string[] {
  const f = files.parties[m];
  return ['--coordinator', url, '--id', f.id, '--data', f.train, '--test', f.test!, '--ids', 'first', '--features', String(f.features), '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`), '--reconnect-timeout', '30000'];
}

async function listeningPort(p: Proc): Promise<number> {
  return ((await p.waitFor((r) => r.msg === 'listening', 'listening')) as { port: number }).port;
}

/**
 * Resolves when every process has exited 0; rejects as soon as one exits otherwise (so a
 * failure today shows at once instead of after the others' timeouts), with its stderr and
 * its last warnings and errors.
 */
function allExitZero(procs: Record<string, Proc>): Promise<void> {
  return new Promise((resolve, reject) => {
    let left = Object.keys(procs).length;
    for (const [name, p] of Object.entries(procs))
      void p.exit.then(({ code, signal }) => {
        if (code === 0) {
          if (--left === 0) resolve();
          return;
        }
        const warnings = p.records.filter((r) => (r.level as number) >= 40).slice(-3).map((r) => JSON.stringify(r));
        reject(new assert.AssertionError({ message: `${name} exited with ${code ?? signal}\nstderr: ${p.stderr().trim()}\nlast warnings: ${warnings.join('\n')}` }));
      });
  });
}


function thaw(p: Proc): void {
  p.child.kill('SIGCONT');
}

// ---- the relay ------------------------------------------------------------

/** One decoded protocol message seen by the relay (scalars only: vectors are not kept). */
interface WireRecord {
  /** Order of arrival at the relay, over all connections and both directions. */
  seq: number;
  /** Connection number (a restarted party gets a new one). */
  conn: number;
  /** From the connection's hello. */
  party: string | undefined;
  dir: 'up' | 'down';
  type: string;
  round?: number;
}

interface Relay {
  port: number;
  /** The coordinator's port; set it before the parties connect, change it for a resumed coordinator. */
  target: number;
  records: WireRecord[];
  /** Run `fn` synchronously before a matching message is forwarded (once per match). */
  before(pred: (w: WireRecord) => boolean, fn: (w: WireRecord) => void): void;
  /** The first record matching `pred`; rejects if one of `watch` exits first. */
  waitFor(pred: (w: WireRecord) => boolean, what: string, watch: Record<string, Proc>): Promise<WireRecord>;
  /** Resolves when the coordinator's side of connection `conn` has closed. */
  upstreamClosed(conn: number): Promise<void>;
}

async function relay(t: { after(fn: () => void | Promise<void>): void }): Promise<Relay> {
  const records: WireRecord[] = [];
  const hooks: { pred: (w: WireRecord) => boolean; fn: (w: WireRecord) => void }[] = [];
  const waiters: { pred: (w: WireRecord) => boolean; resolve: (w: WireRecord) => void }[] = [];
  const closed = new Map<number, Promise<void>>();
  const sockets = new Set<Socket>();
  let seq = 0;
  let conns = 0;
  let failure: Error | undefined;
  const server: Server = createServer((client) => {
    const conn = ++conns;
    let party: string | undefined;
    const upstream = createConnection({ port: r.target, host: '127.0.0.1' });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    closed.set(conn, new Promise((resolve) => upstream.on('close', () => resolve())));
    const see = (dir: 'up' | 'down') => (payload: Buffer) => {
      let msg: unknown;
      try {
        msg = decode(payload);
      } catch {
        return;
      }
      if (typeof msg !== 'object' || msg === null) return;
      const m = msg as { type?: unknown; round?: unknown; partyId?: unknown };
      if (dir === 'up' && m.type === 'hello' && typeof m.partyId === 'string') party = m.partyId;
      const w: WireRecord = { seq: ++seq, conn, party, dir, type: String(m.type), ...(typeof m.round === 'number' ? { round: m.round } : {}) };
      records.push(w);
      for (const h of hooks.slice())
        if (h.pred(w)) {
          hooks.splice(hooks.indexOf(h), 1);
          try {
            h.fn(w);
          } catch (err) {
            failure = err as Error;
          }
        }
      for (const x of waiters.slice())
        if (x.pred(w)) {
          waiters.splice(waiters.indexOf(x), 1);
          x.resolve(w);
        }
    };
    const up = new FrameStream((b) => upstream.write(b), see('up'));
    const down = new FrameStream((b) => client.write(b), see('down'));
    client.on('data', (d: Buffer) => up.push(d));
    upstream.on('data', (d: Buffer) => down.push(d));
    // Half-closes pass through, so bytes already forwarded arrive before the close.
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('close', () => upstream.end());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  const r: Relay = {
    port: (server.address() as { port: number }).port,
    target: 0,
    records,
    before: (pred, fn) => void hooks.push({ pred, fn }),
    waitFor(pred, what, watch) {
      if (failure) return Promise.reject(failure);
      const seen = records.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ pred, resolve });
        for (const [name, p] of Object.entries(watch))
          void p.exit.then(({ code, signal }) => reject(new Error(`${name} exited (${code ?? signal}) before ${what}${failure ? ` (relay hook failed: ${failure.message})` : ''}; stderr: ${p.stderr().trim()}`)));
      });
    },
    upstreamClosed: (conn) => closed.get(conn)!,
  };
  return r;
}

// ---- results ----------------------------------------------------------------

interface Result {
  summary: { rounds: number; reason: string; objective: number; test: { logLoss: number; accuracy: number; auc: number } };
  models: Record<string, { coefficients: number[]; intercept: number | null; hyperParameters: { rounds: number } }>;
  trace: { round: number; objective: number }[];
}

function readResult(out: string): Result {
  const json = (f: string) => JSON.parse(readFileSync(join(out, f), 'utf8'));
  return {
    summary: json('summary.json'),
    models: Object.fromEntries(files.parties.map((p) => [p.id, json(`model-${p.id}.json`)])),
    trace: readTrace(join(out, 'trace.jsonl')),
  };
}

function assertClose(actual: number, expected: number, what: string): void {
  assert.ok(Number.isFinite(actual) && Math.abs(actual - expected) <= REL * Math.abs(expected), `${what}: ${actual}, uninterrupted run ${expected}`);
}

/** summary.json, the trace and both model files agree with the uninterrupted run. */
function assertSameResult(out: string, ref: Result): void {
  const got = readResult(out);
  assert.equal(got.summary.rounds, ref.summary.rounds, 'summary.json rounds');
  assert.equal(got.summary.reason, ref.summary.reason, 'summary.json reason');
  assertClose(got.summary.objective, ref.summary.objective, 'summary.json objective');
  for (const k of ['logLoss', 'accuracy', 'auc'] as const) assertClose(got.summary.test[k], ref.summary.test[k], `summary.json test ${k}`);
  assert.deepEqual(got.trace.map((l) => l.round), ref.trace.map((l) => l.round), 'trace.jsonl: one line per round, none twice');
  got.trace.forEach((l, i) => assertClose(l.objective, ref.trace[i].objective, `trace.jsonl objective of round ${l.round}`));
  for (const p of files.parties) {
    const a = got.models[p.id];
    const b = ref.models[p.id];
    assert.equal(a.hyperParameters.rounds, b.hyperParameters.rounds, `model-${p.id}.json rounds`);
    assert.equal(a.intercept, b.intercept, `model-${p.id}.json intercept`);
    assert.equal(a.coefficients.length, b.coefficients.length, `model-${p.id}.json coefficients`);
    let diff = 0;
    let scale = 0;
    for (let j = 0; j < b.coefficients.length; j++) {
      diff = Math.max(diff, Math.abs(a.coefficients[j] - b.coefficients[j]));
      scale = Math.max(scale, Math.abs(b.coefficients[j]));
    }
    assert.ok(scale > 0, `the uninterrupted model of ${p.id} is not zero`);
    assert.ok(diff <= REL * scale, `model-${p.id}.json coefficients differ from the uninterrupted run's by up to ${diff} (largest coefficient ${scale}); first: ${a.coefficients[0]} vs ${b.coefficients[0]}`);
  }
}

/** The uninterrupted job, run once per file for each configuration. */
const references = new Map<string, Promise<{ out: string; result: Result }>>();
function reference(rounds: number, extra: string[]): Promise<{ out: string; result: Result }> {
  const key = `${rounds} ${extra.join(' ')}`;
  if (!references.has(key))
    references.set(
      key,
      (async () => {
        const out = newDir('reference');
        const coord = coordinator(out, rounds, extra);
        const url = `ws://127.0.0.1:${await listeningPort(coord)}`;
        await allExitZero({ 'reference coordinator': coord, 'reference party-1': run(BIN.party, partyArgs(0, url, out)), 'reference party-2': run(BIN.party, partyArgs(1, url, out)) });
        return { out, result: readResult(out) };
      })(),
    );
  return references.get(key)!;
}
// Both uninterrupted runs start with the file, beside the first test's job; a failure is
// reported by the tests that wait for them.
before(() => {
  for (const [rounds, extra] of [[ROUNDS, []], [CP_ROUNDS, CP_FLAGS]] as const) reference(rounds, [...extra]).catch(() => {});
});

// ---- 1. a party killed while another is mid-round ---------------------------

/** Where the job is when party-2 dies: a request to both parties, and whether party-2 has answered it. */
interface Moment {
  request: 'round' | 'evaluate';
  /** For 'round': which round. */
  round?: number;
  /** True: party-2 is killed after its answer went out; false: with the request unanswered. */
  party2Answered: boolean;
}

const ANSWER = { round: 'share', evaluate: 'scores' } as const;

/**
 * Party-1 is frozen before the request of `moment` (round r+1, or the final evaluation) is
 * forwarded to it; party-2 is killed with SIGKILL after answering it (or, frozen first, with
 * it unanswered), started again with the same flags and rejoins; then party-1 is thawed.
 */
async function killWhileOtherFrozen(t: { after(fn: () => void | Promise<void>): void }, moment: Moment): Promise<void> {
  t.after(killAll);
  const ref = (await reference(ROUNDS, [])).result;
  const out = newDir('killed');
  const tap = await relay(t);
  const coord = coordinator(out, ROUNDS);
  tap.target = await listeningPort(coord);
  const url = `ws://127.0.0.1:${tap.port}`;
  const p1 = run(BIN.party, partyArgs(0, url, out));
  const p2 = run(BIN.party, partyArgs(1, url, out));
  const request = (w: WireRecord, party: string) => w.dir === 'down' && w.party === party && w.type === moment.request && (moment.round === undefined || w.round === moment.round);
  const answer = (w: WireRecord, party: string) => w.dir === 'up' && w.party === party && w.type === ANSWER[moment.request] && (moment.round === undefined || w.round === moment.round);
  const what = moment.request === 'evaluate' ? "the final 'evaluate'" : `round ${moment.round}`;
  tap.before((w) => request(w, 'party-1'), () => freeze(p1));
  if (!moment.party2Answered) tap.before((w) => request(w, 'party-2'), () => freeze(p2));

  const first = { coordinator: coord, 'party-1': p1, 'party-2': p2 };
  await tap.waitFor((w) => request(w, 'party-1'), `${what} reaching party-1 (frozen)`, first);
  const last = moment.party2Answered
    ? await tap.waitFor((w) => answer(w, 'party-2'), `party-2 answering ${what}`, first)
    : await tap.waitFor((w) => request(w, 'party-2'), `${what} reaching party-2 (frozen)`, first);
  p2.child.kill('SIGKILL');
  await p2.exit;
  await tap.upstreamClosed(last.conn);
  await coord.waitFor((r) => r.party === 'party-2' && typeof r.msg === 'string' && /disconnect/.test(r.msg), 'the coordinator noticing that party-2 left');

  const restarted = run(BIN.party, partyArgs(1, url, out));
  const watch = { coordinator: coord, 'restarted party-2': restarted };
  const ready = await tap.waitFor((w) => w.dir === 'up' && w.party === 'party-2' && w.conn !== last.conn && w.type === 'ready', 'the restarted party-2 ready', watch);
  await tap.waitFor((w) => w.dir === 'down' && w.conn === ready.conn && w.seq > ready.seq, 'the coordinator answering the rejoin', watch);
  thaw(p1);

  await allExitZero({ coordinator: coord, 'party-1': p1, 'restarted party-2': restarted });
  // The harness did what it says: party-1 answered only after party-2 had rejoined.
  const late = tap.records.find((w) => answer(w, 'party-1'));
  assert.ok(late && late.seq > ready.seq, `party-1 answered ${what} after the restarted party-2 was ready`);
  assertSameResult(out, ref);
}

for (const r of [5, ROUNDS - 3, ROUNDS - 1])
  test(
    `a party killed while another is mid-round: party-2 killed after answering round ${r + 1} of ${ROUNDS} (party-1 frozen before answering it), restarted; the job ends as the uninterrupted run`,
    TIMEOUT,
    (t) => killWhileOtherFrozen(t, { request: 'round', round: r + 1, party2Answered: true }),
  );

test(
  "a party killed during the evaluation: party-2 killed after sending its test scores (party-1 frozen before answering 'evaluate'), restarted; the job ends as the uninterrupted run",
  TIMEOUT,
  (t) => killWhileOtherFrozen(t, { request: 'evaluate', party2Answered: true }),
);

test(
  "a party killed during the evaluation: party-2 killed with 'evaluate' unanswered (party-1 frozen before answering it too), restarted; the job ends as the uninterrupted run",
  TIMEOUT,
  (t) => killWhileOtherFrozen(t, { request: 'evaluate', party2Answered: false }),
);

// ---- 2. a checkpoint of the final round ------------------------------------

test(`a completed job leaves no checkpoint.bin in --out: --rounds ${CP_ROUNDS} --checkpoint-every ${CP_EVERY}`, TIMEOUT, async (t) => {
  t.after(killAll);
  const { out, result } = await reference(CP_ROUNDS, CP_FLAGS);
  assert.equal(result.summary.rounds, CP_ROUNDS);
  assert.ok(!existsSync(join(out, 'checkpoint.bin')), `${join(out, 'checkpoint.bin')} is still there after the job completed`);
});

test('--resume of a completed job says that the job completed (exit 64 or 65) and leaves its results alone', TIMEOUT, async (t) => {
  t.after(killAll);
  const { out: done } = await reference(CP_ROUNDS, CP_FLAGS);
  const out = newDir('completed');
  cpSync(done, out, { recursive: true });
  const before = ['summary.json', 'trace.jsonl', ...files.parties.map((p) => `model-${p.id}.json`)].map((f) => [f, readFileSync(join(out, f))] as const);
  // --rejoin-timeout: what a resumed coordinator waits for its parties (none run here).
  const again = coordinator(out, CP_ROUNDS, [...CP_FLAGS, '--resume', '--rejoin-timeout', '5000']);
  const { code } = await again.exit;
  assert.ok(code === 64 || code === 65, `exit ${code}, expected 64 or 65; stderr: ${again.stderr().trim()}`);
  assert.match(again.stderr(), /completed/, 'the message says the job completed');
  assert.doesNotMatch(again.stderr(), /privacy budget/);
  assert.doesNotMatch(again.stderr(), STACK_LINE);
  for (const [f, bytes] of before) assert.ok(readFileSync(join(out, f)).equals(bytes), `${f} changed`);
  assert.ok(!existsSync(join(out, 'checkpoint.bin')), 'no checkpoint.bin after the refused --resume');
});

test(`kill -9 the coordinator after the final round's checkpoint (parties frozen in the evaluation): --resume finishes the job as the uninterrupted run`, TIMEOUT, async (t) => {
  t.after(killAll);
  const ref = (await reference(CP_ROUNDS, CP_FLAGS)).result;
  const out = newDir('final-checkpoint');
  const tap = await relay(t);
  const first = coordinator(out, CP_ROUNDS, CP_FLAGS);
  tap.target = await listeningPort(first);
  const url = `ws://127.0.0.1:${tap.port}`;
  const parties: Record<string, Proc> = { 'party-1': run(BIN.party, partyArgs(0, url, out)), 'party-2': run(BIN.party, partyArgs(1, url, out)) };
  for (const id of Object.keys(parties)) tap.before((w) => w.dir === 'down' && w.party === id && w.type === 'evaluate', () => freeze(parties[id]));
  const watch = { coordinator: first, ...parties };
  for (const id of Object.keys(parties)) await tap.waitFor((w) => w.dir === 'down' && w.party === id && w.type === 'evaluate', `the evaluation request to ${id}`, watch);
  await first.waitFor((r) => r.msg === 'checkpoint written' && r.round === CP_ROUNDS, `the checkpoint of round ${CP_ROUNDS}`);
  first.child.kill('SIGKILL');
  await first.exit;
  for (const p of Object.values(parties)) thaw(p);

  const second = coordinator(out, CP_ROUNDS, [...CP_FLAGS, '--resume']);
  tap.target = await listeningPort(second);
  await allExitZero({ 'resumed coordinator': second, ...parties });
  assertSameResult(out, ref);
  assert.ok(!existsSync(join(out, 'checkpoint.bin')), 'no checkpoint.bin after the resumed job completed');
});
