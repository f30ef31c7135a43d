import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Packr } from 'msgpackr';
import {
  CloseCodes,
  type CloseKind,
  type CoordinatorMessage,
  decode,
  ENVELOPE_BYTES,
  type EncodeScratch,
  encode,
  encodeInto,
  encodeToSend,
  encodeIdsSource,
  bytesSource,
  encodeFresh,
  packedBound,
  MAX_PENALTY_SQ,
  MAX_SHARE_MAGNITUDE,
  PART_VALUES,
  PSI_PART_POINTS,
  type Message,
  type PartyMessage,
  PROTOCOL_VERSION,
  ProtocolError,
  TYPED_ARRAY_EXTENSION,
  validateCoordinatorMessage,
  validatePartyMessage,
  type ValidationContext,
} from '../index.js';
import { NO_PRIVACY, seeded } from './support.js';

// ---------------------------------------------------------------------------------------
// Helpers

const randInt = (rnd: () => number, n: number): number => Math.floor(rnd() * n);

const PARTY_TYPES = new Set(['hello', 'ids', 'ready', 'share', 'scores', 'exhausted', 'batchScores', 'released', 'fitted', 'found', 'partial']);

/** Awkward but finite values every vector cycles through. */
const AWKWARD = [-0, 1e-300, 1e300, -1.5, 0, 5e-324, -5e-324, Number.MAX_VALUE, -Number.MAX_VALUE, 1 / 3, -1e-300, -1e300, 2 ** 53 + 2, Math.PI];

/** With `limit`, values beyond it become +-limit (a party's shares and scores are bounded: MAX_SHARE_MAGNITUDE). */
function awkwardVector(length: number, seed = 1, limit = Infinity): Float64Array {
  const rnd = seeded(seed);
  const v = new Float64Array(length);
  for (let i = 0; i < length; i++) {
    // First the fixed awkward values, then a mix of awkward and random ones.
    v[i] = i < AWKWARD.length || i % 3 === 0 ? AWKWARD[i % AWKWARD.length] : (rnd() - 0.5) * 10 ** (randInt(rnd, 600) - 300);
    if (Math.abs(v[i]) > limit) v[i] = Math.sign(v[i]) * limit;
  }
  if (length === 1) v[0] = -0;
  return v;
}

function bytesOf(a: ArrayBufferView): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

/** Same constructor, same length, bit-identical elements (so -0 stays -0). */
function assertSameTyped(actual: unknown, expected: Float64Array | Uint32Array | Uint8Array, label: string): void {
  assert.ok(actual !== null && typeof actual === 'object', `${label}: not an object`);
  assert.equal((actual as object).constructor, expected.constructor, `${label}: constructor ${(actual as object).constructor?.name}`);
  const a = actual as typeof expected;
  assert.equal(a.length, expected.length, `${label}: length`);
  for (let i = 0; i < expected.length; i++) {
    if (!Object.is(a[i], expected[i])) assert.fail(`${label}[${i}]: got ${a[i]}, expected ${Object.is(expected[i], -0) ? '-0' : expected[i]}`);
  }
  assert.ok(bytesOf(a).equals(bytesOf(expected)), `${label}: bytes differ`);
}

/** Compare a validated message with the one that was encoded: typed arrays element-wise, the rest deeply. */
function assertSameMessage(actual: Message, expected: Message): void {
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${expected.type}: keys`);
  for (const [k, v] of Object.entries(expected)) {
    const got = (actual as unknown as Record<string, unknown>)[k];
    if (ArrayBuffer.isView(v)) assertSameTyped(got, v as Float64Array, `${expected.type}.${k}`);
    else assert.deepEqual(got, v, `${expected.type}.${k}`);
  }
}

function roundTrip(msg: Message, ctx: ValidationContext): Message {
  const bytes = encode(msg);
  assert.ok(bytes instanceof Uint8Array && bytes.length > 0, 'encode returns non-empty bytes');
  const decoded = decode(bytes);
  const validated = PARTY_TYPES.has(msg.type) ? validatePartyMessage(decoded, ctx) : validateCoordinatorMessage(decoded, ctx);
  assert.equal(validated.type, msg.type);
  assertSameMessage(validated, msg);
  return validated;
}

/** `rows` random byte strings of `width` bytes (16: a proof's half; 32: a PSI point), concatenated. */
function hashes(rows: number, seed: number, width = 16): Uint8Array {
  const rnd = seeded(seed);
  const h = new Uint8Array(rows * width);
  for (let i = 0; i < h.length; i++) h[i] = randInt(rnd, 256);
  return h;
}

function rowPermutation(length: number, fileRows: number, seed: number): Uint32Array {
  // `length` distinct rows out of `fileRows`, in shuffled order, always including the last row.
  const rnd = seeded(seed);
  const all = new Uint32Array(fileRows);
  for (let i = 0; i < fileRows; i++) all[i] = i;
  for (let i = fileRows - 1; i > 0; i--) {
    const j = randInt(rnd, i + 1);
    const t = all[i];
    all[i] = all[j];
    all[j] = t;
  }
  const out = all.slice(0, length);
  if (length > 0 && !out.includes(fileRows - 1)) out[0] = fileRows - 1;
  return out;
}

const JOB = 'job-2024.01_a';
const LENGTHS = [0, 1, 70000];

// ---------------------------------------------------------------------------------------
// Round trips, party -> coordinator

test('round trip: hello (with and without a job id)', () => {
  const a: Message = { type: 'hello', protocolVersion: 1, partyId: 'bank-A', jobId: JOB, features: 12, trainRows: 70000, testRows: 0, proof: new Uint8Array(32).fill(7), noise: false, model: null };
  const b: Message = { type: 'hello', protocolVersion: 1, partyId: 'x'.repeat(64), jobId: null, features: 1, trainRows: 1, testRows: 2 ** 40, proof: null, noise: false, model: null };
  assert.equal((roundTrip(a, {}) as { jobId: string }).jobId, JOB);
  assert.equal((roundTrip(b, {}) as { jobId: string | null }).jobId, null);
});

test('round trip: ids with 0, 1 and 70000 points, against 3 and 70000 label points, train and test sets', () => {
  for (const rows of LENGTHS) {
    for (const labels of [3, 70000]) {
      for (const set of ['train', 'test'] as const) {
        const msg: Message = { type: 'ids', jobId: JOB, set, points: hashes(rows, rows + 7, 32), labelPoints: hashes(labels, labels, 32) };
        const ctx: ValidationContext = {
          jobId: JOB,
          declaredRows: { train: set === 'train' ? rows : 5, test: set === 'test' ? rows : 5 },
          labelIds: { train: set === 'train' ? labels : 5, test: set === 'test' ? labels : 5 },
        };
        const out = roundTrip(msg, ctx);
        assert.equal(out.type === 'ids' && out.points.length, rows * 32);
        assert.equal(out.type === 'ids' && out.labelPoints.length, labels * 32);
      }
    }
  }
});

test('ids: points not whole, or not as many as declared, are refused with what is wrong', () => {
  const ctx: ValidationContext = { jobId: JOB, declaredRows: { train: 3, test: 0 }, labelIds: { train: 2, test: 0 } };
  const ok = { type: 'ids', jobId: JOB, set: 'train', points: hashes(3, 1, 32), labelPoints: hashes(2, 2, 32) } as const;
  assert.throws(() => roundTrip({ ...ok, points: new Uint8Array(95) }, ctx), /ids\.points: 95 bytes is not a whole number of 32-byte points/);
  assert.throws(() => roundTrip({ ...ok, points: hashes(4, 1, 32) }, ctx), /ids\.points: 4 train ids, the hello declared 3/);
  assert.throws(() => roundTrip({ ...ok, labelPoints: hashes(3, 1, 32) }, ctx), /ids\.labelPoints: 3 points, the coordinator sent 2/);
});

test('psi: label points whole, at least one, at most what the party accepts; PSI_PART_POINTS at most a message, within the set', () => {
  const psi = (total: number, at: number, points: Uint8Array) => ({ type: 'psi', jobId: JOB, set: 'train', total, at, points }) as const;
  const out = roundTrip({ type: 'psi', jobId: JOB, set: 'test', total: 20000, at: 0, points: hashes(20000, 3, 32) }, { jobId: JOB, maxLabelIds: 20000 });
  assert.ok(out.type === 'psi' && out.points.length === 20000 * 32 && out.set === 'test' && out.total === 20000 && out.at === 0);
  // The last part of a set of 70,000 label ids.
  const last = roundTrip(psi(70000, 2 * PSI_PART_POINTS, hashes(70000 - 2 * PSI_PART_POINTS, 5, 32)), { jobId: JOB, maxLabelIds: 70000 });
  assert.ok(last.type === 'psi' && last.at === 2 * PSI_PART_POINTS && last.points.length === (70000 - 2 * PSI_PART_POINTS) * 32);
  assert.throws(() => roundTrip(psi(0, 0, new Uint8Array(0)), { jobId: JOB }), /psi\.points: no train label ids/);
  assert.throws(() => roundTrip(psi(5, 0, new Uint8Array(0)), { jobId: JOB }), /psi\.points: empty, in a set of 5 label ids/);
  assert.throws(() => roundTrip(psi(2, 0, new Uint8Array(33)), { jobId: JOB }), /psi\.points: 33 bytes/);
  assert.throws(() => roundTrip(psi(11, 0, hashes(11, 3, 32)), { jobId: JOB, maxLabelIds: 10 }), /psi\.total: 11 train label ids, more than this party accepts \(10, admm-party --max-label-factor\)/);
  assert.throws(() => roundTrip(psi(70000, 0, hashes(PSI_PART_POINTS + 1, 3, 32)), { jobId: JOB }), new RegExp(`psi\\.points: ${PSI_PART_POINTS + 1} points in one message, more than ${PSI_PART_POINTS}`));
  assert.throws(() => roundTrip(psi(10, 8, hashes(3, 3, 32)), { jobId: JOB }), /psi\.points: label ids 8 to 10, but the set has 10/);
  assert.throws(() => roundTrip({ ...psi(3, 0, hashes(3, 3, 32)), at: -1 }, { jobId: JOB }), /psi\.at: expected an integer >= 0, got -1/);
});

test('round trip: ready', () => {
  roundTrip({ type: 'ready', jobId: JOB, privacy: NO_PRIVACY }, { jobId: JOB });
  roundTrip({ type: 'ready', jobId: '0', privacy: NO_PRIVACY }, {});
});

test('round trip: share with vectors of length 0, 1 and 70000 and awkward values', () => {
  for (const n of LENGTHS) {
    const share = awkwardVector(n, n + 1, MAX_SHARE_MAGNITUDE);
    for (const penaltySq of [0, 1e-300, MAX_PENALTY_SQ, 1.5]) {
      const out = roundTrip({ type: 'share', jobId: JOB, round: 17, share, penaltySq, epsilonSpent: 0, solver: null }, { jobId: JOB, n, round: 17 });
      assert.ok(out.type === 'share' && out.share !== share, 'decoded vector is a new array');
    }
  }
  // The special values really are in the long vector (the test would be weaker otherwise).
  const v = awkwardVector(70000);
  assert.ok(Object.is(v[0], -0) && v[1] === 1e-300 && v[2] === 1e300 && v[3] === -1.5);
});

test('round trip: scores with vectors of length 0, 1 and 70000', () => {
  for (const nTest of LENGTHS) {
    roundTrip({ type: 'scores', jobId: JOB, round: 3, scores: awkwardVector(nTest, 99 + nTest, MAX_SHARE_MAGNITUDE) }, { jobId: JOB, nTest, round: 3 });
  }
});

// ---------------------------------------------------------------------------------------
// Round trips, coordinator -> party

test('round trip: welcome', () => {
  const out = roundTrip({ type: 'welcome', protocolVersion: 1, jobId: JOB }, { jobId: JOB });
  assert.ok(out.type === 'welcome' && out.jobId === JOB);
});

test('round trip: setup with 1 and 70000 training rows, 0, 1 and 70000 test rows', () => {
  const fileRows = { train: 80000, test: 75000 };
  for (const nTrain of [1, 70000]) {
    for (const nTest of LENGTHS) {
      const msg: Message = {
        type: 'setup',
        jobId: JOB,
        trainRows: rowPermutation(nTrain, fileRows.train, nTrain),
        testRows: rowPermutation(nTest, fileRows.test, nTest + 3),
        lambda: nTest === 0 ? 0 : 1e-300,
        loss: nTest === 1 ? 'squared' : 'logistic',
        rounds: 100,
        rho: 0.5,
        parties: 2,
        algorithm: 'sgd',
        role: 'active',
        labels: new Float64Array(0),
        labelFlip: nTest <= 1 ? 0 : 0.2689414213699951, // a flip only with the logistic loss and lambda > 0
      };
      roundTrip(msg, { jobId: JOB, fileRows });
    }
  }
  // Row indices above 2^16 and up to 2^32 - 1 survive without a file-size bound.
  roundTrip({ type: 'setup', jobId: JOB, trainRows: new Uint32Array([0xffffffff, 65536, 0]), testRows: new Uint32Array(0), lambda: 1e300, loss: 'squared', rounds: 100, rho: 0.5, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 }, {});
});

test('round trip: round with vectors of length 0, 1 and 70000 and awkward rho', () => {
  for (const n of LENGTHS) {
    for (const rho of [1e-300, 1.5, 1e300]) {
      roundTrip({ type: 'round', jobId: JOB, round: 2 ** 31, rho, c: awkwardVector(n, 5 * n + 2) }, { jobId: JOB, n, round: 2 ** 31 });
    }
  }
});

test('round trip: resume at round 0 (empty vectors) and at round k with vectors of length 1 and 70000', () => {
  const empty = new Float64Array(0);
  roundTrip({ type: 'resume', jobId: JOB, round: 0, rho: 0.5, c: empty, previousShare: empty, share: empty }, { jobId: JOB, n: 70000 });
  for (const n of [1, 70000]) {
    for (const rho of [1e-300, 1.5, 1e300]) {
      const msg: Message = { type: 'resume', jobId: JOB, round: 2 ** 31, rho, c: awkwardVector(n, n + 11), previousShare: awkwardVector(n, n + 12), share: awkwardVector(n, n + 13) };
      roundTrip(msg, { jobId: JOB, n });
    }
  }
  // Round 1, the first that can be replayed: what the party released before it is all zeros.
  roundTrip({ type: 'resume', jobId: JOB, round: 1, rho: 0.5, c: awkwardVector(3, 21), previousShare: new Float64Array(3), share: awkwardVector(3, 22) }, { jobId: JOB, n: 3 });
  // Without a context (a party that has not aligned yet checks the lengths against each other).
  roundTrip({ type: 'resume', jobId: JOB, round: 0, rho: 0.5, c: empty, previousShare: empty, share: empty }, {});
  roundTrip({ type: 'resume', jobId: JOB, round: 5, rho: 0.5, c: awkwardVector(4, 23), previousShare: awkwardVector(4, 24), share: awkwardVector(4, 25) }, {});
});

test('round trip: evaluate', () => {
  roundTrip({ type: 'evaluate', jobId: JOB, round: 0 }, { jobId: JOB });
  roundTrip({ type: 'evaluate', jobId: JOB, round: 123456 }, { jobId: JOB, round: 123456 });
});

test('round trip: done with every stop reason', () => {
  for (const reason of ['converged', 'max-rounds', 'stopped'] as const) {
    roundTrip(
      {
        type: 'done',
        jobId: JOB,
        reason,
        rounds: 250,
        objective: -1.5,
        params: { variant: 'jacobi', rho: 1e-300, alpha: 1.6, lambda: 0, loss: 'logistic' },
        classes: { negative: 'no', positive: 'yes' },
      },
      { jobId: JOB },
    );
  }
});

test('decode accepts a plain Uint8Array (not only a Buffer) and copies vectors out of it', () => {
  const share = awkwardVector(1000, 42, MAX_SHARE_MAGNITUDE);
  const buf = encode({ type: 'share', jobId: JOB, round: 1, share, penaltySq: 2, epsilonSpent: 0, solver: null });
  const plain = new Uint8Array(buf); // a copy in a fresh ArrayBuffer
  const out = validatePartyMessage(decode(plain), { n: 1000 });
  assert.ok(out.type === 'share');
  assertSameTyped(out.share, share, 'share');
  // Overwriting the input afterwards must not change the decoded vector.
  plain.fill(0);
  assertSameTyped(out.share, share, 'share after the frame was overwritten');
});

test('encoding is the MessagePack assembled by hand here, and decodes back', () => {
  // {type: 'round', jobId: 'j', round: 1, rho: 0.5, c: Float64Array [1.5]}, keys in insertion order:
  const expected = Buffer.from(
    [
      'de0005', // map 16 with 5 entries (the header msgpackr writes for a plain object)
      'a4' + Buffer.from('type').toString('hex'), 'a5' + Buffer.from('round').toString('hex'),
      'a5' + Buffer.from('jobId').toString('hex'), 'a1' + Buffer.from('j').toString('hex'),
      'a5' + Buffer.from('round').toString('hex'), '01', // positive fixint 1
      'a3' + Buffer.from('rho').toString('hex'), 'cb3fe0000000000000', // float 64, 0.5 = 0x3fe0000000000000
      'a1' + Buffer.from('c').toString('hex'),
      // ext 8: 9 bytes of type 0x74 ('t', msgpackr's typed arrays): index 8 (Float64Array in
      // msgpackr's typedArrays list), then the 8 bytes of 1.5 = 0x3ff8000000000000, little-endian.
      'c70974', '08', '000000000000f83f',
    ].join(''),
    'hex',
  );
  const msg: Message = { type: 'round', jobId: 'j', round: 1, rho: 0.5, c: Float64Array.of(1.5) };
  assert.equal(encode(msg).toString('hex'), expected.toString('hex'));
  assertSameMessage(validateCoordinatorMessage(decode(expected), { jobId: 'j', n: 1, round: 1 }), msg);
  // Messages that differ in one field encode differently.
  assert.notEqual(encode({ ...msg, round: 2 }).toString('hex'), expected.toString('hex'));
});

// ---------------------------------------------------------------------------------------
// Malformed input

/** decode + validate must either throw a ProtocolError ('malformed' from decode) or yield a value the validator rejects. */
function assertRejected(bytes: Uint8Array, ctx: ValidationContext, label: string): void {
  let value: unknown;
  try {
    value = decode(bytes);
  } catch (err) {
    assert.ok(err instanceof ProtocolError, `${label}: decode threw ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`);
    assert.equal(err.kind, 'malformed', `${label}: decode error kind`);
    assert.equal(err.closeCode, CloseCodes.malformed.code);
    return;
  }
  for (const validate of [validatePartyMessage, validateCoordinatorMessage]) {
    try {
      validate(value, ctx);
    } catch (err) {
      assert.ok(err instanceof ProtocolError, `${label}: ${validate.name} threw ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`);
      continue;
    }
    assert.fail(`${label}: ${validate.name} accepted ${JSON.stringify(value)}`);
  }
}

test('decode of an empty buffer throws ProtocolError malformed', () => {
  for (const empty of [Buffer.alloc(0), new Uint8Array(0), Buffer.from('a1ff', 'hex').subarray(1, 1)]) {
    assert.throws(
      () => decode(empty),
      (err: unknown) => err instanceof ProtocolError && err.kind === 'malformed' && err.closeCode === 4002,
    );
  }
});

test('decode of bytes that are never valid MessagePack throws ProtocolError (malformed, or invalid once validated)', () => {
  // 0xc1 is the one byte MessagePack never uses. msgpackr decodes it to a sentinel object
  // (C1Type) instead of throwing, so it is only caught by the validators, as 'invalid'.
  for (const hex of ['c1', '81a474797065c1', '81c1a161']) {
    const bytes = Buffer.from(hex, 'hex');
    assertRejected(bytes, {}, hex);
    for (const validate of [validatePartyMessage, validateCoordinatorMessage]) {
      assert.throws(() => validate(decode(bytes)), (err: unknown) => err instanceof ProtocolError && (err.kind === 'invalid' || err.kind === 'malformed'));
    }
  }
  // These announce data that is not there.
  for (const hex of ['dc', 'de', 'cb0000', 'a5616263', 'c4ff00', '82a474797065']) {
    assert.throws(
      () => decode(Buffer.from(hex, 'hex')),
      (err: unknown) => err instanceof ProtocolError && err.kind === 'malformed',
      hex,
    );
  }
});

test('decode of random bytes throws ProtocolError or yields a value every validator rejects', () => {
  const rnd = seeded(0xdecade);
  for (let i = 0; i < 3000; i++) {
    const bytes = new Uint8Array(1 + randInt(rnd, 64));
    for (let j = 0; j < bytes.length; j++) bytes[j] = randInt(rnd, 256);
    // Every so often start with a map header so the decoder gets further.
    if (i % 3 === 0) bytes[0] = 0x80 | randInt(rnd, 8);
    assertRejected(bytes, { jobId: JOB, n: 3, nTest: 2, round: 1 }, `random #${i} ${Buffer.from(bytes).toString('hex')}`);
  }
});

function sampleMessages(): Message[] {
  return [
    { type: 'hello', protocolVersion: 1, partyId: 'p1', jobId: null, features: 3, trainRows: 10, testRows: 4, proof: null, noise: false, model: null },
    { type: 'ids', jobId: JOB, set: 'train', points: hashes(3, 1, 32), labelPoints: hashes(2, 5, 32) },
    { type: 'ready', jobId: JOB, privacy: NO_PRIVACY },
    { type: 'share', jobId: JOB, round: 4, share: awkwardVector(5, 1, MAX_SHARE_MAGNITUDE), penaltySq: 0.25, epsilonSpent: 0, solver: { iterations: 23, residual: 4.5e-13 } },
    { type: 'scores', jobId: JOB, round: 4, scores: awkwardVector(2, 1, MAX_SHARE_MAGNITUDE) },
    { type: 'welcome', protocolVersion: 1, jobId: JOB },
    { type: 'psi', jobId: JOB, set: 'train', total: 9, at: 5, points: hashes(4, 2, 32) },
    { type: 'setup', jobId: JOB, trainRows: new Uint32Array([4, 0, 2]), testRows: new Uint32Array([1]), lambda: 0.1, loss: 'logistic', rounds: 100, rho: 0.5, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 },
    { type: 'round', jobId: JOB, round: 4, rho: 2, c: awkwardVector(5, 9) },
    { type: 'resume', jobId: JOB, round: 3, rho: 2, c: awkwardVector(5, 10), previousShare: awkwardVector(5, 11), share: awkwardVector(5, 12) },
    { type: 'resume', jobId: JOB, round: 0, rho: 2, c: new Float64Array(0), previousShare: new Float64Array(0), share: new Float64Array(0) },
    { type: 'evaluate', jobId: JOB, round: 4 },
    { type: 'done', jobId: JOB, reason: 'converged', rounds: 4, objective: 0.5, params: { variant: 'v', rho: 2, alpha: 1, lambda: 0.1, loss: 'squared' }, classes: null },
  ];
}

test('every truncation of every message type is rejected with a ProtocolError', () => {
  const ctx: ValidationContext = { jobId: JOB, n: 5, nTest: 2, round: 4 };
  for (const msg of sampleMessages()) {
    const full = encode(msg);
    // The untruncated encoding is accepted (otherwise this test proves nothing).
    if (PARTY_TYPES.has(msg.type)) validatePartyMessage(decode(full), ctx);
    else validateCoordinatorMessage(decode(full), ctx);
    for (let k = 0; k < full.length; k++) {
      // Both a view into the original (bytes continue past the end) and a standalone copy.
      assertRejected(full.subarray(0, k), ctx, `${msg.type} cut to ${k}/${full.length} (view)`);
      assertRejected(Uint8Array.prototype.slice.call(full, 0, k), ctx, `${msg.type} cut to ${k}/${full.length} (copy)`);
    }
  }
});

test('ENVELOPE_BYTES covers the framing of every message type at its largest names and numbers', () => {
  const long = 'j'.repeat(64); // NAME_RE allows at most 64 characters
  const big = Number.MAX_SAFE_INTEGER;
  const vectors = (m: Message) => Object.values(m).reduce((sum: number, v) => sum + (ArrayBuffer.isView(v) ? v.byteLength : 0), 0);
  const worst = (m: Message): Message => JSON.parse(JSON.stringify(m, (k, v) => (k === 'jobId' || k === 'partyId' ? long : typeof v === 'number' ? big : v)));
  for (const msg of [...sampleMessages(), { type: 'sgd', jobId: JOB, step: 1, epoch: 1, lr: 1, gradient: awkwardVector(3), rows: new Uint32Array(3), full: false } as Message]) {
    // Vectors are kept as they are; every name and number is made as long as it can be.
    const inflated = { ...worst(msg), ...Object.fromEntries(Object.entries(msg).filter(([, v]) => ArrayBuffer.isView(v))) } as Message;
    const framing = encode(inflated).length - vectors(inflated);
    assert.ok(framing > 0 && framing * 4 <= ENVELOPE_BYTES, `${msg.type}: ${framing} bytes of framing, ENVELOPE_BYTES ${ENVELOPE_BYTES}`);
  }
});

test('trailing bytes after a complete message are rejected with a ProtocolError', () => {
  for (const msg of sampleMessages()) {
    const full = encode(msg);
    for (const tail of ['00', 'c0', 'ff', 'a161', '80']) {
      assertRejected(Buffer.concat([full, Buffer.from(tail, 'hex')]), {}, `${msg.type} + ${tail}`);
    }
  }
});

test('msgpackr record definitions are refused: a hello packed with records is malformed, though msgpackr itself would accept it', () => {
  const hello = { type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: 'party-1', jobId: null, features: 3, trainRows: 10, testRows: 0, proof: null, noise: false, model: null };
  const recorded = new Packr({ moreTypes: true, useRecords: true }).pack(hello);
  // The record definition is extension 0x72 ('r') in a fixext 1 (0xd4) at the start.
  assert.equal(recorded[0], 0xd4);
  assert.equal(recorded[1], 0x72);
  // What the decoder used to do: the configured (useRecords: false) msgpackr still reads it as the hello.
  assert.deepEqual(new Packr({ moreTypes: true, useRecords: false }).unpack(recorded), hello);
  assert.throws(
    () => decode(recorded),
    (err: unknown) => err instanceof ProtocolError && err.kind === 'malformed' && err.closeCode === 4002 && /record definition/.test(err.message),
  );
  // The two-byte form (fixext 2, 0xd5 0x72) of a definition too.
  assert.throws(() => decode(Buffer.from('d5724000', 'hex')), (err: unknown) => err instanceof ProtocolError && err.kind === 'malformed');
});

test('no MessagePack extension but typed arrays: sets, errors, regexps, dates, undefined and unknown types are malformed', () => {
  const more = new Packr({ moreTypes: true, useRecords: false, structuredClone: true });
  const values: [string, unknown][] = [
    ['Set', { type: 'ready', jobId: JOB, privacy: new Set([1]) }],
    ['Error', { type: 'ready', jobId: JOB, privacy: new Error('x') }],
    ['RegExp', { type: 'ready', jobId: JOB, privacy: /a+/ }],
    ['Date', { type: 'ready', jobId: JOB, privacy: new Date(0) }],
    ['undefined', { type: 'ready', jobId: JOB, privacy: undefined }],
  ];
  for (const [label, v] of values) {
    const bytes = more.pack(v);
    assert.throws(() => decode(bytes), (err: unknown) => err instanceof ProtocolError && err.kind === 'malformed' && /extension type/.test(err.message), label);
  }
  // Every extension format with a foreign type byte, and 0xc1 anywhere.
  for (const hex of ['d40100', 'd5010000', 'd6010000000000', 'c70101ff', 'c8000101ff', 'c900000001 01ff'.replace(' ', ''), '81a474797065c1']) {
    assert.throws(() => decode(Buffer.from(hex, 'hex')), (err: unknown) => err instanceof ProtocolError && err.kind === 'malformed', hex);
  }
  // Typed arrays in every size class still decode (vectors of length 0, 1 and 70000 round-trip above).
  assert.equal(TYPED_ARRAY_EXTENSION, 0x74);
  assert.deepEqual(decode(encode({ type: 'evaluate', jobId: JOB, round: 1 })), { type: 'evaluate', jobId: JOB, round: 1 });
});

test('announced lengths are checked before anything is built: a map or array of 2^32 entries in a few bytes is malformed at once', () => {
  for (const hex of ['dfffffffff', 'ddffffffff', 'de ffff'.replace(' ', ''), 'c6ffffffff00', 'c9ffffffff7400']) {
    const started = performance.now();
    assert.throws(() => decode(Buffer.from(hex, 'hex')), (err: unknown) => err instanceof ProtocolError && err.kind === 'malformed', hex);
    assert.ok(performance.now() - started < 50, `${hex}: ${performance.now() - started} ms`);
  }
});

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
 * vector is finite. Written from the protocol's rules (PROTOCOL.md), not from validate.ts.
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
        for (const r of m.testRows) if (r >= ctx.fileRows.test) fail(`test row ${r}`);
      }
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

test('encodeInto: the bytes of encode, written into the scratch it reuses; nothing encoded afterwards lands in that scratch', () => {
  const c = Float64Array.from({ length: 5000 }, (_, i) => Math.sin(i));
  const round = (r: number, n = 5000): CoordinatorMessage => ({ type: 'round', jobId: 'job-1', round: r, rho: 0.5, c: c.subarray(0, n).map((v) => v * r) });
  const scratch: EncodeScratch = {};
  const first = encodeInto(round(1), scratch);
  assert.deepEqual(first, encode(round(1)));
  const buffer = scratch.buffer!;
  assert.equal(first.buffer, buffer.buffer, 'the message views the scratch');
  const second = encodeInto(round(2, 1000), scratch);
  assert.equal(scratch.buffer, buffer, 'a message that fits reuses the scratch');
  assert.equal(second.buffer, buffer.buffer);
  assert.deepEqual(decode(second), round(2, 1000));
  // The scratch has room left after that smaller message; a message encoded now must not be
  // written there, since the scratch is overwritten by the next encodeInto.
  const other = encode(round(7, 1000));
  assert.notEqual(other.buffer, buffer.buffer, 'a later encode has a buffer of its own');
  encodeInto(round(3), scratch);
  assert.deepEqual(decode(other), round(7, 1000), 'the later message is intact after the scratch was written again');
  // A larger message grows the scratch.
  const big: CoordinatorMessage = { type: 'round', jobId: 'job-1', round: 4, rho: 0.5, c: new Float64Array(20000).fill(2) };
  assert.deepEqual(decode(encodeInto(big, scratch)), big);
  assert.ok(scratch.buffer!.length >= 8 * 20000);
  // encodeToSend reuses the scratch only when nothing is queued on the socket.
  assert.equal(encodeToSend(round(5), scratch, 0).buffer, scratch.buffer!.buffer);
  for (const queued of [1, undefined]) {
    const bytes = encodeToSend(round(6), scratch, queued);
    assert.notEqual(bytes.buffer, scratch.buffer!.buffer, `queued ${queued}: a fresh buffer`);
    assert.deepEqual(decode(bytes), round(6));
  }
  // So does each part of a long vector, sent one after the other.
  const part: PartyMessage = { type: 'part', jobId: 'job-1', round: 6, at: 0, values: c.subarray(0, 3000) };
  const partBytes = encodeToSend(part, scratch, 0);
  assert.equal(partBytes.buffer, scratch.buffer!.buffer, 'part: into the scratch');
  assert.deepEqual(decode(partBytes), part);
  // A one-off message, however large, never goes into the scratch (nor grows it).
  const kept = scratch.buffer!;
  const ids: PartyMessage = { type: 'ids', jobId: 'job-1', set: 'train', points: new Uint8Array(32 * 40000).fill(9), labelPoints: new Uint8Array(32 * 40000).fill(7) };
  const sent = encodeToSend(ids, scratch, 0);
  assert.notEqual(sent.buffer, kept.buffer, 'ids: a fresh buffer');
  assert.equal(scratch.buffer, kept, 'the scratch is neither replaced nor grown');
  assert.deepEqual(decode(sent), ids);
});

test('encodeIdsSource: the bytes of encode for the same message, read in pieces of any size across its parts', () => {
  const rand = seeded('ids-source');
  // 2048 and 2049 ids: 65536 bytes of points is the first length msgpackr writes as ext 32.
  for (const [n, m] of [[0, 0], [1, 0], [0, 3], [1, 1], [8, 250], [256, 2048], [2047, 3], [2048, 2049], [40000, 70000]]) {
    const points = Uint8Array.from({ length: 32 * n }, () => Math.floor(rand() * 256));
    const labelPoints = Uint8Array.from({ length: 32 * m }, () => Math.floor(rand() * 256));
    for (const jobId of ['j', 'a-job-id-of-some-length-1234567890']) {
      const expected = encode({ type: 'ids', jobId, set: 'test', points, labelPoints });
      const source = encodeIdsSource({ jobId, set: 'test' }, bytesSource(points), bytesSource(labelPoints));
      assert.equal(source.length, expected.length, `${n} and ${m} points, job ${jobId}: length`);
      for (const piece of [1 << 20, 4099, 31]) {
        if (piece < 4099 && expected.length > 1 << 16) continue;
        const got = new Uint8Array(expected.length);
        for (let at = 0; at < got.length; at += piece) source.readAt(at, got.subarray(at, Math.min(got.length, at + piece)));
        assert.deepEqual(got, new Uint8Array(expected), `${n} and ${m} points, job ${jobId}, pieces of ${piece}`);
      }
    }
  }
  const source = encodeIdsSource({ jobId: 'j', set: 'train' }, bytesSource(new Uint8Array(64)), bytesSource(new Uint8Array(32)));
  assert.throws(() => source.readAt(source.length - 2, new Uint8Array(3)), RangeError);
});

test('decode: a byte array of 4 KiB or more views the bytes decoded; smaller ones and other arrays are aligned copies; an ArrayBuffer is refused', () => {
  const big: PartyMessage = { type: 'ids', jobId: 'j', set: 'train', points: new Uint8Array(32 * 200).fill(3), labelPoints: new Uint8Array(32).fill(4) };
  const bytes = encode(big);
  const msg = decode(bytes) as { points: Uint8Array; labelPoints: Uint8Array };
  assert.deepEqual(msg, big);
  assert.equal(Object.getPrototypeOf(msg.points), Uint8Array.prototype, 'a plain Uint8Array, not a Buffer');
  assert.equal(msg.points.buffer, bytes.buffer, 'the points view the bytes');
  assert.notEqual(msg.labelPoints.buffer, bytes.buffer, 'a small array is copied');
  // An odd offset in the bytes: a Float64Array is still a copy, aligned.
  const vector: CoordinatorMessage = { type: 'round', jobId: 'j', round: 3, rho: 0.5, c: Float64Array.from({ length: 1000 }, (_, i) => i / 7) };
  const shifted = Buffer.concat([Buffer.from([0]), encode(vector)]).subarray(1);
  const r = decode(shifted) as { c: Float64Array };
  assert.deepEqual(r, vector);
  assert.notEqual(r.c.buffer, shifted.buffer);
  // msgpackr's kinds 16 and 17 (an ArrayBuffer, a DataView) are not part of the protocol.
  for (const kind of [16, 17, 99]) {
    const ext = Buffer.from([0x81, 0xa1, 0x78, 0xd6, TYPED_ARRAY_EXTENSION, kind, 0, 0, 0]);
    assert.throws(() => decode(ext), (err: unknown) => err instanceof ProtocolError && err.kind === 'malformed' && new RegExp(`unknown kind ${kind}`).test(err.message), `kind ${kind}`);
  }
});

test("decode into: a round's c of the length asked for is decoded into the receiver's array (the same values, its own array overwritten); any other vector is a copy of its own, and the array is never left in a message of another kind", () => {
  const n = 1000;
  const c = Float64Array.from({ length: n }, (_, i) => Math.sin(i) * 1e3);
  const kept = new Float64Array(n).fill(7);
  let asked = 0;
  const into = { type: 'round', key: 'c', array: (length: number) => (length === n ? (asked++, kept) : undefined) };
  const round = decode(encode({ type: 'round', jobId: 'j', round: 3, rho: 0.5, c }), into) as { c: Float64Array };
  assert.equal(round.c, kept, "the receiver's array");
  assert.deepEqual(Array.from(kept), Array.from(c));
  assert.equal(asked, 1);
  // Another length: a copy, the array untouched.
  kept.fill(7);
  const short = decode(encode({ type: 'round', jobId: 'j', round: 4, rho: 0.5, c: c.subarray(1) }), into) as { c: Float64Array };
  assert.notEqual(short.c, kept);
  assert.deepEqual(Array.from(short.c), Array.from(c.subarray(1)));
  assert.equal(asked, 1, 'not asked for');
  // A resume's three vectors of length n: each its own array, equal to what was sent (the one
  // decoded into the receiver's array first is copied out of it: a resume is not a round).
  const previousShare = c.map((v) => -v);
  const share = c.map((v) => v / 3);
  const resume = decode(encode({ type: 'resume', jobId: 'j', round: 2, rho: 0.5, c, previousShare, share }), into) as { c: Float64Array; previousShare: Float64Array; share: Float64Array };
  assert.equal(asked, 2);
  for (const [key, v] of [['c', c], ['previousShare', previousShare], ['share', share]] as const) {
    assert.notEqual(resume[key], kept, `resume.${key} is not the receiver's array`);
    assert.deepEqual(Array.from(resume[key]), Array.from(v), `resume.${key}`);
  }
  assert.equal(new Set([resume.c, resume.previousShare, resume.share]).size, 3);
  // Without `into`, as before: a copy.
  assert.notEqual((decode(encode({ type: 'round', jobId: 'j', round: 5, rho: 0.5, c })) as { c: Float64Array }).c, kept);
});

test('encodeFresh: the bytes of encode; a large message in a buffer of its own, no larger than its bound', () => {
  const small: CoordinatorMessage = { type: 'round', jobId: 'j', round: 1, rho: 0.5, c: new Float64Array(10).fill(0.25) };
  assert.deepEqual(encodeFresh(small), encode(small));
  const big: PartyMessage = { type: 'ids', jobId: 'j', set: 'train', points: new Uint8Array(3 << 20).fill(5), labelPoints: new Uint8Array(1 << 20).fill(6) };
  const bytes = encodeFresh(big);
  assert.deepEqual(bytes, encode(big));
  assert.ok(bytes.buffer.byteLength <= packedBound(big), `${bytes.buffer.byteLength} bytes held for a bound of ${packedBound(big)}`);
  assert.notEqual(encodeFresh(big).buffer, bytes.buffer);
});
