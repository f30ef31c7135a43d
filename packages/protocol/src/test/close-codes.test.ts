// ProtocolError and the close codes: distinct codes, what a party retries after, close reasons within 123 bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CloseCodes, type CloseKind, closeKindOf, closeReason, ENVELOPE_BYTES, POINT_BYTES, MAX_CLOSE_REASON_BYTES, NONCE_BYTES, PROOF_BYTES, RETRIABLE_CLOSE_CODES, ReservedCloseCodes, ProtocolError, validatePartyMessage } from '../index.js';
import { base, throwsKind } from './validate-support.js';

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
