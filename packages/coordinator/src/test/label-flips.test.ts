// Label privacy at the coordinator: the job's flips are drawn once and kept in its output folder
// (a restart of the same job reads them back; every way of getting a second draw is refused,
// with what to do), the flips file is read back like wire data, the job built from the
// flipped labels sends them (one-shot) while its test labels stay the true ones, a checkpoint
// keeps the flip probability, and the base-rate baseline undoes the flips.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { ConfigError, DataError, applyFlips, flipProbability } from '@admm-share/core';
import { tempDir } from '@admm-share/core/test-support';
import type { CoordinatorConfig } from '../config.js';
import { readCheckpoint, writeCheckpoint } from '../output/checkpoint.js';
import { signed } from '../output/signed-json.js';
import { buildJob, setupFor } from '../job/job.js';
import { FLIPS_FILE, type LabelFlips, readLabelFlips, resolveLabelFlips } from '../job/label-flips.js';
import type { Labels } from '../job/labels.js';
import { baseRateMetrics } from '../training/one-shot-loop.js';
import { assertEachMalformed } from './malformed.js';

const quiet = pino({ level: 'silent' });
const N = 4000;

function labels(seed = 0): Labels {
  const ids = Array.from({ length: N }, (_, i) => `id-${i}`);
  // Deterministic +-1 labels, about a quarter positive.
  const y = Float64Array.from({ length: N }, (_, i) => (((i * 7 + seed) % 4) === 0 ? 1 : -1));
  return { file: 'labels.train.csv', ids, y, classes: { negative: '-1', positive: '1' } };
}

const cfg = (out: string, jobId: string, epsilon?: number, extra: { seed?: string; resume?: boolean } = {}) => ({
  out,
  jobId,
  resume: extra.resume ?? false,
  ...(epsilon === undefined ? {} : { labelPrivacy: { epsilon, ...(extra.seed !== undefined ? { seed: extra.seed } : {}) } }),
});

const configError = (re: RegExp) => (err: unknown) => err instanceof ConfigError && re.test(err.message);

test('a new job draws its flips once and keeps them (mode 0600); the same job started again reads the same flips back', (t) => {
  const out = tempDir(t);
  const first = resolveLabelFlips(cfg(out, 'job-a', 1), labels(), quiet)!;
  const path = join(out, FLIPS_FILE);
  assert.equal(statSync(path).mode & 0o777, 0o600, 'as sensitive as the labels');
  assert.equal(first.jobId, 'job-a');
  assert.equal(first.flipProbability, flipProbability(1));
  assert.equal(first.seeded, false);
  // Binomial(4000, 0.269): mean 1076, sd 28.
  assert.ok(Math.abs(first.flipped.length - N * first.flipProbability) < 6 * Math.sqrt(N * first.flipProbability * (1 - first.flipProbability)), `${first.flipped.length} flips`);
  const bytes = readFileSync(path, 'utf8');
  for (let k = 0; k < 3; k++) {
    const again = resolveLabelFlips(cfg(out, 'job-a', 1), labels(), quiet)!;
    assert.deepEqual(again, first, 'the same flips, not a new draw');
  }
  assert.equal(readFileSync(path, 'utf8'), bytes, 'the file is not rewritten');
  assert.deepEqual(readLabelFlips(path), first);
  // A resumed job reads them back too.
  assert.deepEqual(resolveLabelFlips(cfg(out, 'job-a', 1, { resume: true }), labels(), quiet), first);
});

test('every way to a second draw for a job, or to its true labels, is refused with what to do', (t) => {
  const out = tempDir(t);
  resolveLabelFlips(cfg(out, 'job-a', 2), labels(), quiet);
  assert.throws(() => resolveLabelFlips(cfg(out, 'job-b', 2), labels(), quiet), configError(/label-flips\.json holds the label flips of job 'job-a': continue that job with --job job-a, or give job 'job-b' its own --out/));
  assert.throws(() => resolveLabelFlips(cfg(out, 'job-a'), labels(), quiet), configError(/job 'job-a' trains on labels flipped for label privacy .*: run it with --label-epsilon 2 again, or it would send the true labels/));
  assert.throws(() => resolveLabelFlips(cfg(out, 'job-a', 1), labels(), quiet), configError(/job 'job-a' flipped its labels with --label-epsilon 2 .*, not 1/));
  assert.throws(() => resolveLabelFlips(cfg(out, 'job-a', 2), labels(1), quiet), configError(/the training labels in labels\.train\.csv differ from the ones job 'job-a' flipped/));
  const shorter = labels();
  shorter.ids = shorter.ids.slice(1);
  shorter.y = shorter.y.slice(1);
  assert.throws(() => resolveLabelFlips(cfg(out, 'job-a', 2), shorter, quiet), configError(/differ from the ones job 'job-a' flipped/));
  // Another job without label privacy may use the folder; a resumed job never draws.
  assert.equal(resolveLabelFlips(cfg(out, 'job-b'), labels(), quiet), undefined);
  assert.throws(() => resolveLabelFlips(cfg(tempDir(t), 'job-a', 2, { resume: true }), labels(), quiet), configError(/--resume with --label-epsilon: the label flips of job 'job-a' are missing/));
});

test('seeded flips are the same for the same seed and say so', (t) => {
  const a = resolveLabelFlips(cfg(tempDir(t), 'job-s', 1, { seed: 'x/labels' }), labels(), quiet)!;
  const b = resolveLabelFlips(cfg(tempDir(t), 'job-s', 1, { seed: 'x/labels' }), labels(), quiet)!;
  assert.equal(a.seeded, true);
  assert.deepEqual(a.flipped, b.flipped);
  const c = resolveLabelFlips(cfg(tempDir(t), 'job-s', 1), labels(), quiet)!;
  assert.notDeepEqual(c.flipped, a.flipped);
});

test('readLabelFlips: each kind of malformed file is a DataError naming the file and the field', (t) => {
  const out = tempDir(t);
  const path = join(out, FLIPS_FILE);
  resolveLabelFlips(cfg(out, 'job-a', 1), labels(), quiet);
  const good = JSON.parse(readFileSync(path, 'utf8'));
  const cases: [(f: any) => void, RegExp][] = [
    [(f) => (f.format = 'admm-share-label-flips/1'), /label flips: format 'admm-share-label-flips\/1' has no keyed digest, so an edit to it cannot be detected; finish its job .* or start the job again in a new --out/],
    [(f) => (f.format = 'other'), /label flips: format: expected 'admm-share-label-flips\/2', got "other"/],
    [(f) => delete f.labelsDigest, /labelsDigest: Invalid input: expected string, received undefined/],
    [(f) => (f.extra = 1), /Unrecognized key: "extra"/],
    [(f) => (f.jobId = '../x'), /jobId: not a valid name \(letters, digits, \. _ -\)/],
    [(f) => (f.epsilon = -1), /epsilon: Too small: expected number to be >0/],
    [(f) => (f.flipProbability = 0.25), /flipProbability: 0\.25 is not 1 \/ \(1 \+ e\^1\)/],
    [(f) => (f.seeded = 'no'), /seeded: Invalid input: expected boolean/],
    [(f) => (f.labelsDigest = 'abc'), /labelsDigest: not a SHA-256 in hex/],
    [(f) => (f.rows = 0), /rows: Too small: expected number to be >=1/],
    [(f) => (f.flipped = {}), /flipped: Invalid input: expected array/],
    [(f) => (f.flipped = [3, 3]), /flipped\[1\]: 3 is not above flipped\[0\]/],
    [(f) => (f.flipped = [1, N]), new RegExp(`flipped\\[1\\]: ${N} is not a row of ${N}`)],
    [(f) => (f.flipped = [0.5]), /flipped\[0\]: Invalid input: expected int/],
  ];
  // Each edit signed again with the folder's key, so that the field itself is what is refused.
  const resealed = (p: string) => {
    const { mac: _, ...body } = JSON.parse(readFileSync(p, 'utf8'));
    writeFileSync(p, JSON.stringify(signed(out, body)));
    return readLabelFlips(p);
  };
  assertEachMalformed(path, good, cases, resealed);
  writeFileSync(path, '{"format": ');
  assert.throws(() => readLabelFlips(path), /not JSON/);
  assert.throws(() => readLabelFlips(join(out, 'none.json')), /label flips: cannot read it \(ENOENT\)/);
});

test('a job on flipped labels: the one-shot setup sends the flipped training labels in aligned order and p; test labels stay true and are never in a setup', () => {
  const y = labels().y;
  const flips: LabelFlips = {
    format: 'admm-share-label-flips/2',
    jobId: 'job-a',
    epsilon: 1,
    flipProbability: flipProbability(1),
    seeded: false,
    labelsDigest: '0'.repeat(64),
    rows: N,
    flipped: Uint32Array.of(0, 2, 5, 3999),
  };
  const flipped: Labels = { ...labels(), y: applyFlips(y, flips.flipped) };
  const testLabels: Labels = { file: 'labels.test.csv', ids: ['t0', 't1', 't2'], y: Float64Array.of(1, -1, 1) };
  // The job keeps label rows 5, 1, 0 and 7 (in that order) and test rows 2 and 0.
  const samples = {
    labelRows: { train: Uint32Array.of(5, 1, 0, 7), test: Uint32Array.of(2, 0) },
    keptKeys: { train: ['a', 'b', 'c', 'd'], test: ['e', 'f'] },
    dropped: { train: 0, test: 0 },
  };
  const config = { jobId: 'job-a', lambda: 1e-4, loss: 'logistic', maxRounds: 10, variant: 'exact', parties: ['p1', 'p2'] } as unknown as CoordinatorConfig;
  const job = buildJob(config, flipped, testLabels, samples, undefined, undefined, 'one-shot', flips);
  // Rows 5 and 0 were flipped (2 and 3999 are not in the job).
  assert.deepEqual(Array.from(job.y), [-y[5], y[1], -y[0], y[7]]);
  assert.deepEqual(job.labelPrivacy, { epsilon: 1, flipProbability: flipProbability(1), flipped: 2, seeded: false });
  assert.deepEqual(Array.from(job.yTest!), [1, 1], 'the true test labels');
  const setup = setupFor(job, 'p2', 'p1', { train: Uint32Array.of(3, 2, 1, 0), test: Uint32Array.of(1, 0) });
  assert.equal(setup.labelFlip, flipProbability(1));
  assert.deepEqual(Array.from(setup.labels), Array.from(job.y), 'the flipped labels, and only the training ones');
  assert.equal(Object.values(setup).filter((v) => v instanceof Float64Array).length, 1, 'no other vector of numbers (no test labels) in a setup');
  // Without label privacy: p = 0 and the labels as given.
  const plain = buildJob(config, labels(), testLabels, samples, undefined, undefined, 'admm');
  assert.equal(plain.setup.labelFlip, 0);
  assert.equal(plain.labelPrivacy, null);
  assert.equal(setupFor(plain, 'p2', undefined, { train: Uint32Array.of(0, 1, 2, 3), test: Uint32Array.of(0, 1) }).labels.length, 0, 'ADMM sends no labels');
});

test('a checkpoint keeps setup.labelFlip; one without it, or with a value outside [0, 0.5), is refused', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'checkpoint.bin');
  const n = 2;
  const v = () => new Float64Array(n);
  const cp = {
    jobId: 'job-a',
    round: 3,
    labelsDigest: 'd',
    samples: { labelRows: { train: Uint32Array.of(0, 1), test: new Uint32Array(0) }, dropped: { train: 0, test: 0 } },
    evaluationSkipped: null,
    setup: { type: 'setup' as const, jobId: 'job-a', lambda: 1e-4, loss: 'logistic' as const, rounds: 10, rho: 0.5, parties: 1, algorithm: 'admm' as const, labelFlip: flipProbability(2) },
    admm: { rho: 0.5, c: v(), z: v(), dualVar: v(), sum: v(), a: v(), t: v(), slope: v(), curvature: v(), prevShares: [v()] },
    replay: { round: 3, rho: 0.5, cs: [v()], previousShares: [v()], shares: [v()] },
    last: {
      stats: { primal: 0, dual: 0, epsPrimal: 1, epsDual: 1, rho: 0.5 },
      penaltySq: 0,
      converged: false,
      test: undefined,
      seconds: 1,
      roundSeconds: 1,
      bytes: { toCoordinator: 0, fromCoordinator: 0 },
      epsilonSpent: {},
    },
  };
  await writeCheckpoint(path, cp);
  assert.equal(readCheckpoint(path).setup.labelFlip, flipProbability(2));
  const { labelFlip: _, ...old } = cp.setup;
  await writeCheckpoint(path, { ...cp, setup: old as typeof cp.setup });
  assert.throws(() => readCheckpoint(path), (err: unknown) => err instanceof DataError && /setup\.labelFlip: Invalid input: expected number, received undefined/.test(err.message));
  await writeCheckpoint(path, { ...cp, setup: { ...cp.setup, labelFlip: 0.5 } });
  assert.throws(() => readCheckpoint(path), (err: unknown) => err instanceof DataError && /setup\.labelFlip: Too big: expected number to be <0\.5/.test(err.message));
});

test('the base rate baseline from flipped labels undoes the flips: (q - p) / (1 - 2 p)', () => {
  // 1000 training labels, 400 positive; flipped at p = 0.2 the expected share of positives is
  // 0.4 * 0.8 + 0.6 * 0.2 = 0.44: 440 positive flipped labels give back 0.4.
  const yFlipped = Float64Array.from({ length: 1000 }, (_, i) => (i < 440 ? 1 : -1));
  const yTest = Float64Array.of(1, -1, -1);
  const want = -(Math.log(0.4) + 2 * Math.log(0.6)) / 3;
  assert.ok(Math.abs(baseRateMetrics(yFlipped, yTest, 0.2).logLoss - want) < 1e-12);
  assert.ok(Math.abs(baseRateMetrics(yFlipped, yTest).logLoss - -(Math.log(0.44) + 2 * Math.log(0.56)) / 3) < 1e-12, 'without flips, the share as it is');
});
