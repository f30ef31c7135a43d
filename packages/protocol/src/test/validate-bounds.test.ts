// The wire validators: privacy fields, magnitude bounds (firstOutside), sgd, the challenge, resume and one-shot messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_PENALTY_SQ, MAX_SHARE_MAGNITUDE, firstOutside, validateCoordinatorMessage, validatePartyMessage } from '../index.js';
import { N, N_TEST, ROUND, CTX, base, rejects, accepts } from './validate-support.js';

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

test("setup.testFrom: 'test' rows index the test file; 'train' rows index the training file and none is a training row", () => {
  // Base: trainRows [9, 0, 4, 2], testRows [4, 1, 0]; the files have 10 training and 5 test rows.
  assert.equal((accepts('setup', {}) as { testFrom: string }).testFrom, 'test');
  const heldOut = accepts('setup', { testFrom: 'train', testRows: new Uint32Array([7, 1, 8, 3]) }) as { testFrom: string; testRows: Uint32Array };
  assert.equal(heldOut.testFrom, 'train');
  assert.deepEqual([...heldOut.testRows], [7, 1, 8, 3]);
  // Bounded by the file the rows come from: row 7 is in the training file, not in the test file.
  rejects('setup', { testRows: new Uint32Array([7]) }, 'invalid', CTX, /setup\.testRows\[0\] = 7 is not a row of a file with 5 rows/);
  rejects('setup', { testFrom: 'train', testRows: new Uint32Array([3, 10]) }, 'invalid', CTX, /setup\.testRows\[1\] = 10 is not a row of a file with 10 rows/);
  // A held-out row that is also trained on: refused, wherever it sits in either list.
  rejects('setup', { testFrom: 'train', testRows: new Uint32Array([1, 3, 2]) }, 'invalid', CTX, /setup\.testRows\[2\] = 2 is also a training row/);
  rejects('setup', { testFrom: 'train', testRows: new Uint32Array([9]) }, 'invalid', CTX, /setup\.testRows\[0\] = 9 is also a training row/);
  // The same rows from the test file are another file's rows: no overlap to refuse.
  accepts('setup', { testFrom: 'test', testRows: new Uint32Array([4, 2, 0]) });
  // Without the file sizes (no bound) the overlap is still refused, with indices up to 2^32 - 1.
  const noFiles = { jobId: CTX.jobId };
  assert.throws(() => validateCoordinatorMessage({ ...base().setup, testFrom: 'train', trainRows: new Uint32Array([0xffffffff, 5]), testRows: new Uint32Array([0xffffffff]) }, noFiles), /is also a training row/);
  accepts('setup', { testFrom: 'train', trainRows: new Uint32Array([0xffffffff, 5]), testRows: new Uint32Array([0xfffffffe]) }, noFiles);
  rejects('setup', { testFrom: 'holdout' }, 'invalid', CTX, /setup\.testFrom: 'holdout' is not one of train, test/);
  rejects('setup', { testFrom: undefined }, 'invalid', CTX, /setup: missing field 'testFrom'/);
  rejects('setup', { testFrom: 1 }, 'invalid', CTX, /setup\.testFrom: expected a string/);
});
