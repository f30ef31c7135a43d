import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  CloseCodes,
  type CloseKind,
  closeKindOf,
  closeReason,
  ENVELOPE_BYTES,
  POINT_BYTES,
  MAX_CLOSE_REASON_BYTES,
  MAX_PENALTY_SQ,
  MAX_SHARE_MAGNITUDE,
  NONCE_BYTES,
  PROOF_BYTES,
  RETRIABLE_CLOSE_CODES,
  ReservedCloseCodes,
  decode,
  encode,
  firstOutside,
  type Message,
  ProtocolError,
  validateCoordinatorMessage,
  validatePartyMessage,
  type ValidationContext,
} from '../index.js';
import { NO_PRIVACY } from './support.js';

// ---------------------------------------------------------------------------------------
// Fixtures and helpers

type Obj = Record<string, unknown>;
type Validator = (value: unknown, ctx?: ValidationContext) => Message;

const JOB = 'job-1';
const N = 4;
const N_TEST = 3;
const ROUND = 7;
const FILE_ROWS = { train: 10, test: 5 };
const DECLARED = { train: 3, test: 2 };
const LABEL_IDS = { train: 4, test: 1 };

/** A context with every field set, matching the base messages below. */
const CTX: ValidationContext = { jobId: JOB, n: N, nTest: N_TEST, round: ROUND, declaredRows: DECLARED, labelIds: LABEL_IDS, maxLabelIds: 6, fileRows: FILE_ROWS, passive: 1, lookupIds: 2 };
const DIGEST = 'ab'.repeat(32);

/** Fresh valid messages (as plain objects), each accepted by its validator under CTX. */
function base(): Record<string, Obj> {
  return {
    hello: { type: 'hello', protocolVersion: 1, partyId: 'party-A', jobId: JOB, features: 5, trainRows: 10, testRows: 5, proof: new Uint8Array(32).fill(1), noise: true, model: null },
    challenge: { type: 'challenge', protocolVersion: 4, nonce: new Uint8Array(32).fill(9) },
    ids: { type: 'ids', jobId: JOB, set: 'train', points: new Uint8Array(32 * DECLARED.train).fill(9), labelPoints: new Uint8Array(32 * LABEL_IDS.train).fill(7) },
    ready: { type: 'ready', jobId: JOB, privacy: NO_PRIVACY },
    exhausted: { type: 'exhausted', jobId: JOB, round: ROUND, epsilonSpent: 0.75 },
    batchScores: { type: 'batchScores', jobId: JOB, step: 7, scores: new Float64Array([0.5, -1, 2]) },
    sgd: { type: 'sgd', jobId: JOB, step: 7, epoch: 2, lr: 0.5, gradient: new Float64Array([0.1, -0.2, 0.3]), rows: new Uint32Array([3, 0, 2]), full: false },
    share: { type: 'share', jobId: JOB, round: ROUND, share: new Float64Array([1, -0, 1e-300, -1.5]), penaltySq: 2.5, epsilonSpent: 0, solver: { iterations: 7, residual: 3e-13 } },
    scores: { type: 'scores', jobId: JOB, round: ROUND, scores: new Float64Array([0.5, -2, MAX_SHARE_MAGNITUDE]) },
    welcome: { type: 'welcome', protocolVersion: 1, jobId: JOB },
    psi: { type: 'psi', jobId: JOB, set: 'train', total: 5, at: 0, points: new Uint8Array(32 * 5).fill(3) },
    setup: { type: 'setup', jobId: JOB, trainRows: new Uint32Array([9, 0, 4, 2]), testRows: new Uint32Array([4, 1, 0]), lambda: 0.1, loss: 'logistic', rounds: 100, rho: 0.5, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 },
    round: { type: 'round', jobId: JOB, round: ROUND, rho: 1.5, c: new Float64Array([0, 1, 2, 3]) },
    resume: {
      type: 'resume',
      jobId: JOB,
      round: ROUND,
      rho: 1.5,
      c: new Float64Array([0, 1, 2, 3]),
      previousShare: new Float64Array([-1, 0.5, 1e-300, 2]),
      share: new Float64Array([-0, 1, -2.5, 1e300]),
    },
    evaluate: { type: 'evaluate', jobId: JOB, round: ROUND },
    release: { type: 'release', jobId: JOB },
    lookup: { type: 'lookup', jobId: JOB, points: new Uint8Array(32 * 3).fill(5) },
    found: { type: 'found', jobId: JOB, points: new Uint8Array(32 * 2).fill(6) },
    score: { type: 'score', jobId: JOB, rows: new Uint32Array([2, 0, 7]) },
    partial: { type: 'partial', jobId: JOB, scores: new Float64Array(N).fill(-0.5), epsilonSpent: 0.25 },
    released: { type: 'released', jobId: JOB, scores: new Float64Array([0.6, -0.6, 3.5, -1e-300]), testScores: new Float64Array([0.1, 0, -0.6]), epsilonSpent: 2 },
    fit: { type: 'fit', jobId: JOB, parties: ['party-B', 'party-C'], releases: new Float64Array(2 * N).fill(0.25), sigmas: new Float64Array([2.5, 0]) },
    fitted: { type: 'fitted', jobId: JOB, weights: new Float64Array([1.5]), objective: 0.33, localObjective: 0.35, testScores: new Float64Array([1, 2, 3]), localTestScores: new Float64Array([-1, 0, 1]) },
    done: {
      type: 'done',
      jobId: JOB,
      reason: 'converged',
      rounds: ROUND,
      objective: 12.5,
      params: { variant: 'jacobi', rho: 1.5, alpha: 1.6, lambda: 0.1, loss: 'logistic' },
      classes: { negative: '<=50K', positive: '>50K' },
    },
  };
}

const PARTY_TYPES = ['batchScores', 'exhausted', 'hello', 'ids', 'ready', 'share', 'scores', 'released', 'fitted', 'found', 'partial'];
const COORD_TYPES = ['welcome', 'psi', 'setup', 'resume', 'round', 'evaluate', 'done', 'lookup', 'score'];

function validatorFor(type: string): Validator {
  return PARTY_TYPES.includes(type) ? validatePartyMessage : validateCoordinatorMessage;
}

/** Through the wire: the validators see what `decode` produces. */
function wire(value: unknown): unknown {
  return decode(encode(value as Message));
}

/** Assert that `fn` throws a ProtocolError of `kind` (and the matching close code). */
function throwsKind(fn: () => unknown, kind: CloseKind, label: string, message?: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  if (caught === undefined) assert.fail(`${label}: no error thrown, expected ProtocolError '${kind}'`);
  assert.ok(caught instanceof ProtocolError, `${label}: threw ${(caught as Error)?.constructor?.name}: ${(caught as Error)?.message}`);
  assert.equal(caught.kind, kind, `${label}: kind (message: ${caught.message})`);
  assert.equal(caught.closeCode, CloseCodes[kind].code, `${label}: closeCode`);
  if (message) assert.match(caught.message, message, label);
}

/**
 * The base message of `type` with `patch` applied (a value of `undefined` deletes the key),
 * checked both as a plain object and after an encode/decode round trip.
 */
function rejects(type: string, patch: Obj, kind: CloseKind, ctx: ValidationContext = CTX, message?: RegExp): void {
  const msg = { ...base()[type], ...patch };
  for (const [k, v] of Object.entries(patch)) if (v === undefined) delete msg[k];
  const validate = validatorFor(type);
  const label = `${type} ${describePatch(patch)}`;
  throwsKind(() => validate(msg, ctx), kind, `${label} (object)`, message);
  throwsKind(() => validate(wire(msg), ctx), kind, `${label} (wire)`, message);
}

/** The same patch is accepted: boundaries right next to the rejected values. */
function accepts(type: string, patch: Obj, ctx: ValidationContext = CTX): Message {
  const msg = { ...base()[type], ...patch };
  const validate = validatorFor(type);
  validate(msg, ctx);
  return validate(wire(msg), ctx);
}

function describePatch(patch: Obj): string {
  return JSON.stringify(patch, (_k, v) =>
    ArrayBuffer.isView(v) ? `${v.constructor.name}(${(v as Float64Array).length})` : typeof v === 'number' && !Number.isFinite(v) ? String(v) : v,
  );
}

// ---------------------------------------------------------------------------------------
// Baseline: every fixture is valid, so each rejection below is caused by its patch.

test('baseline: every base message validates under the full context, as an object and after the wire', () => {
  for (const [type, msg] of Object.entries(base())) {
    const validate = validatorFor(type);
    for (const value of [msg, wire(msg)]) {
      const out = validate(value, CTX) as unknown as Obj;
      assert.equal(out.type, type);
      assert.deepEqual(Object.keys(out).sort(), Object.keys(msg).sort(), type);
    }
    // And with an empty context.
    assert.equal(validate(msg).type, type);
  }
});

test('prediction messages: the model a hello names, the points of a lookup, the rows of a score, the length of a partial', () => {
  const model = { jobId: 'job-1', digest: DIGEST, rowScaling: true, intercept: false };
  const hello = accepts('hello', { model }) as { model: unknown };
  assert.deepEqual(hello.model, model);
  rejects('hello', { model: { ...model, digest: 'AB'.repeat(32) } }, 'invalid', CTX, /not a valid name/);
  rejects('hello', { model: { ...model, digest: DIGEST.slice(2) } }, 'invalid', CTX, /not a valid name/);
  rejects('hello', { model: { ...model, jobId: 'a b' } }, 'invalid', CTX, /not a valid name/);
  rejects('hello', { model: { ...model, extra: 1 } }, 'invalid', CTX, /unexpected field/);
  rejects('hello', { model: { jobId: 'job-1', digest: DIGEST, rowScaling: true } }, 'invalid', CTX, /missing field 'intercept'/);
  rejects('hello', { model: { ...model, rowScaling: 1 } }, 'invalid', CTX, /true or false/);
  // A lookup has at least one id and at most what the party accepts per request.
  rejects('lookup', { points: new Uint8Array(0) }, 'invalid', CTX, /no ids/);
  rejects('lookup', { points: new Uint8Array(32 * 7) }, 'invalid', CTX, /7 ids, more than this party accepts/);
  accepts('lookup', { points: new Uint8Array(32 * 6) });
  rejects('lookup', { points: new Uint8Array(33) }, 'invalid', CTX, /whole number/);
  // found answers exactly the lookup's ids.
  rejects('found', { points: new Uint8Array(32 * 3) }, 'invalid', CTX, /3 points, the lookup sent 2/);
  // score names rows of the party's file, each once; it may name none (the party holds none of the ids).
  rejects('score', { rows: new Uint32Array([FILE_ROWS.train]) }, 'invalid', CTX, /not a row of a file/);
  rejects('score', { rows: new Uint32Array([1, 1]) }, 'invalid', CTX, /appears twice/);
  accepts('score', { rows: new Uint32Array(0) });
  rejects('partial', { scores: new Float64Array(N + 1) }, 'invalid', CTX, /length/);
  rejects('partial', { scores: new Float64Array(N).fill(2 * MAX_SHARE_MAGNITUDE) }, 'invalid', CTX, /exceeds the bound/);
  rejects('partial', { epsilonSpent: -1 }, 'invalid', CTX, /negative/);
  // An empty psi only where the party scores online.
  rejects('psi', { total: 0, points: new Uint8Array(0) }, 'invalid', CTX, /no train label ids/);
  accepts('psi', { total: 0, points: new Uint8Array(0) }, { ...CTX, emptyPsi: true });
  // done carries the label mapping, or null.
  accepts('done', { classes: null });
  rejects('done', { classes: { negative: 'a' } }, 'invalid', CTX, /missing field 'positive'/);
  rejects('done', { classes: { negative: 'a', positive: 'b'.repeat(257) } }, 'invalid', CTX, /longer than 256/);
});

// ---------------------------------------------------------------------------------------
// Shape of the document

test('top-level values that are not maps are rejected as invalid by both validators', () => {
  const values: [string, unknown][] = [
    ['array', [{ type: 'ready', jobId: JOB, privacy: NO_PRIVACY }]],
    ['empty array', []],
    ['number', 42],
    ['string', 'ready'],
    ['null', null],
    ['boolean', true],
    ['Float64Array', new Float64Array([1, 2])],
    ['Uint8Array', new Uint8Array([0x81])],
    ['Date', new Date(0)],
  ];
  for (const [label, v] of values) {
    for (const validate of [validatePartyMessage, validateCoordinatorMessage]) {
      throwsKind(() => validate(v, CTX), 'invalid', `${validate.name} ${label}`, /expected a map/);
      // On the wire a Date is a timestamp extension, which decode already refuses.
      if (v instanceof Date) throwsKind(() => wire(v), 'malformed', `${label} (wire)`, /extension type 255/);
      else throwsKind(() => validate(wire(v), CTX), 'invalid', `${validate.name} ${label} (wire)`, /expected a map/);
    }
  }
  throwsKind(() => validatePartyMessage(undefined), 'invalid', 'undefined');
  throwsKind(() => validateCoordinatorMessage(undefined), 'invalid', 'undefined');
  // Class instances and Maps are not plain maps either, even with the right keys.
  const asMap = new Map<string, unknown>(Object.entries(base().ready));
  throwsKind(() => validatePartyMessage(asMap, CTX), 'invalid', 'Map');
  class Fake {
    type = 'ready';
    jobId = JOB;
  }
  throwsKind(() => validatePartyMessage(new Fake(), CTX), 'invalid', 'class instance');
});

test('unknown, missing or non-string type is invalid', () => {
  for (const validate of [validatePartyMessage, validateCoordinatorMessage]) {
    for (const type of ['bogus', '', 'Hello', 'SHARE', 'hello ', '__proto__', 'toString']) {
      throwsKind(() => validate({ type, jobId: JOB }, CTX), 'invalid', `${validate.name} type '${type}'`);
    }
    for (const type of [42, null, true, ['hello'], { t: 1 }]) {
      throwsKind(() => validate(wire({ type, jobId: JOB }), CTX), 'invalid', `${validate.name} type ${JSON.stringify(type)}`);
    }
    throwsKind(() => validate({ jobId: JOB }, CTX), 'invalid', `${validate.name} no type`);
    throwsKind(() => validate({}, CTX), 'invalid', `${validate.name} empty map`);
  }
});

test('a coordinator type given to validatePartyMessage, and a party type to validateCoordinatorMessage, is invalid', () => {
  const b = base();
  for (const type of COORD_TYPES) {
    assert.equal(validateCoordinatorMessage(b[type], CTX).type, type); // valid on the right side
    throwsKind(() => validatePartyMessage(b[type], CTX), 'invalid', `party <- ${type}`, /not a message a party sends/);
    throwsKind(() => validatePartyMessage(wire(b[type]), {}), 'invalid', `party <- ${type} (wire, no ctx)`);
  }
  for (const type of PARTY_TYPES) {
    assert.equal(validatePartyMessage(b[type], CTX).type, type);
    throwsKind(() => validateCoordinatorMessage(b[type], CTX), 'invalid', `coordinator <- ${type}`, /not a message the coordinator sends/);
    throwsKind(() => validateCoordinatorMessage(wire(b[type]), {}), 'invalid', `coordinator <- ${type} (wire, no ctx)`);
  }
});

test('every missing field of every message type is invalid', () => {
  for (const [type, msg] of Object.entries(base())) {
    for (const key of Object.keys(msg)) {
      if (key === 'type') continue;
      rejects(type, { [key]: undefined }, 'invalid', CTX, new RegExp(`missing field '${key}'`));
      rejects(type, { [key]: undefined }, 'invalid', {});
    }
  }
});

test('an extra field in any message type is invalid', () => {
  for (const type of Object.keys(base())) {
    for (const extra of [{ extra: 1 }, { Type: type }, { points2: new Uint8Array(32) }, { proto: null }]) {
      rejects(type, extra, 'invalid', CTX, /unexpected field/);
    }
  }
});

// ---------------------------------------------------------------------------------------
// Field types

test('a string where a number is expected is invalid', () => {
  const cases: [string, string][] = [
    ['hello', 'protocolVersion'],
    ['hello', 'features'],
    ['hello', 'trainRows'],
    ['hello', 'testRows'],
    ['share', 'round'],
    ['share', 'penaltySq'],
    ['scores', 'round'],
    ['welcome', 'protocolVersion'],
    ['setup', 'lambda'],
    ['round', 'round'],
    ['round', 'rho'],
    ['resume', 'round'],
    ['resume', 'rho'],
    ['evaluate', 'round'],
    ['done', 'rounds'],
    ['done', 'objective'],
  ];
  for (const [type, key] of cases) {
    const good = String(base()[type][key]);
    rejects(type, { [key]: good }, 'invalid', CTX);
    rejects(type, { [key]: good }, 'invalid', {});
  }
});

test('numbers and other values where a string is expected are invalid', () => {
  rejects('hello', { partyId: 5 }, 'invalid');
  rejects('hello', { jobId: 5 }, 'invalid');
  rejects('ready', { jobId: 1 }, 'invalid');
  rejects('ready', { jobId: null }, 'invalid'); // only hello allows a null job
  rejects('ids', { set: 0 }, 'invalid');
  rejects('setup', { loss: ['logistic'] }, 'invalid');
  rejects('done', { reason: true }, 'invalid');
});

test('non-integer, negative or unsafe counts are invalid', () => {
  rejects('hello', { features: 1.5 }, 'invalid');
  rejects('hello', { features: 0 }, 'invalid');
  rejects('hello', { trainRows: 0 }, 'invalid');
  rejects('hello', { testRows: -1 }, 'invalid');
  rejects('hello', { protocolVersion: 2 ** 60 }, 'invalid');
  rejects('share', { round: 0 }, 'invalid', { ...CTX, round: undefined });
  rejects('share', { round: 7.5 }, 'invalid', { ...CTX, round: undefined });
  rejects('done', { rounds: -3 }, 'invalid');
  rejects('evaluate', { round: NaN }, 'invalid');
  // Boundaries that are fine.
  accepts('hello', { testRows: 0, features: 1, trainRows: 1 });
  accepts('done', { rounds: 0 });
});

test('vectors that are number[] or another typed array instead of Float64Array are invalid', () => {
  const wrong: [string, unknown][] = [
    ['number[]', [1, 2, 3, 4]],
    ['Float32Array', new Float32Array(4)],
    ['Int32Array', new Int32Array(4)],
    ['BigInt64Array', new BigInt64Array(4)],
    ['Uint8Array of 32 bytes', new Uint8Array(32)],
    ['string', '1,2,3,4'],
    ['null', null],
  ];
  for (const [label, v] of wrong) {
    rejects('share', { share: v }, 'invalid', CTX, /expected a Float64Array/);
    rejects('share', { share: v }, 'invalid', {}, /expected a Float64Array/);
    rejects('round', { c: v }, 'invalid', CTX, /expected a Float64Array/);
    for (const key of ['c', 'previousShare', 'share']) rejects('resume', { [key]: v }, 'invalid', CTX, /expected a Float64Array/);
    rejects('scores', { scores: v }, 'invalid', { ...CTX, nTest: undefined }, /expected a Float64Array/);
    assert.ok(label);
  }
});

test('row indices, hashes and keys of the wrong type are invalid', () => {
  for (const v of [[0, 1, 2], new Int32Array([0, 1]), new Float64Array([0, 1]), new Uint16Array([0, 1]), 'abc']) {
    rejects('setup', { trainRows: v }, 'invalid', CTX, /expected a Uint32Array/);
    rejects('setup', { testRows: v }, 'invalid', {}, /expected a Uint32Array/);
  }
  for (const v of [Array.from({ length: 48 }, () => 0), 'x'.repeat(48), new Float64Array(6), new Uint32Array(12)]) {
    rejects('ids', { points: v }, 'invalid', CTX, /expected bytes/);
    rejects('ids', { labelPoints: v }, 'invalid', CTX, /expected bytes/);
    rejects('psi', { points: v }, 'invalid', CTX, /expected bytes/);
  }
  for (const v of [Array.from({ length: 32 }, () => 0), 'k'.repeat(32), new Float64Array(4), new Uint32Array(8)]) {
  }
});

// ---------------------------------------------------------------------------------------
// Non-finite and out-of-range numbers

test('NaN, Infinity and -Infinity anywhere inside a vector are invalid', () => {
  for (const bad of [NaN, Infinity, -Infinity]) {
    for (const pos of [0, 2, N - 1]) {
      const v = new Float64Array([1, 2, 3, 4]);
      v[pos] = bad;
      rejects('share', { share: v }, 'invalid', CTX, new RegExp(`share\\.share\\[${pos}\\]`));
      rejects('share', { share: v }, 'invalid', {});
      rejects('round', { c: v }, 'invalid', CTX, new RegExp(`round\\.c\\[${pos}\\]`));
      for (const key of ['c', 'previousShare', 'share']) rejects('resume', { [key]: v }, 'invalid', {}, new RegExp(`resume\\.${key}\\[${pos}\\]`));
    }
    const s = new Float64Array(N_TEST);
    s[N_TEST - 1] = bad;
    rejects('scores', { scores: s }, 'invalid', CTX);
    // Also as the last of a long vector.
    const long = new Float64Array(70000);
    long[69999] = bad;
    rejects('share', { share: long }, 'invalid', { ...CTX, n: 70000 }, /\[69999\]/);
  }
});

test('NaN, Infinity and -Infinity as scalars are invalid', () => {
  for (const bad of [NaN, Infinity, -Infinity]) {
    rejects('share', { penaltySq: bad }, 'invalid');
    rejects('round', { rho: bad }, 'invalid');
    rejects('setup', { lambda: bad }, 'invalid');
    rejects('done', { objective: bad }, 'invalid');
    rejects('done', { params: { ...base().done.params as Obj, lambda: bad } }, 'invalid');
    rejects('done', { params: { ...base().done.params as Obj, rho: bad } }, 'invalid');
    rejects('done', { params: { ...base().done.params as Obj, alpha: bad } }, 'invalid');
  }
});

test('a negative penaltySq or lambda is invalid; zero is fine', () => {
  for (const neg of [-1, -1e-300, -5e-324, -1e300]) {
    rejects('share', { penaltySq: neg }, 'invalid', CTX, /negative/);
    rejects('setup', { lambda: neg }, 'invalid', CTX, /negative/);
  }
  accepts('share', { penaltySq: 0 });
  accepts('share', { penaltySq: 5e-324 });
  accepts('setup', { lambda: 0 });
});

test('setup.labelFlip: a flip probability in [0, 0.5), only with the logistic loss and lambda > 0', () => {
  for (const bad of [-1e-300, -0.1, 0.5, 0.75, 1, 2]) rejects('setup', { labelFlip: bad }, 'invalid', CTX, /setup\.labelFlip: .* is not a flip probability in \[0, 0\.5\)/);
  for (const bad of [NaN, Infinity, -Infinity]) rejects('setup', { labelFlip: bad }, 'invalid', CTX, /setup\.labelFlip: expected a finite number/);
  rejects('setup', { labelFlip: '0.1' }, 'invalid', CTX, /setup\.labelFlip: expected a finite number, got string/);
  rejects('setup', { labelFlip: undefined }, 'invalid', CTX, /setup: missing field 'labelFlip'/);
  rejects('setup', { labelFlip: 0.2, loss: 'squared' }, 'invalid', CTX, /flipped labels with the squared loss/);
  rejects('setup', { labelFlip: 0.2, lambda: 0 }, 'invalid', CTX, /flipped labels with lambda 0/);
  for (const ok of [0, 5e-324, 0.2689414213699951, 0.49999999999999994]) assert.equal((accepts('setup', { labelFlip: ok }) as { labelFlip: number }).labelFlip, ok);
  accepts('setup', { labelFlip: 0, loss: 'squared', lambda: 0 });
});

test('rho <= 0 is invalid in round, alpha <= 0 and rho < 0 in done.params (sgd reports rho 0); tiny positive values are fine', () => {
  for (const bad of [0, -0, -1, -5e-324]) {
    rejects('round', { rho: bad }, 'invalid', CTX, /positive/);
    if (bad < 0) rejects('done', { params: { ...base().done.params as Obj, rho: bad } }, 'invalid');
    rejects('done', { params: { ...base().done.params as Obj, alpha: bad } }, 'invalid');
  }
  accepts('done', { params: { ...base().done.params as Obj, variant: 'sgd', rho: 0 } });
  accepts('round', { rho: 5e-324 });
  accepts('round', { rho: 1e300 });
});

// ---------------------------------------------------------------------------------------
// Checks against the context

test('a vector length different from ctx.n / ctx.nTest is invalid', () => {
  for (const len of [N - 1, N + 1, 70000]) {
    rejects('share', { share: new Float64Array(len) }, 'invalid', CTX, new RegExp(`length ${len}, expected ${N}`));
    rejects('round', { c: new Float64Array(len) }, 'invalid', CTX, /length/);
  }
  // Empty, a share's or round's vector came in parts before it: the receiver's assembler checks them (parts.test.ts).
  accepts('share', { share: new Float64Array(0) });
  accepts('round', { c: new Float64Array(0) });
  for (const len of [0, N_TEST - 1, N_TEST + 1]) {
    rejects('scores', { scores: new Float64Array(len) }, 'invalid', CTX, new RegExp(`expected ${N_TEST}`));
  }
  // The share length is checked against n, not nTest (and the other way round).
  rejects('share', { share: new Float64Array(N_TEST) }, 'invalid');
  rejects('scores', { scores: new Float64Array(N) }, 'invalid');
  // Without n the length is free; with n = 0, an empty vector is right.
  accepts('share', { share: new Float64Array(11) }, { ...CTX, n: undefined });
  accepts('share', { share: new Float64Array(0) }, { ...CTX, n: 0 });
  accepts('scores', { scores: new Float64Array(0) }, { ...CTX, nTest: 0 });
});

test("a jobId that differs from ctx.jobId is 'wrongJob' for every type that carries one", () => {
  for (const type of ['ids', 'ready', 'share', 'scores', 'welcome', 'psi', 'setup', 'resume', 'round', 'evaluate', 'done']) {
    for (const other of ['job-2', 'Job-1', 'job-1x']) {
      rejects(type, { jobId: other }, 'wrongJob', CTX, new RegExp(`'${other}'`));
    }
    // Without ctx.jobId any valid name is accepted.
    accepts(type, { jobId: 'job-2' }, { ...CTX, jobId: undefined });
  }
});

test("a share, scores or round for another round than ctx.round is 'unexpected' (stale and early)", () => {
  for (const type of ['share', 'scores', 'round']) {
    rejects(type, { round: ROUND - 1 }, 'unexpected', CTX, /stale/);
    rejects(type, { round: 1 }, 'unexpected', CTX, /stale/);
    rejects(type, { round: ROUND + 1 }, 'unexpected', CTX, /early/);
    rejects(type, { round: 2 ** 40 }, 'unexpected', CTX, /early/);
    accepts(type, { round: ROUND + 1 }, { ...CTX, round: undefined });
  }
});

test('invalid names for partyId and jobId are invalid (not wrongJob)', () => {
  const bad = ['a b', 'x'.repeat(100), 'y'.repeat(65), '', ' lead', '-dash', '.dot', '_under', 'tab\t', 'new\nline', 'é', 'a/b', 'a:b'];
  for (const name of bad) {
    rejects('hello', { partyId: name }, 'invalid', CTX);
    rejects('hello', { jobId: name }, 'invalid', CTX);
    rejects('share', { jobId: name }, 'invalid', CTX);
    rejects('welcome', { jobId: name }, 'invalid', {});
  }
  accepts('hello', { partyId: 'y'.repeat(64) });
  accepts('hello', { partyId: '0', jobId: null });
  accepts('hello', { partyId: 'A.b_c-9' });
});

test('ids.points, ids.labelPoints and psi.points whose length is not a whole number of 32-byte points are invalid', () => {
  for (const len of [1, 16, 31, 33, 32 * DECLARED.train + 1, 32 * DECLARED.train - 1]) {
    for (const ctx of [CTX, {}]) {
      rejects('ids', { points: new Uint8Array(len) }, 'invalid', ctx, /ids\.points: \d+ bytes is not a whole number of 32-byte points/);
      rejects('ids', { labelPoints: new Uint8Array(len) }, 'invalid', ctx, /ids\.labelPoints: \d+ bytes is not a whole number/);
      rejects('psi', { points: new Uint8Array(len) }, 'invalid', ctx, /psi\.points: \d+ bytes is not a whole number/);
    }
  }
  accepts('ids', { points: new Uint8Array(32 * 5), labelPoints: new Uint8Array(32 * 9) }, {});
  accepts('ids', { points: new Uint8Array(0), labelPoints: new Uint8Array(0) }, {});
  rejects('psi', { total: 0, points: new Uint8Array(0) }, 'invalid', {}, /psi\.points: no train label ids/);
});

test('ids with a row count other than the hello declared, or label points other than the coordinator sent, are invalid, per set', () => {
  for (const rows of [0, DECLARED.train - 1, DECLARED.train + 1]) {
    rejects('ids', { set: 'train', points: new Uint8Array(32 * rows) }, 'invalid', CTX, /the hello declared 3/);
  }
  for (const n of [0, LABEL_IDS.train - 1, LABEL_IDS.train + 1]) {
    rejects('ids', { set: 'train', labelPoints: new Uint8Array(32 * n) }, 'invalid', CTX, /the coordinator sent 4/);
  }
  // The test set is compared with declaredRows.test and labelIds.test, not .train.
  rejects('ids', { set: 'test', points: new Uint8Array(32 * DECLARED.train), labelPoints: new Uint8Array(32 * LABEL_IDS.test) }, 'invalid', CTX, /the hello declared 2/);
  rejects('ids', { set: 'test', points: new Uint8Array(32 * DECLARED.test), labelPoints: new Uint8Array(32 * LABEL_IDS.train) }, 'invalid', CTX, /the coordinator sent 1/);
  accepts('ids', { set: 'test', points: new Uint8Array(32 * DECLARED.test), labelPoints: new Uint8Array(32 * LABEL_IDS.test) });
  rejects('ids', { set: 'validation' }, 'invalid');
  // A party caps the label set it blinds (the coordinator's set is its input to the intersection).
  rejects('psi', { total: 7, points: new Uint8Array(32 * 7) }, 'invalid', CTX, /psi\.total: 7 train label ids, more than this party accepts \(6/);
  // Counted by the set's total, not by one message's points.
  rejects('psi', { total: 7, at: 6, points: new Uint8Array(32) }, 'invalid', CTX, /psi\.total: 7 train label ids/);
  accepts('psi', { total: 6, points: new Uint8Array(32 * 6) });
  accepts('psi', { total: 6, at: 4, points: new Uint8Array(32 * 2) });
});

test('setup row indices out of range, duplicated, or an empty trainRows are invalid', () => {
  // Index equal to the file's row count is one too far.
  rejects('setup', { trainRows: new Uint32Array([0, FILE_ROWS.train]) }, 'invalid', CTX, /not a row of a file with 10 rows/);
  rejects('setup', { trainRows: new Uint32Array([0xffffffff]) }, 'invalid', CTX);
  rejects('setup', { testRows: new Uint32Array([FILE_ROWS.test]) }, 'invalid', CTX, /with 5 rows/);
  rejects('setup', { testRows: new Uint32Array([0]) }, 'invalid', { ...CTX, fileRows: { train: 10, test: 0 } });
  accepts('setup', { trainRows: new Uint32Array([FILE_ROWS.train - 1]), testRows: new Uint32Array([FILE_ROWS.test - 1]) });
  // Duplicates, adjacent or not.
  rejects('setup', { trainRows: new Uint32Array([3, 3]) }, 'invalid', CTX, /row 3 appears twice/);
  rejects('setup', { trainRows: new Uint32Array([1, 5, 2, 9, 5]) }, 'invalid', CTX, /row 5 appears twice/);
  rejects('setup', { testRows: new Uint32Array([0, 4, 0]) }, 'invalid', CTX, /appears twice/);
  // No training rows at all, with and without a context.
  rejects('setup', { trainRows: new Uint32Array(0) }, 'invalid', CTX, /no training rows/);
  rejects('setup', { trainRows: new Uint32Array(0) }, 'invalid', {}, /no training rows/);
  accepts('setup', { testRows: new Uint32Array(0) });
  rejects('setup', { loss: 'hinge' }, 'invalid');
});

test('done.params with a missing key, an extra key or of the wrong shape is invalid', () => {
  const params = base().done.params as Obj;
  for (const key of Object.keys(params)) {
    const p = { ...params };
    delete p[key];
    rejects('done', { params: p }, 'invalid', CTX, new RegExp(`missing field '${key}'`));
  }
  for (const extra of [{ beta: 1 }, { type: 'done' }, { Rho: 1 }]) {
    rejects('done', { params: { ...params, ...extra } }, 'invalid', CTX, /unexpected field/);
  }
  for (const shape of [null, [], [1, 2, 3, 4, 5], 'params', 3, new Float64Array(5)]) {
    rejects('done', { params: shape }, 'invalid', CTX, /expected a map/);
  }
  rejects('done', { params: { ...params, loss: 'hinge' } }, 'invalid');
  rejects('done', { params: { ...params, variant: 3 } }, 'invalid');
  rejects('done', { reason: 'crashed' }, 'invalid');
});

test('share.solver is null or exactly {iterations, residual}: an integer >= 0 and a finite number >= 0', () => {
  assert.equal(validatePartyMessage(wire({ ...base().share, solver: null }), CTX).type, 'share');
  for (const [solver, message] of [
    [{ iterations: -1, residual: 0 }, /share\.solver\.iterations: expected an integer >= 0, got -1/],
    [{ iterations: 1.5, residual: 0 }, /share\.solver\.iterations/],
    [{ iterations: 3, residual: -1e-13 }, /share\.solver\.residual: -1e-13 is negative/],
    [{ iterations: 3, residual: Number.NaN }, /share\.solver\.residual: expected a finite number/],
    [{ iterations: 3 }, /share\.solver: missing field 'residual'/],
    [{ iterations: 3, residual: 0, extra: 1 }, /share\.solver: unexpected field 'extra'/],
    [[3, 0], /expected a map, got an array/],
    [7, /expected a map/],
  ] as const)
    rejects('share', { solver }, 'invalid', CTX, message);
  rejects('share', { solver: undefined }, 'invalid', CTX, /missing field 'solver'/);
});

test('validators return exactly the message fields with the checked values', () => {
  const out = validatePartyMessage(wire(base().share), CTX);
  assert.ok(out.type === 'share');
  assert.deepEqual(Object.keys(out).sort(), ['epsilonSpent', 'jobId', 'penaltySq', 'round', 'share', 'solver', 'type']);
  assert.deepEqual(out.solver, { iterations: 7, residual: 3e-13 });
  assert.equal(out.round, ROUND);
  assert.equal(out.penaltySq, 2.5);
  assert.ok(out.share instanceof Float64Array && Object.is(out.share[1], -0));
});

test(
  'a field whose decoded value has a non-string constructor.name is rejected with a ProtocolError',
  () => {
    // A perfectly decodable document: {type: {constructor: {name: {toString: 1}}}}.
    const evil = wire({ type: { constructor: { name: { toString: 1 } } } });
    for (const validate of [validatePartyMessage, validateCoordinatorMessage]) {
      throwsKind(() => validate(evil), 'invalid', `${validate.name} type with odd constructor`);
    }
    const evilJob = wire({ ...base().ready, jobId: { constructor: { name: { toString: 1 } } } });
    throwsKind(() => validatePartyMessage(evilJob), 'invalid', 'ready.jobId with odd constructor');
  },
);

// ---------------------------------------------------------------------------------------
// ProtocolError and close codes

test('ProtocolError.closeCode is CloseCodes[kind].code, and the error identifies itself', () => {
  const kinds: CloseKind[] = ['malformed', 'invalid', 'unexpected', 'wrongJob', 'versionMismatch', 'internal', 'done'];
  for (const kind of kinds) {
    const err = new ProtocolError(kind, 'detail');
    assert.equal(err.closeCode, CloseCodes[kind].code, kind);
    assert.equal(err.kind, kind);
    assert.equal(err.message, 'detail');
    assert.equal(err.name, 'ProtocolError');
    assert.equal(err.code, `ERR_PROTOCOL_${kind.toUpperCase()}`);
    assert.ok(err instanceof Error);
  }
  assert.equal(new ProtocolError('malformed', '').closeCode, 4002);
  assert.equal(new ProtocolError('invalid', '').closeCode, 4003);
  assert.equal(new ProtocolError('unexpected', '').closeCode, 4004);
  assert.equal(new ProtocolError('wrongJob', '').closeCode, 4007);
  // Errors raised by the validators carry the same mapping.
  throwsKind(() => validatePartyMessage(base().ready, { jobId: 'other' }), 'wrongJob', 'wrongJob from validator');
});

test('close codes are distinct, in the right ranges, and closeKindOf maps each back', () => {
  const kinds = Object.keys(CloseCodes) as CloseKind[];
  assert.ok(kinds.length >= 10);
  const codes = kinds.map((k) => CloseCodes[k].code);
  assert.equal(new Set(codes).size, codes.length, `duplicate close codes: ${codes.join(', ')}`);
  for (const kind of kinds) {
    const { code, reason } = CloseCodes[kind];
    assert.ok(Number.isInteger(code));
    // RFC 6455 section 7.4.1 defines 1000, 1001 and 1009; 4000-4999 is the applications' range.
    const standard: Partial<Record<CloseKind, number>> = { done: 1000, goingAway: 1001, tooBig: 1009 };
    assert.ok(kind in standard ? code === standard[kind] : code >= 4000 && code <= 4999, `${kind}: ${code}`);
    assert.ok(reason.length > 0 && Buffer.byteLength(reason) <= 123);
    assert.equal(closeKindOf(code), kind);
  }
  for (const code of [0, 1005, 1006, 4000, 4999, 5000, -1, 4002.5]) assert.equal(closeKindOf(code), undefined, String(code));
});

test('a party retries after going away (1001), no status (1005) and a dropped connection (1006), and after nothing it is sent on purpose', () => {
  assert.deepEqual([...RETRIABLE_CLOSE_CODES].sort(), [1001, 1005, 1006]);
  assert.equal(CloseCodes.goingAway.code, 1001);
  assert.deepEqual(Object.values(ReservedCloseCodes).map((c) => c.code), [1005, 1006]);
  // The reserved codes are never sent, so they are not in the table of codes that are.
  for (const { code } of Object.values(ReservedCloseCodes)) assert.equal(closeKindOf(code), undefined);
  for (const kind of Object.keys(CloseCodes) as CloseKind[])
    assert.equal(RETRIABLE_CLOSE_CODES.has(CloseCodes[kind].code), kind === 'goingAway', kind);
});

test('the sizes PROTOCOL.md gives: 32-byte nonce, proof and PSI points, 123-byte close reasons', () => {
  assert.equal(NONCE_BYTES, 32);
  assert.equal(PROOF_BYTES, 32);
  assert.equal(POINT_BYTES, 32);
  assert.equal(MAX_CLOSE_REASON_BYTES, 125 - 2);
  assert.ok(Number.isInteger(ENVELOPE_BYTES) && ENVELOPE_BYTES >= 1024);
});

test('closeReason leaves short reasons unchanged', () => {
  assert.equal(closeReason('invalid'), 'invalid message');
  assert.equal(closeReason('invalid', ''), 'invalid message');
  assert.equal(closeReason('wrongJob', 'job x'), 'wrong job id: job x');
  assert.equal(closeReason('aborted', 'é€😀'), 'job aborted: é€😀');
  // Exactly 123 bytes fits; 124 does not.
  const prefix = 'invalid message: ';
  const fits = 'a'.repeat(123 - Buffer.byteLength(prefix));
  assert.equal(closeReason('invalid', fits), prefix + fits);
  assert.equal(Buffer.byteLength(closeReason('invalid', fits)), 123);
  assert.notEqual(closeReason('invalid', fits + 'a'), prefix + fits + 'a');
  const fitsMulti = '€'.repeat(35) + 'a'.repeat(123 - Buffer.byteLength(prefix) - 105);
  assert.equal(closeReason('invalid', fitsMulti), prefix + fitsMulti);
});

test('closeReason truncates long details to at most 123 bytes of UTF-8 without breaking characters', () => {
  const chars = ['a', 'é', '€', '😀', 'aé', 'a€', 'é€😀'];
  for (const kind of Object.keys(CloseCodes) as CloseKind[]) {
    for (const ch of chars) {
      for (let count = 1; count <= 130; count++) {
        const detail = ch.repeat(count);
        const full = `${CloseCodes[kind].reason}: ${detail}`;
        const r = closeReason(kind, detail);
        const label = `${kind} ${JSON.stringify(ch)} x ${count}`;
        assert.ok(Buffer.byteLength(r, 'utf8') <= 123, `${label}: ${Buffer.byteLength(r, 'utf8')} bytes`);
        if (Buffer.byteLength(full) <= 123) {
          assert.equal(r, full, label);
          continue;
        }
        assert.ok(r.endsWith('...'), `${label}: ${r}`);
        const kept = r.slice(0, -3);
        assert.ok(full.startsWith(kept), `${label}: not a prefix`);
        assert.ok(!kept.includes('\uFFFD'), `${label}: replacement character`);
        // At most a partial character (<= 3 bytes) is lost at the 120-byte cut.
        assert.ok(Buffer.byteLength(kept) >= 117 && Buffer.byteLength(kept) <= 120, `${label}: kept ${Buffer.byteLength(kept)} bytes`);
        // Round-trips through UTF-8 unchanged (no lone surrogate at the cut).
        assert.equal(Buffer.from(r, 'utf8').toString('utf8'), r, label);
      }
    }
  }
});


// ---------------------------------------------------------------------------------------
// Version 2: privacy fields

const NOISY = { mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, rounds: 10, sigma: 3.5, sensitivity: 1, accountant: 'exact', seeded: false };

test('ready.privacy: a noisy mechanism needs its budget, accountant and sigma; fields are checked', () => {
  accepts('ready', { privacy: NOISY });
  accepts('ready', { privacy: { ...NOISY, mechanism: 'paper', accountant: 'advanced', seeded: true } });
  rejects('ready', { privacy: { ...NOISY, epsilon: null } }, 'invalid');
  rejects('ready', { privacy: { ...NOISY, sigma: 0 } }, 'invalid');
  rejects('ready', { privacy: { ...NOISY, accountant: null } }, 'invalid');
  rejects('ready', { privacy: { ...NOISY, accountant: 'moments' } }, 'invalid');
  rejects('ready', { privacy: { ...NOISY, mechanism: 'laplace' } }, 'invalid');
  rejects('ready', { privacy: { ...NOISY, seeded: 'no' } }, 'invalid');
  rejects('ready', { privacy: { ...NOISY, rounds: 0 } }, 'invalid');
  rejects('ready', { privacy: { ...NOISY, sigma: Number.NaN } }, 'invalid');
  rejects('ready', { privacy: { ...NOISY, extra: 1 } }, 'invalid');
  rejects('ready', { privacy: undefined }, 'invalid');
});

test('share.epsilonSpent and exhausted are validated like every other field', () => {
  rejects('share', { epsilonSpent: -0.1 }, 'invalid', CTX, /negative/);
  rejects('share', { epsilonSpent: Number.POSITIVE_INFINITY }, 'invalid');
  rejects('share', { epsilonSpent: undefined }, 'invalid');
  accepts('exhausted', {});
  rejects('exhausted', { round: ROUND + 1 }, 'unexpected');
  rejects('exhausted', { epsilonSpent: -1 }, 'invalid');
  rejects('exhausted', { jobId: 'other-job' }, 'wrongJob');
  rejects('setup', { rounds: 0 }, 'invalid');
  rejects('setup', { rho: 0 }, 'invalid');
  rejects('setup', { parties: undefined }, 'invalid');
  rejects('done', { reason: 'tired' }, 'invalid');
  accepts('done', { reason: 'budget' });
});


test('firstOutside finds the first value that is not finite or beyond the bound, at any place, as a scan of each value does', () => {
  const naive = (v: Float64Array, bound: number) => v.findIndex((x) => !(Number.isFinite(x) && Math.abs(x) <= bound));
  for (const bound of [Infinity, MAX_SHARE_MAGNITUDE, 3]) {
    for (const n of [0, 1, 3, 4, 5, 7, 8, 13, 70001]) {
      const v = Float64Array.from({ length: n }, (_, i) => ((i * 7919) % 13) / 13 - 0.5);
      if (n > 2) v[2] = -0;
      if (n > 1 && bound < Infinity) v[1] = -bound;
      assert.equal(firstOutside(v, bound), -1, `bound ${bound}, n ${n}: all within`);
      // Non-finite values, and (with a finite bound) the largest double and one just beyond the bound.
      const beyond = bound < Infinity ? [1.7e308, -bound * (1 + 2 * Number.EPSILON)] : [];
      for (const bad of [NaN, Infinity, -Infinity, ...beyond]) {
        for (const pos of new Set([0, 1, 2, 3, 4, Math.max(0, n - 5), n - 1].filter((p) => p >= 0 && p < n))) {
          const w = v.slice();
          w[pos] = bad;
          // A second offender after the first does not change the answer.
          if (pos + 6 < n) w[pos + 6] = NaN;
          assert.equal(firstOutside(w, bound), naive(w, bound), `bound ${bound}, n ${n}, ${bad} at ${pos}`);
          assert.equal(firstOutside(w, bound), pos);
        }
      }
    }
  }
});

test('shares, scores and batch scores are bounded by MAX_SHARE_MAGNITUDE, penaltySq by MAX_PENALTY_SQ (finite is not enough)', () => {
  const ctx = { ...CTX, step: 7, batchRows: 3 };
  for (const sign of [1, -1]) {
    for (const pos of [0, N - 1]) {
      const at = new Float64Array(N);
      at[pos] = sign * MAX_SHARE_MAGNITUDE;
      accepts('share', { share: at });
      // The next double beyond the bound, and the largest finite double (what a hostile party sends).
      for (const beyond of [MAX_SHARE_MAGNITUDE * (1 + Number.EPSILON), Number.MAX_VALUE, 1.7e308]) {
        const v = new Float64Array(N);
        v[pos] = sign * beyond;
        rejects('share', { share: v }, 'invalid', CTX, new RegExp(`share\\.share\\[${pos}\\] = .* exceeds the bound 1e\\+100`));
      }
    }
    accepts('scores', { scores: new Float64Array(N_TEST).fill(sign * MAX_SHARE_MAGNITUDE) });
    rejects('scores', { scores: new Float64Array(N_TEST).fill(sign * 1e101) }, 'invalid', CTX, /exceeds the bound/);
    accepts('batchScores', { scores: new Float64Array(3).fill(sign * MAX_SHARE_MAGNITUDE) }, ctx);
    rejects('batchScores', { scores: new Float64Array(3).fill(sign * 1e101) }, 'invalid', ctx, /exceeds the bound/);
  }
  accepts('share', { penaltySq: MAX_PENALTY_SQ });
  rejects('share', { penaltySq: MAX_PENALTY_SQ * 2 }, 'invalid', CTX, /penaltySq: .* exceeds the bound/);
  rejects('share', { penaltySq: Number.MAX_VALUE }, 'invalid', CTX, /exceeds the bound/);
  // What the coordinator sends is not bounded this way (it checks its own values before sending).
  accepts('round', { c: new Float64Array(N).fill(1e300) });
});

test('sgd and batchScores: step, batch length and row bounds are checked', () => {
  const ctx = { ...CTX, step: 7, batchRows: 3 };
  accepts('sgd', {}, ctx);
  accepts('batchScores', {}, ctx);
  rejects('sgd', { step: 8 }, 'unexpected', ctx);
  rejects('batchScores', { step: 6 }, 'unexpected', ctx);
  rejects('batchScores', { scores: new Float64Array(4) }, 'invalid', ctx);
  rejects('sgd', { gradient: new Float64Array(2) }, 'invalid', ctx);
  rejects('sgd', { rows: new Uint32Array([N]) }, 'invalid', ctx);
  rejects('sgd', { rows: new Uint32Array([1, 1]) }, 'invalid', ctx);
  rejects('sgd', { lr: 0 }, 'invalid', ctx);
  rejects('sgd', { full: 1 }, 'invalid', ctx);
  rejects('setup', { algorithm: 'adam' }, 'invalid');
});


test('challenge and hello.proof: 32 bytes or null', () => {
  accepts('challenge', {});
  rejects('challenge', { nonce: new Uint8Array(31) }, 'invalid');
  rejects('challenge', { nonce: undefined }, 'invalid');
  accepts('hello', { proof: null });
  rejects('hello', { proof: new Uint8Array(16) }, 'invalid');
  rejects('hello', { proof: 'secret' }, 'invalid');
  rejects('hello', { proof: undefined }, 'invalid');
});


// ---------------------------------------------------------------------------------------
// Version 6: resume carries what the party needs to replay round k

test('resume: round k >= 1 needs c, previousShare and share of length N; round 0 needs them empty', () => {
  const empty = { c: new Float64Array(0), previousShare: new Float64Array(0), share: new Float64Array(0) };
  const out = accepts('resume', { round: 0, ...empty });
  assert.ok(out.type === 'resume' && out.round === 0 && out.c.length === 0 && out.rho === 1.5);
  accepts('resume', { round: 0, ...empty }, {});
  accepts('resume', { round: 1 });
  for (const key of ['c', 'previousShare', 'share']) {
    // Round 0 has nothing to replay: any vector is an error, with or without N known.
    rejects('resume', { round: 0, ...empty, [key]: new Float64Array(N) }, 'invalid', CTX, new RegExp(`resume\\.${key}: length ${N}, expected 0`));
    rejects('resume', { round: 0, ...empty, [key]: new Float64Array(1) }, 'invalid', {}, new RegExp(`resume\\.${key}: length 1, expected 0`));
    // Round >= 1: exactly N, and never empty.
    for (const len of [0, N - 1, N + 1]) rejects('resume', { [key]: new Float64Array(len) }, 'invalid', CTX, new RegExp(`resume\\.${key}: length ${len}, expected ${N}`));
  }
  // Without N, the three vectors still have one length, and round >= 1 has a non-empty one.
  rejects('resume', { share: new Float64Array(N + 1) }, 'invalid', {}, /resume\.share: length 5, expected 4/);
  rejects('resume', { previousShare: new Float64Array(2) }, 'invalid', {}, /resume\.previousShare: length 2, expected 4/);
  rejects('resume', { ...empty }, 'invalid', {}, /resume\.c: empty, but round 7 is to be replayed/);
  accepts('resume', { c: new Float64Array(9), previousShare: new Float64Array(9), share: new Float64Array(9) }, {});
});

test('resume: round an integer >= 0, rho positive and finite', () => {
  for (const round of [-1, 1.5, NaN, 2 ** 60, '3', null]) rejects('resume', { round }, 'invalid', CTX, /resume\.round/);
  for (const rho of [0, -0, -1, NaN, Infinity, -Infinity, '1.5', null]) rejects('resume', { rho }, 'invalid', CTX, /resume\.rho/);
  accepts('resume', { rho: 5e-324 });
  accepts('resume', { rho: 1e300 });
  // The round of a resume is any past round: not compared with ctx.round.
  accepts('resume', { round: ROUND + 100 });
  rejects('resume', { jobId: 'job-2' }, 'wrongJob', CTX);
});

test('one-shot: setup carries +1/-1 labels, one per training row; released, fit and fitted are checked against N, the test rows and the passive parties', () => {
  const setup = { ...base().setup, algorithm: 'one-shot', role: 'active', trainRows: new Uint32Array([9, 0, 4, 2]) };
  assert.equal(validateCoordinatorMessage({ ...setup, labels: new Float64Array([1, -1, -1, 1]) }, CTX).type, 'setup');
  assert.throws(() => validateCoordinatorMessage({ ...setup, labels: new Float64Array([1, -1]) }, CTX), /setup\.labels: length 2, expected 4/);
  assert.throws(() => validateCoordinatorMessage({ ...setup, labels: new Float64Array([1, -1, 0.5, 1]) }, CTX), /setup\.labels\[2\] = 0\.5, expected \+1 or -1/);
  assert.throws(() => validateCoordinatorMessage({ ...setup, role: 'boss', labels: new Float64Array([1, -1, -1, 1]) }, CTX), /setup\.role: 'boss' is not one of active, passive/);
  const b = base();
  assert.throws(() => validatePartyMessage({ ...b.released, scores: new Float64Array(N + 1) }, CTX), /released\.scores: length 5, expected 4/);
  assert.throws(() => validatePartyMessage({ ...b.released, testScores: new Float64Array(2) }, CTX), /released\.testScores: length 2, expected 3 or none/);
  assert.equal((validatePartyMessage({ ...b.released, testScores: new Float64Array(0) }, CTX) as { testScores: Float64Array }).testScores.length, 0);
  assert.throws(() => validatePartyMessage({ ...b.released, epsilonSpent: -1 }, CTX), /negative/);
  assert.throws(() => validatePartyMessage({ ...b.fitted, weights: new Float64Array(2) }, CTX), /fitted\.weights: length 2, expected 1/);
  assert.throws(() => validatePartyMessage({ ...b.fitted, localTestScores: new Float64Array(1) }, CTX), /fitted\.localTestScores: length 1, expected 3/);
  assert.throws(() => validateCoordinatorMessage({ ...b.fit, releases: new Float64Array(N) }, CTX), /fit\.releases: length 4, expected 8/);
  assert.throws(() => validateCoordinatorMessage({ ...b.fit, sigmas: new Float64Array([1, -1]) }, CTX), /fit\.sigmas\[1\] = -1 is negative/);
  assert.throws(() => validateCoordinatorMessage({ ...b.fit, parties: [] }, CTX), /fit\.parties: expected a non-empty array/);
  assert.throws(() => validateCoordinatorMessage({ ...b.fit, parties: ['ok', 'not ok'] }, CTX), /fit\.parties\[1\]: not a party id/);
});
