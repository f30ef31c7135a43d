// The codec's ways of encoding without a fresh buffer (encodeInto, encodeIdsSource, encodeFresh) and of decoding into the receiver's arrays.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type CoordinatorMessage, decode, type EncodeScratch, encode, encodeInto, encodeToSend, encodeIdsSource, bytesSource, encodeFresh, packedBound, type PartyMessage, ProtocolError, TYPED_ARRAY_EXTENSION } from '../index.js';
import { seeded } from './support.js';

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
