// The codec: bytes that are not a message (empty, truncated, trailing, records, extensions, huge lengths) raise a ProtocolError.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Packr } from 'msgpackr';
import { CloseCodes, decode, ENVELOPE_BYTES, encode, type Message, PROTOCOL_VERSION, ProtocolError, TYPED_ARRAY_EXTENSION, validateCoordinatorMessage, validatePartyMessage, type ValidationContext } from '../index.js';
import { seeded } from './support.js';
import { randInt, PARTY_TYPES, awkwardVector, JOB, sampleMessages } from './codec-support.js';

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
