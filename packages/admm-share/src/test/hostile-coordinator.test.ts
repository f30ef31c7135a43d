// A real admm-party against coordinators written here (ws's WebSocketServer on port 0, the
// protocol package's codec and validators): one that is flooded and answers 4014 at first,
// one that is not started yet, and hostile ones that send extreme numbers or end the job
// before any round. The party joins when it can, and never sends a non-finite value or
// writes a model that no update produced.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { type WebSocket, WebSocketServer } from 'ws';
import { syntheticDataset } from '@admm-share/core';
import {
  type CoordinatorMessage,
  type PartyMessage,
  CloseCodes,
  PROTOCOL_VERSION,
  closeReason,
  decode,
  encode,
  validatePartyMessage,
} from '@admm-share/protocol';
import { writeVerticalSplit } from '../split.js';
import { psiLabels } from './psi-peer.js';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

const JOB = 'hostile-coordinator';
const RHO = 1;
const LAMBDA = 0.1;

function setup(dir: string) {
  const s = syntheticDataset({ trainRows: 200, testRows: 50, seed: 'hostile-coordinator' });
  return writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test);
}

/** What the fake coordinator tells a party once it is ready: the rest of the job. */
type Script = (send: (m: CoordinatorMessage) => void, reply: PartyMessage, n: number, conn: { number: number; drop(): void }) => void;

interface Fake {
  port: number;
  /** Every message the party sent after `ready`, validated. */
  received: PartyMessage[];
  /** Frames from the party that did not validate (a non-finite share, say): must stay empty. */
  invalid: string[];
  /** Connections turned away with 4014, then the one that was admitted. */
  connections: () => number;
  /** The close code and reason of the first admitted connection the fake did not drop itself. */
  closed: Promise<{ code: number; reason: string }>;
}

/**
 * A coordinator that answers the connections `busy` picks (by number, from 1) with 4014, as a
 * flooded one does, runs challenge, welcome, psi and setup (all of the party's rows) on the
 * others, and hands each message from `ready` on to `script`. An invalid frame is recorded
 * and closes the connection with 4003, as the real coordinator does.
 */
async function fakeCoordinator(t: { after(fn: () => unknown): void }, script: Script, opts: { busy?: (connection: number) => boolean; port?: number } = {}): Promise<Fake> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: opts.port ?? 0, maxPayload: 1 << 20 });
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  t.after(() => {
    for (const c of wss.clients) c.terminate();
    wss.close();
  });
  const received: PartyMessage[] = [];
  const invalid: string[] = [];
  let connections = 0;
  const labelSet = psiLabels(JOB, ['label-1', 'label-2', 'label-3']);
  let admitted!: (r: { code: number; reason: string }) => void;
  const closed = new Promise<{ code: number; reason: string }>((resolve) => (admitted = resolve));
  wss.on('connection', (ws: WebSocket) => {
    ws.on('error', () => undefined);
    const number = ++connections;
    if (opts.busy?.(number)) {
      ws.close(CloseCodes.busy.code, closeReason('busy', '64 connections are already waiting to say hello'));
      return;
    }
    let dropped = false;
    const conn = { number, drop: () => ((dropped = true), ws.terminate()) };
    ws.on('close', (code, reason) => dropped || admitted({ code, reason: reason.toString() }));
    const send = (m: CoordinatorMessage) => ws.send(encode(m));
    let n = 0;
    let ready = false;
    ws.on('message', (data: Buffer) => {
      let msg: PartyMessage;
      try {
        msg = validatePartyMessage(decode(data));
      } catch (err) {
        invalid.push((err as Error).message);
        ws.close(CloseCodes.invalid.code, closeReason('invalid', (err as Error).message));
        return;
      }
      if (msg.type === 'hello') {
        n = msg.trainRows;
        send({ type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: JOB });
        // The same points on every connection, as a coordinator's for one job (a party refuses another set).
        send(labelSet);
      } else if (msg.type === 'ids') {
        if (msg.set !== 'train') return;
        const trainRows = Uint32Array.from({ length: n }, (_, i) => i);
        send({ type: 'setup', jobId: JOB, trainRows, testRows: new Uint32Array(0), testFrom: 'test', lambda: LAMBDA, loss: 'logistic', rounds: 10, rho: RHO, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 });
      } else if (msg.type === 'ready' && !ready) {
        ready = true;
        script(send, msg, n, conn);
      } else {
        received.push(msg);
        script(send, msg, n, conn);
      }
    });
    send({ type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce: new Uint8Array(32).fill(connections) });
  });
  const { port } = wss.address() as { port: number };
  return { port, received, invalid, connections: () => connections, closed };
}

function done(rounds: number): CoordinatorMessage {
  return { type: 'done', jobId: JOB, reason: 'max-rounds', rounds, objective: 0.5, params: { variant: 'exact', rho: RHO, alpha: 1, lambda: LAMBDA, loss: 'logistic' }, classes: null };
}

/** A well-behaved job: `rounds` rounds with a fixed broadcast, then done. */
function rounds(count: number): Script {
  return (send, msg, n) => {
    const next = msg.type === 'share' ? msg.round + 1 : 1;
    if (next > count) send(done(count));
    else send({ type: 'round', jobId: JOB, round: next, rho: RHO, c: new Float64Array(n).fill(-0.5) });
  };
}

function party(files: ReturnType<typeof setup>, port: number, model: string, extra: string[] = []) {
  const f = files.parties[0];
  return run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', model, ...extra]);
}

/** A port nothing listens on (it was free a moment ago): a coordinator not started yet. */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as { port: number };
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

test('a coordinator that answers 4014 (busy) to the first connections: the party retries with backoff, logs each retry, and joins', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const fake = await fakeCoordinator(t, rounds(2), { busy: (k) => k <= 3 });
  const model = join(dir, 'model.json');
  const p = party(files, fake.port, model);
  const { code } = await p.exit;
  assert.equal(code, 0, p.stderr());
  assert.equal(fake.connections(), 4);
  const retries = p.records.filter((r) => /coordinator busy/.test(String(r.msg)));
  assert.equal(retries.length, 3, p.stdout());
  assert.deepEqual(retries.map((r) => r.attempt), [1, 2, 3]);
  for (const r of retries) {
    assert.match(String(r.why), /^code 4014: too many pending connections/);
    assert.ok(typeof r.delayMs === 'number' && r.delayMs > 0);
  }
  assert.equal((await fake.closed).code, 1000);
  assert.deepEqual(fake.invalid, []);
  const m = JSON.parse(readFileSync(model, 'utf8'));
  assert.equal(m.hyperParameters.rounds, 2);
  assert.ok(m.coefficients.every((v: unknown) => typeof v === 'number' && Number.isFinite(v)));
});

test('during training too: a rejoin answered with 4014 is retried, and the party resumes and finishes', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  let share1: Float64Array | undefined;
  const fake = await fakeCoordinator(
    t,
    (send, msg, n, conn) => {
      const c = new Float64Array(n).fill(-0.5);
      if (conn.number === 1) {
        // Round 1, then the connection breaks (no close frame: 1006).
        if (msg.type === 'ready') send({ type: 'round', jobId: JOB, round: 1, rho: RHO, c });
        else if (msg.type === 'share') {
          share1 = msg.share.slice();
          conn.drop();
        }
      } else if (msg.type === 'ready') {
        send({ type: 'resume', jobId: JOB, round: 1, rho: RHO, c, previousShare: new Float64Array(n), share: share1! });
        send({ type: 'round', jobId: JOB, round: 2, rho: RHO, c });
      } else if (msg.type === 'share') send(done(2));
    },
    { busy: (k) => k === 2 || k === 3 },
  );
  const model = join(dir, 'model.json');
  const p = party(files, fake.port, model);
  assert.equal((await p.exit).code, 0, p.stderr());
  assert.equal(fake.connections(), 4);
  const retries = p.records.filter((r) => r.msg === 'connection lost; reconnecting').map((r) => String(r.why));
  assert.equal(retries.length, 3, p.stdout());
  assert.match(retries[0], /^connection lost \(code 1006\)|^ECONNRESET/);
  for (const why of retries.slice(1)) assert.match(why, /^code 4014: too many pending connections/);
  assert.equal((await fake.closed).code, 1000);
  assert.equal(JSON.parse(readFileSync(model, 'utf8')).hyperParameters.rounds, 2);
});

test("a coordinator that names another job than the party's --job is refused by the party itself (4007), before any id is blinded", async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const fake = await fakeCoordinator(t, rounds(1));
  const p = party(files, fake.port, join(dir, 'model.json'), ['--job', 'pinned-job']);
  assert.equal((await p.exit).code, 69, p.stderr());
  assert.match(p.stderr(), /this party joins only job 'pinned-job' \(--job\), the coordinator runs 'hostile-coordinator'/);
  assert.equal((await fake.closed).code, CloseCodes.wrongJob.code);
  assert.equal(fake.received.filter((m) => m.type === 'ids').length, 0, 'no ids sent');
  assert.equal(existsSync(join(dir, 'model.json')), false);
});

test('a coordinator that stays busy: the party gives up after --connect-timeout with exit 69, saying so', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const fake = await fakeCoordinator(t, rounds(1), { busy: () => true });
  const p = party(files, fake.port, join(dir, 'model.json'), ['--connect-timeout', '1500']);
  const started = Date.now();
  assert.equal((await p.exit).code, 69, p.stderr());
  assert.ok(Date.now() - started < 10_000);
  assert.match(p.stderr(), /admm-party: error: the coordinator at ws:\/\/127\.0\.0\.1:\d+ stayed busy \(code 4014: too many pending connections[^)]*; \d+ attempts in 1500 ms\): .*raise --connect-timeout/);
  assert.ok(fake.connections() >= 3, `${fake.connections()} connections`);
  assert.equal(existsSync(join(dir, 'model.json')), false);
});

test('a party started before its coordinator retries ECONNREFUSED and joins once the coordinator listens (docker compose start order)', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const port = await freePort();
  const out = join(dir, 'out');
  const parties = files.parties.map((f) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`)]),
  );
  for (const p of parties) {
    const r = await p.waitFor((x) => /coordinator not reachable/.test(String(x.msg)), 'a retry');
    assert.equal(r.why, 'ECONNREFUSED');
  }
  const coord = run(BIN.coordinator, ['--port', String(port), '--labels', files.labels, '--parties', files.parties.map((f) => f.id).join(','), '--out', out, '--rounds', '5']);
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.equal(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).rounds, 5);
});

test('with no coordinator at all, the party gives up after --connect-timeout and says to start it first', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const port = await freePort();
  const p = party(files, port, join(dir, 'model.json'), ['--connect-timeout', '1000']);
  assert.equal((await p.exit).code, 69);
  const url = `ws://127\\.0\\.0\\.1:${port}`;
  assert.match(p.stderr(), new RegExp(`^admm-party: error: connection to ${url} failed: ECONNREFUSED \\(\\d+ attempts in 1000 ms\\): is the coordinator running at ${url}\\? start it first, or raise --connect-timeout\\n$`));
});

test('a round with rho 1e300 and c = -1e308: the party sends nothing non-finite, closes with 4003 naming both, writes no model, exits 69', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const fake = await fakeCoordinator(t, (send, msg, n) => {
    if (msg.type === 'ready') send({ type: 'round', jobId: JOB, round: 1, rho: 1e300, c: new Float64Array(n).fill(-1e308) });
    else if (msg.type === 'share') send(done(1));
  });
  const model = join(dir, 'model.json');
  const p = party(files, fake.port, model);
  assert.equal((await p.exit).code, 69, p.stderr());
  const closed = await fake.closed;
  assert.equal(closed.code, CloseCodes.invalid.code);
  assert.match(closed.reason, /^invalid message: coordinator sent a bad message: round 1: the update overflowed/);
  assert.match(p.stderr(), /admm-party: error: coordinator sent a bad message: round 1: the update overflowed \(rho 1e\+300, \|c\| up to 1e\+308\): refusing to send non-finite values/);
  assert.deepEqual(fake.invalid, [], 'no non-finite frame was sent');
  assert.deepEqual(fake.received, []);
  assert.equal(existsSync(model), false);
});

test('a done before any round (0 rounds, or rounds the party never ran) is refused: close 4004, no model, exit 69', async (t) => {
  const dir = tempDir(t);
  const files = setup(dir);
  const cases: [number, RegExp][] = [
    [0, /admm-party: error: coordinator sent a bad message: the job ended after 0 rounds: no update was made, so there is no model; no model written/],
    [1, /admm-party: error: coordinator sent a bad message: the job ended after round 1, but this party's model is that of round 0 \(no update made yet\); no model written/],
  ];
  await Promise.all(
    cases.map(async ([count, re], k) => {
      const fake = await fakeCoordinator(t, (send, msg) => {
        if (msg.type === 'ready') send(done(count));
      });
      const model = join(dir, `model-${k}.json`);
      const p = party(files, fake.port, model);
      assert.equal((await p.exit).code, 69, p.stderr());
      assert.match(p.stderr(), re);
      assert.equal((await fake.closed).code, CloseCodes.unexpected.code);
      assert.equal(existsSync(model), false);
    }),
  );
});
