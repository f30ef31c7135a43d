// The wire validators: values (finite, in range), lengths against the session, the job and round of the session.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { validateCoordinatorMessage, validatePartyMessage } from '../index.js';
import { type Obj, N, N_TEST, ROUND, FILE_ROWS, DECLARED, LABEL_IDS, CTX, base, wire, throwsKind, rejects, accepts } from './validate-support.js';

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

test('setup.classWeights: optional; two positive finite weights, exactly the keys negative and positive, only with the logistic loss', () => {
  assert.equal('classWeights' in accepts('setup', {}), false, 'absent stays absent');
  assert.deepEqual((accepts('setup', { classWeights: { negative: 0.55, positive: 5 } }) as { classWeights: object }).classWeights, { negative: 0.55, positive: 5 });
  for (const bad of [0, -1, -5e-324]) rejects('setup', { classWeights: { negative: 1, positive: bad } }, 'invalid', CTX, /setup\.classWeights\.positive: expected a positive number/);
  for (const bad of [NaN, Infinity]) rejects('setup', { classWeights: { negative: bad, positive: 1 } }, 'invalid', CTX, /setup\.classWeights\.negative: expected a finite number/);
  rejects('setup', { classWeights: { negative: 1 } }, 'invalid', CTX, /setup\.classWeights: missing field 'positive'/);
  rejects('setup', { classWeights: { negative: 1, positive: 2, other: 3 } }, 'invalid', CTX, /setup\.classWeights: unexpected field 'other'/);
  rejects('setup', { classWeights: [1, 2] }, 'invalid', CTX);
  rejects('setup', { classWeights: null }, 'invalid', CTX);
  rejects('setup', { classWeights: { negative: 1, positive: 2 }, loss: 'squared' }, 'invalid', CTX, /class weights with the squared loss/);
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
