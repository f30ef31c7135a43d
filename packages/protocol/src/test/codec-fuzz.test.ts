// The codec: random and mutated messages only ever raise ProtocolError, and what is accepted satisfies its type.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CloseCodes, type CloseKind, type CoordinatorMessage, decode, encode, PART_VALUES, type Message, type PartyMessage, ProtocolError, validateCoordinatorMessage, validatePartyMessage, type ValidationContext } from '../index.js';
import { NO_PRIVACY, seeded } from './support.js';
import { randInt, PARTY_TYPES, AWKWARD, hashes, rowPermutation, JOB } from './codec-support.js';

// ---------------------------------------------------------------------------------------
// Fuzz

/** The strictest context the fuzz validates under; randomMessage often matches it, so that mutations land next to it. */
const FUZZ_CTX = { jobId: JOB, n: 5, nTest: 5, round: 4, step: 7, batchRows: 5, declaredRows: { train: 3, test: 3 }, fileRows: { train: 20, test: 20 } } as const satisfies ValidationContext;

function randomMessage(rnd: () => number): Message {
  const n = rnd() < 0.5 ? FUZZ_CTX.n : randInt(rnd, 12);
  const vec = () => {
    const v = new Float64Array(n);
    for (let i = 0; i < n; i++) v[i] = rnd() < 0.2 ? AWKWARD[randInt(rnd, AWKWARD.length)] : rnd() * 100 - 50;
    return v;
  };
  const round = rnd() < 0.5 ? FUZZ_CTX.round : 1 + randInt(rnd, 1000);
  const step = rnd() < 0.5 ? FUZZ_CTX.step : 1 + randInt(rnd, 50);
  switch (randInt(rnd, 15)) {
    case 0:
      return { type: 'hello', protocolVersion: 1, partyId: `p${randInt(rnd, 100)}`, jobId: rnd() < 0.5 ? null : JOB, features: 1 + n, trainRows: 1 + n, testRows: n, proof: rnd() < 0.5 ? null : hashes(2, randInt(rnd, 1e9)), noise: false, model: null };
    case 1:
      return { type: 'ids', jobId: JOB, set: rnd() < 0.5 ? 'train' : 'test', points: hashes(rnd() < 0.5 ? 3 : n, randInt(rnd, 1e9), 32), labelPoints: hashes(rnd() < 0.5 ? 2 : n, randInt(rnd, 1e9), 32) };
    case 2:
      return { type: 'ready', jobId: JOB, privacy: NO_PRIVACY };
    case 3:
      return { type: 'share', jobId: JOB, round, share: vec(), penaltySq: rnd() * 10, epsilonSpent: rnd(), solver: rnd() < 0.5 ? null : { iterations: randInt(rnd, 2000), residual: rnd() * 1e-12 } };
    case 4:
      return { type: 'scores', jobId: JOB, round, scores: vec() };
    case 5:
      return rnd() < 0.5 ? { type: 'welcome', protocolVersion: 1, jobId: JOB } : { type: 'psi', jobId: JOB, set: rnd() < 0.5 ? 'train' : 'test', total: 1 + n, at: 0, points: hashes(1 + n, randInt(rnd, 1e9), 32) };
    case 6:
      return {
        type: 'setup',
        jobId: JOB,
        trainRows: rowPermutation(1 + n, 20, randInt(rnd, 1e9)),
        testRows: rowPermutation(n, 20, randInt(rnd, 1e9)),
        testFrom: rnd() < 0.5 ? 'test' : 'train',
        lambda: rnd(),
        loss: rnd() < 0.5 ? 'logistic' : 'squared',
        rounds: 1 + randInt(rnd, 500),
        rho: 0.1 + rnd(),
        parties: 1 + randInt(rnd, 5),
        algorithm: rnd() < 0.5 ? 'admm' : 'sgd',
        role: rnd() < 0.5 ? 'active' : 'passive',
        labels: new Float64Array(0),
        labelFlip: 0,
      };
    case 7:
      return { type: 'round', jobId: JOB, round, rho: 0.1 + rnd(), c: vec() };
    case 8:
      return { type: 'evaluate', jobId: JOB, round };
    case 9:
      return { type: 'challenge', protocolVersion: 4, nonce: hashes(2, randInt(rnd, 1e9)) };
    case 10:
      return { type: 'exhausted', jobId: JOB, round, epsilonSpent: rnd() };
    case 11:
      return { type: 'batchScores', jobId: JOB, step, scores: vec() };
    case 13: {
      // Mostly well formed (round 0 with empty vectors, or round >= 1 with three of one length).
      // Any past round: the validator does not compare a resume's round with ctx.round.
      const k = rnd() < 0.2 ? 0 : rnd() < 0.5 ? randInt(rnd, 4) : round;
      const none = new Float64Array(0);
      return { type: 'resume', jobId: JOB, round: k, rho: 0.1 + rnd(), c: k === 0 ? none : vec(), previousShare: k === 0 ? none : vec(), share: k === 0 ? none : vec() };
    }
    case 12:
      return { type: 'sgd', jobId: JOB, step, epoch: 1 + randInt(rnd, 5), lr: 0.1 + rnd(), gradient: vec(), rows: rowPermutation(n, rnd() < 0.5 ? FUZZ_CTX.n : 20, randInt(rnd, 1e9)), full: rnd() < 0.5 };
    default:
      return {
        type: 'done',
        jobId: JOB,
        reason: 'max-rounds',
        rounds: round,
        objective: rnd() * 100,
        params: { variant: 'jacobi', rho: 1 + rnd(), alpha: 1.5, lambda: rnd(), loss: 'logistic' },
        classes: rnd() < 0.5 ? null : { negative: '-1', positive: '+1' },
      };
  }
}

function mutate(rnd: () => number, src: Uint8Array): Uint8Array {
  let b = Array.from(src);
  const edits = 1 + randInt(rnd, 4);
  for (let e = 0; e < edits; e++) {
    const op = randInt(rnd, 5);
    const pos = randInt(rnd, b.length + 1);
    if (op === 0 && b.length > 0) b[pos % b.length] ^= 1 << randInt(rnd, 8); // flip a bit
    else if (op === 1 && b.length > 0) b[pos % b.length] = randInt(rnd, 256); // replace a byte
    else if (op === 2) b.splice(pos, 0, randInt(rnd, 256)); // insert a byte
    else if (op === 3 && b.length > 0) b.splice(pos % b.length, 1); // delete a byte
    else b = b.slice(0, pos); // truncate
  }
  return Uint8Array.from(b);
}

const KINDS = new Set(Object.keys(CloseCodes));

/**
 * What an accepted message must satisfy whatever bytes it came from: every field the context
 * fixes (job, round, step, vector lengths, row counts and bounds) agrees with it, and every
 * vector is finite. Written from the protocol's rules (PROTOCOL.md), not from the validators (validate-party.ts, validate-coordinator.ts).
 */
function assertSatisfiesContext(m: PartyMessage | CoordinatorMessage, ctx: ValidationContext, label: string): void {
  const fail = (what: string) => assert.fail(`${label}: accepted ${m.type} with ${what} under ${JSON.stringify(ctx)}`);
  const length = (v: ArrayLike<number>, want: number | undefined, what: string) => {
    if (want !== undefined && v.length !== want) fail(`${what} of length ${v.length}`);
  };
  for (const [k, v] of Object.entries(m))
    if (v instanceof Float64Array) for (const x of v) if (!Number.isFinite(x)) fail(`${k} holding ${x}`);
  if (m.type !== 'hello' && m.type !== 'challenge' && ctx.jobId !== undefined && m.jobId !== ctx.jobId) fail(`job '${m.jobId}'`);
  const sameRound = (r: number) => {
    if (!Number.isSafeInteger(r) || r < 1) fail(`round ${r}`);
    if (ctx.round !== undefined && r !== ctx.round) fail(`round ${r}`);
  };
  const sameStep = (step: number) => {
    if (ctx.step !== undefined && step !== ctx.step) fail(`step ${step}`);
  };
  switch (m.type) {
    // Empty when the vector came in parts before the message (the receiver's assembler checks them).
    case 'share':
      sameRound(m.round);
      if (m.share.length > 0) length(m.share, ctx.n, 'share');
      break;
    case 'round':
      sameRound(m.round);
      if (m.c.length > 0) length(m.c, ctx.n, 'c');
      break;
    case 'part':
      sameRound(m.round);
      if (m.at % PART_VALUES !== 0) fail(`a part at ${m.at}`);
      if (ctx.n !== undefined && (m.at >= ctx.n || m.values.length !== Math.min(PART_VALUES, ctx.n - m.at))) fail(`a part of ${m.values.length} at ${m.at}`);
      break;
    case 'scores':
      sameRound(m.round);
      length(m.scores, ctx.nTest, 'scores');
      break;
    case 'exhausted':
      sameRound(m.round);
      break;
    case 'resume': {
      if (!Number.isSafeInteger(m.round) || m.round < 0) fail(`round ${m.round}`);
      if (!(m.rho > 0)) fail(`rho ${m.rho}`);
      const want = m.round === 0 ? 0 : ctx.n;
      for (const [k, v] of [['c', m.c], ['previousShare', m.previousShare], ['share', m.share]] as const) {
        length(v, want, k);
        if (v.length !== m.c.length) fail(`${k} of length ${v.length} beside c of length ${m.c.length}`);
      }
      if (m.round > 0 && m.c.length === 0) fail(`round ${m.round} and nothing to replay`);
      break;
    }
    case 'batchScores':
      sameStep(m.step);
      length(m.scores, ctx.batchRows, 'scores');
      break;
    case 'sgd':
      sameStep(m.step);
      length(m.gradient, ctx.batchRows, 'gradient');
      if (ctx.n !== undefined) for (const r of m.rows) if (r >= ctx.n) fail(`row ${r} of ${ctx.n}`);
      break;
    case 'ids':
      if (ctx.declaredRows !== undefined && m.points.length !== 32 * ctx.declaredRows[m.set]) fail(`${m.points.length} bytes of ${m.set} points`);
      if (ctx.labelIds !== undefined && m.labelPoints.length !== 32 * ctx.labelIds[m.set]) fail(`${m.labelPoints.length} bytes of ${m.set} label points`);
      break;
    case 'psi':
      if (m.points.length === 0 || m.points.length % 32 !== 0) fail(`${m.points.length} bytes of label points`);
      if (ctx.maxLabelIds !== undefined && m.points.length > 32 * ctx.maxLabelIds) fail(`${m.points.length / 32} label points`);
      break;
    case 'setup':
      if (m.trainRows.length === 0) fail('no training rows');
      if (ctx.fileRows !== undefined) {
        for (const r of m.trainRows) if (r >= ctx.fileRows.train) fail(`train row ${r}`);
        for (const r of m.testRows) if (r >= ctx.fileRows[m.testFrom]) fail(`test row ${r}`);
      }
      if (m.testFrom === 'train') for (const r of m.testRows) if (m.trainRows.includes(r)) fail(`test row ${r} is a training row`);
      break;
    default:
      break;
  }
}

test('fuzz: 100,000 random and mutated messages only ever raise ProtocolError, and what is accepted satisfies the context', () => {
  const rnd = seeded(20240601);
  const thrown = new Map<string, number>();
  const accepted = new Map<string, number>();
  const contexts: ValidationContext[] = [{}, { jobId: JOB }, FUZZ_CTX];
  for (let i = 0; i < 100000; i++) {
    const msg = randomMessage(rnd);
    const bytes = mutate(rnd, encode(msg));
    const c = i % contexts.length;
    const ctx = contexts[c];
    const validators = PARTY_TYPES.has(msg.type)
      ? [validatePartyMessage, validateCoordinatorMessage]
      : [validateCoordinatorMessage, validatePartyMessage];
    let value: unknown;
    try {
      value = decode(bytes);
    } catch (err) {
      if (!(err instanceof ProtocolError)) assert.fail(`#${i} decode threw ${(err as Error)?.constructor?.name}: ${(err as Error)?.message} for ${Buffer.from(bytes).toString('hex')}`);
      assert.equal(err.kind, 'malformed');
      thrown.set('decode:malformed', (thrown.get('decode:malformed') ?? 0) + 1);
      continue;
    }
    for (const validate of validators) {
      let result: PartyMessage | CoordinatorMessage;
      try {
        result = validate(value, ctx);
      } catch (err) {
        if (!(err instanceof ProtocolError))
          assert.fail(`#${i} ${validate.name} threw ${(err as Error)?.constructor?.name}: ${(err as Error)?.message} for ${Buffer.from(bytes).toString('hex')}`);
        assert.ok(KINDS.has(err.kind), `unknown kind ${err.kind}`);
        assert.equal(err.closeCode, CloseCodes[err.kind as CloseKind].code);
        thrown.set(`validate:${err.kind}`, (thrown.get(`validate:${err.kind}`) ?? 0) + 1);
        continue;
      }
      // Whatever passes validation is a well-typed message that fits the session and encodes again.
      assertSatisfiesContext(result, ctx, `#${i} ${Buffer.from(bytes).toString('hex')}`);
      accepted.set(`${c}:${result.type}`, (accepted.get(`${c}:${result.type}`) ?? 0) + 1);
      assert.ok(encode(result).length > 0);
    }
  }
  // The fuzzer must actually exercise both the decoder's and the validator's rejections...
  assert.ok((thrown.get('decode:malformed') ?? 0) > 1000, `decode rejections: ${JSON.stringify([...thrown])}`);
  assert.ok((thrown.get('validate:invalid') ?? 0) > 1000, `validate rejections: ${JSON.stringify([...thrown])}`);
  for (const kind of ['unexpected', 'wrongJob']) assert.ok((thrown.get(`validate:${kind}`) ?? 0) > 100, `validate rejections: ${JSON.stringify([...thrown])}`);
  // ...and accept, under the strict context, every type whose fields it checks against it.
  for (const type of ['share', 'round', 'scores', 'exhausted', 'resume', 'batchScores', 'sgd', 'ids', 'setup'])
    assert.ok((accepted.get(`2:${type}`) ?? 0) >= 10, `${type} accepted under the full context ${accepted.get(`2:${type}`) ?? 0} times: ${JSON.stringify([...accepted])}`);
});
