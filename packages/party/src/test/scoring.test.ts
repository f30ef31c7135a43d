// Scoring new rows with a model file (admm-party predict): the model applied as its file says,
// the columns checked, and noised scoring: sigma against reference vectors computed outside this
// repository, the noise's spread, the clip before it, and the ledger that refuses to overspend.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { privacyVectors, tempDir } from '@admm-share/core/test-support';
import { ConfigError, type FeatureTable, csrFromDense, jsonDigest, keyedDigest } from '@admm-share/core';
import { partyKey } from '../privacy/party-key.js';
import { MODEL_FORMAT, type PartyModel, readPartyModel } from '../scoring/model-file.js';
import { Scorer, ScoringPrivacy } from '../scoring/scoring.js';

function model(over: Partial<PartyModel> = {}): PartyModel {
  return {
    format: MODEL_FORMAT,
    jobId: 'job-1',
    partyId: 'p1',
    role: 'passive',
    features: 3,
    featureNames: ['1', '2', '3'],
    preparation: null,
    preprocessing: { rowScaling: false, intercept: true },
    loss: 'logistic',
    labels: { negative: '-1', positive: '1' },
    coefficients: [1, -2, 0.5],
    intercept: 0.25,
    scoreClip: null,
    digest: '0'.repeat(64),
    mac: '0'.repeat(64),
    ...over,
  };
}

function table(rows: number[][], names = ['1', '2', '3']): FeatureTable {
  return { file: 'new.libsvm', ids: rows.map((_, i) => `r${i}`), X: csrFromDense(rows, names.length), featureNames: names, lines: rows.map((_, i) => i + 1) };
}

test('the model is applied as its file says: x . row + intercept, rows scaled to norm 1 when it scales them, clipped when it clips', () => {
  const rows = [[1, 0, 0], [0, 3, 4], [2, 2, 0]];
  const plain = new Scorer(model(), table(rows), undefined).score(Uint32Array.from([2, 0]), '/nonexistent', 'j');
  assert.deepEqual(Array.from(plain), [2 - 4 + 0.25, 1 + 0.25]);
  // Row 1 has norm 5: scaled to (0, 0.6, 0.8), score -1.2 + 0.4 + 0.25.
  const scaled = new Scorer(model({ preprocessing: { rowScaling: true, intercept: true } }), table(rows), undefined).score(Uint32Array.from([1]), '/nonexistent', 'j');
  assert.ok(Math.abs(scaled[0] - (-1.2 + 0.4 + 0.25)) < 1e-15);
  const clipped = new Scorer(model({ scoreClip: 0.5, intercept: null, preprocessing: { rowScaling: false, intercept: false } }), table(rows), undefined).score(Uint32Array.from([0, 1, 2]), '/nonexistent', 'j');
  assert.deepEqual(Array.from(clipped), [0.5, -0.5, -0.5]);
});

test('a model file is read in the order format, digest, mac, fields: a hand edit is reported as an edit, whatever field it breaks; a recomputed digest without the key is refused', (t) => {
  const dir = tempDir(t);
  const { digest: _, mac: __, ...body } = model();
  const key = partyKey(dir);
  // What writeModelFiles writes: the digest of the body, and the HMAC of both under party.key.
  const sealed = (b: object, k = key) => {
    const withDigest = { ...b, digest: jsonDigest(b) };
    return { ...withDigest, mac: keyedDigest(k, JSON.stringify(withDigest)) };
  };
  const write = (name: string, o: object, folder = dir) => {
    const path = join(folder, name);
    writeFileSync(path, JSON.stringify(o));
    return path;
  };
  const good = write('good.json', sealed(body));
  assert.deepEqual(readPartyModel(good).coefficients, [1, -2, 0.5]);
  const edited = write('edited.json', { ...sealed(body), coefficients: [1, 'two', 0.5] });
  assert.throws(() => readPartyModel(edited), (e: Error) => e.message === `${edited}: party model: its content does not match its digest (the file was changed after training)`);
  // The edit of the issue: the digest computed again, the key unknown.
  const flipped = { ...body, coefficients: [-1, 2, -0.5], intercept: -0.25 };
  const recomputed = write('recomputed.json', { ...flipped, digest: jsonDigest(flipped), mac: sealed(body).mac });
  assert.throws(() => readPartyModel(recomputed), (e: Error) => e.message.startsWith(`${recomputed}: party model: its content does not match its keyed digest`));
  const otherKey = write('other-key.json', sealed(flipped, Buffer.alloc(32, 1)));
  assert.throws(() => readPartyModel(otherKey), /its content does not match its keyed digest/);
  // Copied without its key.
  const away = tempDir(t);
  const alone = write('model.json', sealed(body), away);
  assert.throws(() => readPartyModel(alone), (e: Error) => e.message.startsWith(`${alone}: its key ${join(away, 'party.key')} is missing`));
  const unsigned = write('unsigned.json', { ...body, format: 'admm-share-party-model/3', digest: jsonDigest({ ...body, format: 'admm-share-party-model/3' }) });
  assert.throws(() => readPartyModel(unsigned), (e: Error) => e.message.startsWith(`${unsigned}: party model: format 'admm-share-party-model/3' has no keyed digest, so an edit to it cannot be detected; train the model again`));
  const older = write('older.json', { ...sealed(body), format: 'admm-share-party-model/1' });
  assert.throws(() => readPartyModel(older), (e: Error) => e.message.startsWith(`${older}: party model: format 'admm-share-party-model/1' has no keyed digest`));
  const other = write('other.json', { ...sealed(body), format: 'admm-share-job/2' });
  assert.throws(() => readPartyModel(other), (e: Error) => e.message.startsWith(`${other}: party model: format: expected '${MODEL_FORMAT}', got "admm-share-job/2"`));
  const broken = { ...body, coefficients: [1, 'two', 0.5] };
  const resealed = write('resealed.json', sealed(broken));
  assert.throws(() => readPartyModel(resealed), (e: Error) => e.message.startsWith(`${resealed}: party model: coefficients[1]: expected a finite number, got "two"`));
});

test('columns must be the model\'s: a different count or name is refused naming both', () => {
  assert.throws(() => new Scorer(model(), table([[1, 2]], ['1', '2']), undefined), (e: Error) => e instanceof ConfigError && /has 2 feature columns, but party p1's model \(job job-1\) was trained on 3/.test(e.message));
  assert.throws(() => new Scorer(model({ featureNames: ['age', 'income', 'tenure'] }), table([[1, 2, 3]], ['age', 'tenure', 'income']), undefined), /column 2 is 'tenure', the model of job job-1 has 'income'/);
});

test('noised scoring: sigma is calibrated for the requests with sensitivity 2 clip (reference vectors), the noise has that spread around the clipped score, and the ledger refuses a request beyond the budget', (t) => {
  const dir = tempDir(t);
  const ledger = join(dir, 'm.scoring-ledger.json');
  const ref = (rounds: number) => privacyVectors().calibrate.find((c) => c.sensitivity === 1 && c.epsilon === 1 && c.delta === 1e-5 && c.rounds === rounds)!.sigma_exact;
  const clip = 0.5;
  const batch = new ScoringPrivacy({ epsilon: 1, delta: 1e-5, requests: 1, seed: 'scoring-test' }, clip);
  assert.ok(Math.abs(batch.sigma - 2 * clip * ref(1)) < 1e-9 * batch.sigma, `${batch.sigma} against ${2 * clip * ref(1)}`);
  const online = new ScoringPrivacy({ epsilon: 1, delta: 1e-5, requests: 100 }, clip);
  assert.ok(Math.abs(online.sigma - 2 * clip * ref(100)) < 1e-9 * online.sigma);

  // Every row scores 3 > clip: the noised scores spread around 0.5 with the calibrated sigma.
  const n = 20000;
  const rows = Array.from({ length: n }, () => [3, 0, 0]);
  const scorer = new Scorer(model({ coefficients: [1, 0, 0], intercept: null, preprocessing: { rowScaling: false, intercept: false } }), table(rows), batch);
  const out = scorer.score(Uint32Array.from({ length: n }, (_, i) => i), ledger, 'predict-1');
  let mean = 0;
  for (const v of out) mean += v / n;
  let sq = 0;
  for (const v of out) sq += (v - mean) ** 2 / (n - 1);
  assert.ok(Math.abs(mean - clip) < 4 * batch.sigma / Math.sqrt(n), `mean ${mean}`);
  assert.ok(Math.abs(Math.sqrt(sq) / batch.sigma - 1) < 0.03, `sd ${Math.sqrt(sq)} against sigma ${batch.sigma}`);
  const saved = JSON.parse(readFileSync(ledger, 'utf8')).entries.findLast((e: { jobId: string }) => e.jobId === 'predict-1');
  assert.equal(saved.releases, 1);
  assert.ok(saved.epsilonSpent <= 1 && saved.epsilonSpent > 0.999);

  // The budget paid for one request: a second is refused, also after a restart; another job has its own budget.
  assert.throws(() => scorer.score(Uint32Array.from([0]), ledger, 'predict-1'), /scoring budget spent/);
  const restarted = new ScoringPrivacy({ epsilon: 1, delta: 1e-5, requests: 1 }, clip);
  assert.throws(() => restarted.release(new Float64Array(1), ledger, 'predict-1'), /scoring budget spent: another request would spend epsilon/);
  assert.throws(() => new ScoringPrivacy({ epsilon: 2, delta: 1e-5, requests: 1 }, clip).release(new Float64Array(1), ledger, 'predict-1'), /was calibrated for epsilon 1.*restarted with other values/);
  restarted.release(new Float64Array(1), ledger, 'predict-2');
  assert.deepEqual(JSON.parse(readFileSync(ledger, 'utf8')).entries.map((e: { jobId: string }) => e.jobId), ['predict-1', 'predict-2']);
  // The ledger keeps every job: predict-1 is still spent after predict-2.
  assert.throws(() => new ScoringPrivacy({ epsilon: 1, delta: 1e-5, requests: 1 }, clip).release(new Float64Array(1), ledger, 'predict-1'), /scoring budget spent/);
});
