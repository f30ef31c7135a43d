// The party's session without a socket: messages go through the real codec and validator
// (with the context the session builds), and a party restarted in the middle of a job and
// sent `resume` for round k (protocol 6) ends up exactly where the uninterrupted one was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import seedrandom from 'seedrandom';
import { type FeatureTable, ConfigError, csrFromDense, packIds } from '@admm-share/core';
import { type CoordinatorMessage, type PartyMessage, type WholeCoordinatorMessage, PROTOCOL_VERSION, ProtocolError, decode, encode, validateCoordinatorMessage } from '@admm-share/protocol';
import { maxPayloadFor } from '../transport/link.js';
import { type PrivacyConfig, normaliseRows } from '../privacy/mechanism.js';
import { Privacy } from '../privacy/privacy.js';
import { handle } from '../session/session.js';
import { type Outcome, type SessionEnv, type SessionState, connectionLost, connectionOpened, newSession, validationContext } from '../session/state.js';
import type { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { capture } from './capture-log.js';

const JOB = 'session-job';
const FILE_ROWS = 30;
const FEATURES = 4;
/** The aligned rows: 25 of the file's 30, in another order. */
const TRAIN_ROWS = Uint32Array.from({ length: 25 }, (_, i) => (i * 7 + 3) % FILE_ROWS);
const N = TRAIN_ROWS.length;
const LAMBDA = 0.05;
const RHO = 0.8;
const NO_PRIVACY: PrivacyConfig = { mechanism: 'none', bx: 20 };

function table(seed: string): FeatureTable {
  const rand = seedrandom(seed);
  const dense = Array.from({ length: FILE_ROWS }, () => Array.from({ length: FEATURES }, () => (rand() < 0.7 ? rand() - 0.3 : 0)));
  return {
    file: 'train.csv',
    ids: Array.from({ length: FILE_ROWS }, (_, i) => `row-${i}`),
    // Rows of norm <= 1, as a party with privacy on makes them (the bounds assume it).
    X: normaliseRows(csrFromDense(dense)).X,
    featureNames: Array.from({ length: FEATURES }, (_, j) => `f${j}`),
    lines: Array.from({ length: FILE_ROWS }, (_, i) => i + 2),
  };
}

function env(opts: { privacy?: PrivacyConfig; intercept?: boolean; ledgerPath?: string; log?: pino.Logger } = {}): SessionEnv {
  return {
    partyId: 'p1',
    jobId: JOB,
    intercept: opts.intercept ?? false,
    token: undefined,
    train: { ...table('session-data'), ids: packIds(Array.from({ length: FILE_ROWS }, (_, i) => `row-${i}`)) },
    test: undefined,
    releaseTestScores: false,
    features: FEATURES,
    privacy: new Privacy(opts.privacy ?? NO_PRIVACY),
    ledgerPath: opts.ledgerPath ?? '/nonexistent/ledger.json',
    // The intersection is not under test here (psi.test.ts): setup names file rows directly.
    psi: { answer: () => Promise.reject(new Error('no psi in these tests')), blindAgain: () => Promise.reject(new Error('no psi in these tests')), fileRows: (_set, positions) => positions, useCache: () => undefined, costs: new Map(), settle: () => undefined, prepare: () => undefined, written: () => Promise.resolve() },
    maxLabelIds: 1000,
    threads: 'auto',
    role: 'passive',
    log: opts.log ?? pino({ level: 'silent' }),
  };
}

/** One message from the coordinator, through the wire and the validator as link.ts does it. */
function feed(s: SessionState, e: SessionEnv, msg: CoordinatorMessage): Outcome {
  const got = validateCoordinatorMessage(decode(encode(msg)), validationContext(s, e));
  assert.notEqual(got.type, 'part');
  return handle(s, e, got as WholeCoordinatorMessage);
}

function replies(o: Outcome): PartyMessage[] {
  assert.ok(o.kind !== 'done' && o.kind !== 'later', `unexpected ${o.kind}`);
  return o.messages;
}

/** challenge, welcome, setup: the session is then in training with a fresh x = 0. */
function joinJob(s: SessionState, e: SessionEnv): void {
  connectionOpened(s);
  assert.equal(replies(feed(s, e, { type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce: new Uint8Array(32).fill(1) }))[0].type, 'hello');
  assert.equal(feed(s, e, { type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: JOB }).kind, 'answered');
  const setup: CoordinatorMessage = { type: 'setup', jobId: JOB, trainRows: TRAIN_ROWS, testRows: new Uint32Array(0), testFrom: 'test', lambda: LAMBDA, loss: 'logistic', rounds: 20, rho: RHO, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 };
  assert.deepEqual(replies(feed(s, e, setup)).map((m) => m.type), ['ready']);
}

/** The broadcast of each round: arbitrary, but fixed (the x-update is defined for any c). */
function broadcasts(rounds: number): Float64Array[] {
  const rand = seedrandom('session-broadcasts');
  return Array.from({ length: rounds + 1 }, () => Float64Array.from({ length: N }, () => 2 * rand() - 1));
}

function round(s: SessionState, e: SessionEnv, t: number, c: Float64Array): Float64Array {
  const [reply] = replies(feed(s, e, { type: 'round', jobId: JOB, round: t, rho: RHO, c }));
  assert.ok(reply.type === 'share' && reply.round === t, `round ${t}: ${reply.type}`);
  return reply.share.slice(); // the session's own buffer changes in the next round
}

function xOf(s: SessionState): RidgeXUpdate {
  assert.ok(s.model?.kind === 'admm');
  return s.model.x;
}

function assertBitIdentical(actual: Float64Array, expected: Float64Array, label: string): void {
  assert.equal(actual.length, expected.length, `${label}: length`);
  const a = Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength);
  const b = Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength);
  if (!a.equals(b)) {
    const i = actual.findIndex((v, k) => !Object.is(v, expected[k]));
    assert.fail(`${label}[${i}]: ${actual[i]} vs ${expected[i]}`);
  }
}

/** An uninterrupted party: rounds 1..rounds, keeping x, intercept and the share after each. */
function uninterrupted(e: SessionEnv, cs: Float64Array[], rounds: number) {
  const s = newSession();
  joinJob(s, e);
  const shares: Float64Array[] = [new Float64Array(N)];
  const xs: Float64Array[] = [new Float64Array(FEATURES)];
  const intercepts = [0];
  for (let t = 1; t <= rounds; t++) {
    shares.push(round(s, e, t, cs[t]));
    xs.push(xOf(s).x.slice());
    intercepts.push(xOf(s).intercept);
  }
  return { s, shares, xs, intercepts };
}

function done(rounds: number, reason: 'max-rounds' | 'budget' = 'max-rounds'): CoordinatorMessage {
  return { type: 'done', jobId: JOB, reason, rounds, objective: 0.5, params: { variant: 'exact', rho: RHO, alpha: 1, lambda: LAMBDA, loss: 'logistic' }, classes: null };
}

function resume(k: number, cs: Float64Array[], shares: Float64Array[]): CoordinatorMessage {
  const none = new Float64Array(0);
  return k === 0
    ? { type: 'resume', jobId: JOB, round: 0, rho: RHO, c: none, previousShare: none, share: none }
    : { type: 'resume', jobId: JOB, round: k, rho: RHO, c: cs[k], previousShare: shares[k - 1], share: shares[k] };
}

test('a restarted session sent resume for round k has the x, intercept and share of the uninterrupted one, bit for bit, and continues identically', () => {
  const cs = broadcasts(6);
  const a = uninterrupted(env({ intercept: true }), cs, 6);
  assert.ok(a.intercepts[3] !== 0 && a.xs[3].some((v) => v !== 0), 'the fixture moves x and the intercept');
  for (const k of [1, 2, 5]) {
    const { log, lines } = capture();
    const e = env({ intercept: true, log });
    const b = newSession();
    joinJob(b, e);
    assert.deepEqual(replies(feed(b, e, resume(k, cs, a.shares))), []);
    assert.equal(b.round, k);
    assertBitIdentical(xOf(b).x, a.xs[k], `k=${k} x`);
    assert.ok(Object.is(xOf(b).intercept, a.intercepts[k]), `k=${k} intercept ${xOf(b).intercept} vs ${a.intercepts[k]}`);
    assertBitIdentical(xOf(b).share, a.shares[k], `k=${k} recomputed share`);
    assertBitIdentical(xOf(b).released, a.shares[k], `k=${k} released`);
    assert.equal(lines.filter((l) => l.level === 40).length, 0, 'no replay warning');
    assertBitIdentical(round(b, e, k + 1, cs[k + 1]), a.shares[k + 1], `k=${k} next round's share`);
  }
});

test('resume at round 0 after a rejoin starts from x = 0; a job ending after 0 rounds writes no model', () => {
  const cs = broadcasts(3);
  const e = env({ intercept: true });
  const a = uninterrupted(e, cs, 3);
  // The connection breaks; the coordinator had completed no round (it asks for round 1 again).
  connectionLost(a.s);
  joinJob(a.s, e);
  assert.equal(a.s.current, false, 'a rejoin past round 0 waits for resume');
  feed(a.s, e, resume(0, cs, a.shares));
  assert.equal(a.s.round, 0);
  assert.ok(xOf(a.s).x.every((v) => v === 0) && xOf(a.s).intercept === 0 && xOf(a.s).released.every((v) => v === 0));
  assertBitIdentical(round(a.s, e, 1, cs[1]), a.shares[1], 'round 1 after resume at 0');
  // A fresh session resumed at 0 and told the job ended after 0 rounds has no model: x = 0 is
  // not the result of an update.
  const b = newSession();
  joinJob(b, e);
  feed(b, e, resume(0, cs, a.shares));
  assert.throws(
    () => feed(b, e, done(0, 'budget')),
    (err: unknown) => err instanceof ProtocolError && err.kind === 'unexpected' && /the job ended after 0 rounds: no update was made, so there is no model; no model written/.test(err.message),
  );
});

test('a done straight after setup is refused, for 0 rounds and for rounds the party never ran', () => {
  for (const [rounds, re] of [
    [0, /the job ended after 0 rounds: no update was made/],
    [1, /the job ended after round 1, but this party's model is that of round 0 \(no update made yet\); no model written/],
  ] as const) {
    const e = env();
    const s = newSession();
    joinJob(s, e);
    assert.throws(() => feed(s, e, done(rounds)), (err: unknown) => err instanceof ProtocolError && err.closeCode === 4004 && re.test(err.message));
  }
  // A budget that ends the job at round 1 (the party ran round 1, another refused it) leaves
  // the model of round 0: no model either.
  const cs = broadcasts(1);
  const a = uninterrupted(env(), cs, 1);
  assert.throws(() => feed(a.s, env(), done(0, 'budget')), /the job ended after 0 rounds/);
});

test('a round whose update overflows (rho 1e300, c = -1e308) is refused with a 4003 naming both; nothing is sent', () => {
  // Without privacy: with it, the target is clipped and x kept in a ball, so this cannot overflow.
  const e = env();
  const s = newSession();
  joinJob(s, e);
  const c = new Float64Array(N).fill(-1e308);
  let out: Outcome | undefined;
  assert.throws(
    () => (out = feed(s, e, { type: 'round', jobId: JOB, round: 1, rho: 1e300, c })),
    (err: unknown) =>
      err instanceof ProtocolError &&
      err.closeCode === 4003 &&
      /^round 1: the update overflowed \(rho 1e\+300, \|c\| up to 1e\+308\): refusing to send non-finite values \(value 0 is NaN\)$/.test(err.message),
  );
  assert.equal(out, undefined);
});

test('a rejoined session refuses a round or a done before resume: its x is not current', () => {
  const cs = broadcasts(2);
  const e = env();
  const a = uninterrupted(e, cs, 2);
  connectionLost(a.s);
  joinJob(a.s, e);
  const unexpected = (fn: () => unknown, re: RegExp) => assert.throws(fn, (err: unknown) => err instanceof ProtocolError && err.kind === 'unexpected' && re.test(err.message));
  unexpected(() => feed(a.s, e, { type: 'round', jobId: JOB, round: 3, rho: RHO, c: cs[1] }), /round 3 before resume/);
  const done: CoordinatorMessage = { type: 'done', jobId: JOB, reason: 'max-rounds', rounds: 2, objective: 0.5, params: { variant: 'exact', rho: RHO, alpha: 1, lambda: LAMBDA, loss: 'logistic' }, classes: null };
  unexpected(() => feed(a.s, e, done), /not recomputed since it rejoined; no model written/);
  // After the replay the same done writes the model of round 2.
  feed(a.s, e, resume(2, cs, a.shares));
  const out = feed(a.s, e, done);
  assert.ok(out.kind === 'done');
  assertBitIdentical(out.model.coefficients, a.xs[2], 'model of round 2');
});

test('a done for another round than the model is refused (no model written)', () => {
  const cs = broadcasts(3);
  const e = env();
  const a = uninterrupted(e, cs, 3);
  assert.throws(() => feed(a.s, e, done(1)), /the job ended after round 1, but this party's model is that of round 3/);
  // One round earlier is the budget case: the model goes back to the round before.
  const out = feed(a.s, e, done(2));
  assert.ok(out.kind === 'done');
  assertBitIdentical(out.model.coefficients, a.xs[2], 'model of round 2');
});

test('without noise, a replay that does not reproduce the share sent logs a warning naming the largest difference', () => {
  const cs = broadcasts(3);
  const a = uninterrupted(env(), cs, 3);
  const sent = a.shares[3].slice();
  sent[7] += 1e-6 * Math.max(...sent.map(Math.abs));
  const { log, lines } = capture();
  const e = env({ log });
  const b = newSession();
  joinJob(b, e);
  feed(b, e, { ...resume(3, cs, a.shares), share: sent } as CoordinatorMessage);
  const warnings = lines.filter((l) => l.level === 40);
  assert.equal(warnings.length, 1, JSON.stringify(lines));
  assert.equal(warnings[0].row, 7);
  assert.ok(Math.abs((warnings[0].relative as number) - 1e-6) < 1e-9);
  // The coordinator's copy is authoritative: the party continues from what was sent.
  assertBitIdentical(xOf(b).released, sent, 'released');
});

test('with privacy (seeded noise), the replay draws no noise, does not charge the ledger, and takes the given share as released', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'session-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const ledgerPath = join(dir, 'model.ledger.json');
  const privacy: PrivacyConfig = { mechanism: 'gaussian-share', epsilon: 8, delta: 1e-5, bx: 2, seed: 'session-noise' };
  const cs = broadcasts(4);
  const a = uninterrupted(env({ privacy, ledgerPath }), cs, 4);
  const e = env({ privacy, ledgerPath });
  let draws = 0;
  const noise = e.privacy.noise!;
  const addNormal = noise.addNormal;
  noise.addNormal = (out, sigma) => {
    draws++;
    addNormal(out, sigma);
  };
  const b = newSession();
  joinJob(b, e); // restores the ledger of 4 releases
  assert.equal(e.privacy.releases, 4);
  const k = 3;
  feed(b, e, resume(k, cs, a.shares));
  assert.equal(draws, 0, 'no noise drawn');
  assert.equal(e.privacy.releases, 4, 'no release booked');
  assertBitIdentical(xOf(b).released, a.shares[k], 'released is the noisy share that was sent');
  assertBitIdentical(xOf(b).x, a.xs[k], 'x recomputed from the noisy release of round k - 1');
  // The next round is a real release again.
  round(b, e, k + 1, cs[k + 1]);
  assert.equal(draws, 1);
  assert.equal(e.privacy.releases, 5);
});

test('with privacy, resuming at round k needs a ledger that paid for k releases', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'session-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const cs = broadcasts(2);
  const privacy: PrivacyConfig = { mechanism: 'gaussian-share', epsilon: 8, delta: 1e-5, bx: 2, seed: 'session-noise' };
  const a = uninterrupted(env({ privacy, ledgerPath: join(dir, 'a.ledger.json') }), cs, 2);
  const e = env({ privacy, ledgerPath: join(dir, 'lost.ledger.json') }); // no ledger on disk: 0 releases recorded
  const b = newSession();
  joinJob(b, e);
  assert.throws(() => feed(b, e, resume(2, cs, a.shares)), (err: unknown) => err instanceof ConfigError && /records only 0 releases/.test(err.message));
});

test("the largest resume (three vectors over every training row) fits the party's maxPayload", () => {
  for (const rows of [1, 1000, 70000]) {
    const v = () => Float64Array.from({ length: rows }, (_, i) => -Math.PI * (i + 1));
    const bytes = encode({ type: 'resume', jobId: 'j'.repeat(64), round: 2 ** 40, rho: Math.E, c: v(), previousShare: v(), share: v() }).length;
    const max = maxPayloadFor({ train: rows, test: 0, labelIds: 0 });
    assert.ok(bytes <= max, `${rows} rows: resume is ${bytes} bytes, maxPayload ${max}`);
  }
});

test("a set's label points in several psi messages reach the intersection as one array, in order; parts out of order, of another set or a set twice are refused", async () => {
  const e = env({});
  const given: Uint8Array[] = [];
  e.psi = { ...e.psi, answer: (_set, points) => (given.push(points.slice()), Promise.reject(new Error('answered'))) };
  const s = newSession();
  connectionOpened(s);
  replies(feed(s, e, { type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce: new Uint8Array(32).fill(1) }));
  feed(s, e, { type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: JOB });
  // 7 label points, each byte its point's number, in messages of 3, 3 and 1.
  const points = Uint8Array.from({ length: 7 * 32 }, (_, k) => Math.floor(k / 32) + 1);
  const psi = (at: number, to: number, set: 'train' | 'test' = 'train', total = 7): CoordinatorMessage => ({ type: 'psi', jobId: JOB, set, total, at, points: points.slice(at * 32, to * 32) });
  assert.deepEqual(replies(feed(s, e, psi(0, 3))), []);
  // Out of order, or another set's, among the parts of a set: refused.
  assert.throws(() => feed(s, e, psi(4, 7)), (err: unknown) => err instanceof ProtocolError && /psi\.at: label ids from 4 of 7 \(train\), expected 3 of 7 \(train\)/.test(err.message));
  assert.throws(() => feed(s, e, psi(3, 6, 'train', 8)), /expected 3 of 7/);
  assert.throws(() => feed(s, e, psi(0, 1, 'test', 1)), /psi for the test set among the parts of the train set's \(3 of 7 label ids came\)/);
  assert.deepEqual(replies(feed(s, e, psi(3, 6))), []);
  assert.equal(given.length, 0, 'nothing is blinded before the last part');
  const last = feed(s, e, psi(6, 7));
  assert.equal(last.kind, 'later');
  assert.deepEqual(given, [points]);
  // The set again (as a first part, or whole): a replay.
  assert.throws(() => feed(s, e, psi(0, 3)), (err: unknown) => err instanceof ProtocolError && err.kind === 'unexpected' && /twice on one connection/.test(err.message));
  // A later part with no first one.
  assert.throws(() => feed(s, e, psi(3, 6, 'test')), /psi\.at: label ids from 3 of 7 \(test\), expected a first psi, at 0/);
  // A whole set in one message is passed on as it came.
  const whole = feed(s, e, psi(0, 1, 'test', 1));
  assert.equal(whole.kind, 'later');
  assert.deepEqual(given[1], points.slice(0, 32));
  await Promise.allSettled([last, whole].map((o) => (o.kind === 'later' ? o.work : undefined)));
});

test("setup.testFrom 'train': the held-out rows of the training file are scored on evaluate, never trained on; a private party refuses them without --release-test-scores", () => {
  const held = Uint32Array.from({ length: FILE_ROWS }, (_, r) => r).filter((r) => !TRAIN_ROWS.includes(r));
  assert.equal(held.length, FILE_ROWS - N);
  const setup = (e: SessionEnv, s: SessionState) => {
    connectionOpened(s);
    feed(s, e, { type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce: new Uint8Array(32).fill(1) });
    feed(s, e, { type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: JOB });
    return feed(s, e, { type: 'setup', jobId: JOB, trainRows: TRAIN_ROWS, testRows: held, testFrom: 'train', lambda: LAMBDA, loss: 'logistic', rounds: 20, rho: RHO, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 });
  };
  const e = env();
  const s = newSession();
  assert.deepEqual(replies(setup(e, s)).map((m) => m.type), ['ready']);
  assert.equal(xOf(s).n, N, 'the block holds the training rows only');
  round(s, e, 1, broadcasts(1)[1]);
  const [reply] = replies(feed(s, e, { type: 'evaluate', jobId: JOB, round: 1 }));
  assert.ok(reply.type === 'scores');
  // Each held-out row of the file, scored with the model of round 1, computed here from the file's rows.
  const X = e.train.X;
  assert.ok(!('selectCsr' in X) && !('front' in X));
  const x = xOf(s).x;
  const want = Array.from(held, (r) => {
    let v = 0;
    for (let k = X.indptr[r]; k < X.indptr[r + 1]; k++) v += X.values[k] * x[X.indices[k]];
    return v;
  });
  assert.equal(reply.scores.length, held.length);
  reply.scores.forEach((v, i) => assert.ok(Math.abs(v - want[i]) <= 1e-12, `held-out row ${held[i]}: ${v} vs ${want[i]}`));

  const privacy: PrivacyConfig = { mechanism: 'gaussian-share', epsilon: 8, delta: 1e-5, bx: 2, seed: 'session-noise' };
  assert.throws(() => setup(env({ privacy }), newSession()), (err: Error) => err instanceof ConfigError && /holds out 5 of this party's rows as test rows .*pass --release-test-scores/.test(err.message));
  const { log, lines } = capture();
  assert.deepEqual(replies(setup({ ...env({ privacy, log }), releaseTestScores: true }, newSession())).map((m) => m.type), ['ready']);
  assert.ok(lines.some((l) => l.level === 40 && /held-out test rows are scored without noise .*not covered by the privacy guarantee/.test(String(l.msg))));
});
