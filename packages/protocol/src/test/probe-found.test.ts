// A party's refusal of one lookup (`found` with `refused`, docs/privacy.md "Membership probing"):
// valid only with a reason and no points, through the codec as an object.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_REFUSAL_CHARS, decode, encode, validatePartyMessage } from '../index.js';
import { CTX, accepts, rejects } from './validate-support.js';
import { roundTrip } from './codec-support.js';

test('found.refused: a refusal carries its reason and no points; a found without it is unchanged', () => {
  const reason = 'lookup of 7 ids refused: 12 of 16 ids looked up on this connection (--max-lookup-ids-per-connection)';
  const out = accepts('found', { points: new Uint8Array(0), refused: reason });
  assert.equal(out.type === 'found' && out.refused, reason);
  const plain = accepts('found', {});
  assert.equal('refused' in plain, false);
  rejects('found', { points: new Uint8Array(32 * 2), refused: reason }, 'invalid', CTX, /2 points with a refusal, expected none/);
  rejects('found', { points: new Uint8Array(0), refused: '' }, 'invalid', CTX, /a reason of 1 to 500 characters, got 0/);
  rejects('found', { points: new Uint8Array(0), refused: 'x'.repeat(MAX_REFUSAL_CHARS + 1) }, 'invalid', CTX, /got 501/);
  rejects('found', { points: new Uint8Array(0), refused: 7 }, 'invalid', CTX, /found.refused: expected a string/);
  // Without a refusal, an empty answer to a lookup of 2 ids is still wrong.
  rejects('found', { points: new Uint8Array(0) }, 'invalid', CTX, /0 points, the lookup sent 2/);
});

test('found.refused survives the codec', () => {
  const msg = { type: 'found' as const, jobId: 'job-1', points: new Uint8Array(0), refused: 'refused: 100 of 100 ids today' };
  // roundTrip compares every field, typed arrays element-wise.
  roundTrip(msg, CTX);
  const back = validatePartyMessage(decode(encode(msg)), CTX);
  assert.equal(back.type === 'found' && back.refused, msg.refused);
});
