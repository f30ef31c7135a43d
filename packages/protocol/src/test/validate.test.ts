// The wire validators: every base message is valid, and the shape of a message (a map, its type, exactly its fields, each of its type) is checked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_SHARE_MAGNITUDE, validateCoordinatorMessage, validatePartyMessage } from '../index.js';
import { NO_PRIVACY } from './support.js';
import { type Obj, JOB, N, FILE_ROWS, CTX, DIGEST, base, PARTY_TYPES, COORD_TYPES, validatorFor, wire, throwsKind, rejects, accepts } from './validate-support.js';

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
    rejects('hello', { proof: v }, 'invalid', CTX, /hello\.proof: expected bytes/);
  }
});
