// The codec: every message type survives encode, decode and validation unchanged, and the bytes are the MessagePack assembled by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decode, encode, MAX_PENALTY_SQ, MAX_SHARE_MAGNITUDE, PSI_PART_POINTS, type Message, validateCoordinatorMessage, validatePartyMessage, type ValidationContext } from '../index.js';
import { NO_PRIVACY } from './support.js';
import { awkwardVector, assertSameTyped, assertSameMessage, roundTrip, hashes, rowPermutation, JOB, LENGTHS } from './codec-support.js';

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
        testFrom: 'test',
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
  roundTrip({ type: 'setup', jobId: JOB, trainRows: new Uint32Array([0xffffffff, 65536, 0]), testRows: new Uint32Array(0), testFrom: 'test', lambda: 1e300, loss: 'squared', rounds: 100, rho: 0.5, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 }, {});
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
