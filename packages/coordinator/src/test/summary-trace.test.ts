import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { DataError } from '@admm-share/core';
import { tempDir } from '@admm-share/core/test-support';
import { type Summary, readSummary, writeSummary } from '../output/summary.js';
import { type TraceLine, TraceWriter, readTrace } from '../output/trace.js';
import { assertEachMalformed } from './malformed.js';

const quiet = pino({ level: 'silent' });

const admmSummary: Summary = {
  jobId: 'job-1',
  algorithm: 'admm',
  variant: 'exact',
  loss: 'logistic',
  lambda: 1e-4,
  rho: { initial: 1, final: 0.5 },
  alpha: 1.6,
  rounds: 12,
  reason: 'converged',
  converged: true,
  objective: 0.3251,
  objectiveFrom: 'noisy shares',
  residuals: { primal: 1e-5, dual: 2e-6 },
  // AUC is NaN with a one-class test set: JSON writes null, the reader gives NaN back.
  test: { logLoss: 0.33, accuracy: 0.85, auc: NaN },
  seconds: { total: 3.5, setup: 0.5, training: 3, perRound: 0.25 },
  bytes: { toCoordinator: 123456, fromCoordinator: 65432 },
  parties: [
    { id: 'p1', features: 66, rows: 100, testRows: 50 },
    { id: 'p2', features: 57, rows: 100, testRows: 0 },
  ],
  rows: { train: 100, test: 50 },
  droppedRows: 0,
  droppedTestRows: 2,
  alignment: { method: 'ecdh-psi', group: 'X25519 (Curve25519)', hashToCurve: 'h', labelIds: { train: 102, test: 52 }, seconds: 1.5 },
  classes: { negative: '<=50K', positive: '>50K' },
  peakMemoryBytes: 123_456_789,
  privacy: [
    { party: 'p1', mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, rounds: 20, sigma: 0.7, sensitivity: 0.1, accountant: 'rdp', seeded: false, epsilonSpent: 0.8 },
    { party: 'p2', mechanism: 'none', epsilon: null, delta: null, rounds: 1000, sigma: 0, sensitivity: 0, accountant: null, seeded: false, epsilonSpent: 0 },
  ],
  labelPrivacy: { epsilon: 1, flipProbability: 1 / (1 + Math.E), flipped: 27, seeded: true },
};

const sgdSummary: Summary = {
  ...admmSummary,
  algorithm: 'sgd',
  sgd: { batchSize: 64, lr: 0.1, lrDecay: 0 },
  alpha: 1,
  rho: { initial: 0, final: 0 },
  reason: 'max-rounds',
  converged: false,
  objectiveFrom: 'shares',
  residuals: null,
  test: undefined,
  evaluation: { skipped: 'no party has a test set' },
  labelPrivacy: null,
};
delete sgdSummary.test;

const trace: TraceLine[] = [
  { round: 1, objective: 0.69, primal: 0.1, dual: 0.2, rho: 1, seconds: 0.1, roundSeconds: 0.1, bytes: { toCoordinator: 10, fromCoordinator: 20 }, epsilonSpent: { p1: 0.1, p2: 0 } },
  { round: 2, objective: 0.5, primal: 0.01, dual: 0.02, rho: 0.5, seconds: 0.2, roundSeconds: 0.1, bytes: { toCoordinator: 10, fromCoordinator: 20 }, solver: { p2: { iterations: 23, residual: 4.5e-13 } }, test: { logLoss: 0.4, accuracy: 0.8, auc: NaN } },
  { round: 3, epoch: 3, objective: 0.45, lr: 0.05, steps: 6, seconds: 0.3, roundSeconds: 0.1, bytes: { toCoordinator: 0, fromCoordinator: 0 }, test: { rmse: 1.5 } },
];

function writeTrace(dir: string, lines: TraceLine[]): string {
  const w = new TraceWriter(dir, quiet, 10);
  for (const l of lines) w.write(l);
  w.close(true);
  return join(dir, 'trace.jsonl');
}

test('a summary and a trace written by the real writers read back equal (NaN metrics included); a resumed trace keeps its checked lines', (t) => {
  const dir = tempDir(t);
  for (const s of [admmSummary, sgdSummary]) assert.deepStrictEqual(readSummary(writeSummary(dir, s)), s);
  assert.deepStrictEqual(readTrace(writeTrace(dir, trace)), trace);

  // A resumed job keeps the lines up to its checkpoint from trace.jsonl.partial.
  const partial = new TraceWriter(dir, quiet, 10);
  for (const l of trace) partial.write(l);
  partial.close(false);
  const resumed = new TraceWriter(dir, quiet, 10, 2);
  resumed.close(true);
  assert.deepStrictEqual(readTrace(join(dir, 'trace.jsonl')), trace.slice(0, 2));
});

test('readSummary: each kind of malformed summary is a DataError naming the file and the field', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'summary.json');
  const good = JSON.parse(readFileSync(writeSummary(dir, admmSummary), 'utf8'));
  const cases: [(s: any) => void, RegExp][] = [
    [(s) => delete s.lambda, /summary\.json: summary: lambda: Invalid input: expected number, received undefined/],
    [(s) => (s.rounds = '12'), /rounds: Invalid input: expected number, received string/],
    [(s) => (s.objective = 'NaN'), /objective: Invalid input: expected number, received string/],
    [(s) => (s.objective = null), /objective: Invalid input: expected number, received null/],
    [(s) => (s.lambda = -1), /lambda: Too small: expected number to be >=0/],
    [(s) => (s.extra = 1), /summary: Unrecognized key: "extra"/],
    [(s) => (s.seconds.wall = 1), /seconds: Unrecognized key: "wall"/],
    [(s) => delete s.bytes.toCoordinator, /bytes\.toCoordinator: Invalid input: expected number, received undefined/],
    [(s) => (s.algorithm = 'newton'), /algorithm: Invalid option: expected one of "admm"\|"sgd"/],
    [(s) => (s.variant = 'fast'), /variant: Invalid option: expected one of "exact"\|"paper"/],
    [(s) => (s.reason = 'tired'), /reason: Invalid option: expected one of "converged"/],
    [(s) => (s.privacy[0].mechanism = 'laplace'), /privacy\[0\]\.mechanism: Invalid option: expected one of "score-release"\|"gaussian-share"\|"paper"\|"none"/],
    [(s) => (s.privacy[1].accountant = 'zcdp'), /privacy\[1\]\.accountant: Invalid option/],
    [(s) => (s.parties[1].id = '../etc'), /parties\[1\]\.id: not a valid name/],
    [(s) => (s.test.accuracy = 1.5), /test\.accuracy: Too big: expected number to be <=1/],
    [(s) => (s.test.f1 = 0.5), /test: Unrecognized key: "f1"/],
    [(s) => (s.residuals = [1, 2]), /residuals: Invalid input: expected object, received array/],
    [(s) => (s.evaluation = { skipped: 3 }), /evaluation\.skipped: Invalid input: expected string, received number/],
    [(s) => (s.sgd = { batchSize: 1, lr: 1, lrDecay: 0 }), /sgd: is not expected with algorithm 'admm'/],
    [(s) => (s.converged = false), /converged: is false with reason 'converged'/],
    [(s) => delete s.labelPrivacy, /labelPrivacy: Invalid input: expected object, received undefined/],
    [(s) => (s.labelPrivacy.epsilon = 0), /labelPrivacy\.epsilon: Too small: expected number to be >0/],
    [(s) => (s.labelPrivacy.flipProbability = 0.5), /labelPrivacy\.flipProbability: Too big: expected number to be <0\.5/],
    [(s) => (s.labelPrivacy.flipProbability = -0.1), /labelPrivacy\.flipProbability: Too small: expected number to be >=0/],
    [(s) => (s.labelPrivacy.flipped = 101), /labelPrivacy\.flipped: is 101, more than the 100 training rows/],
    [(s) => (s.labelPrivacy.flipped = 2.5), /labelPrivacy\.flipped: Invalid input: expected int, received number/],
    [(s) => (s.labelPrivacy.seeded = 'yes'), /labelPrivacy\.seeded: Invalid input: expected boolean, received string/],
    [(s) => (s.labelPrivacy.count = 3), /labelPrivacy: Unrecognized key: "count"/],
    [(s) => (s.loss = 'squared'), /labelPrivacy: is not expected with loss 'squared'/],
  ];
  assertEachMalformed(path, good, cases, readSummary);
  writeFileSync(path, '{"jobId": ');
  assert.throws(() => readSummary(path), /summary\.json: summary: not JSON/);
  writeFileSync(path, '[]');
  assert.throws(() => readSummary(path), /summary: Invalid input: expected object, received array/);
  assert.throws(() => readSummary(join(dir, 'none.json')), /none\.json: summary: cannot read it \(ENOENT\)/);
});

test('readTrace: a malformed line is a DataError naming the file, its line number and the field', (t) => {
  const dir = tempDir(t);
  const path = writeTrace(dir, trace);
  const [l1, l2] = readFileSync(path, 'utf8').split('\n');
  const cases: [string, RegExp][] = [
    ['{"round": 3, "objective"', /trace\.jsonl:3: trace line: not JSON/],
    [l2.replace('"round":2', '"round":0'), /trace\.jsonl:3: trace line: round: Too small: expected number to be >=1/],
    [l2.replace('"objective":0.5', '"objective":"NaN"'), /:3: .*objective: Invalid input: expected number, received string/],
    [l2.replace('"objective":0.5,', ''), /:3: .*objective: Invalid input: expected number, received undefined/],
    [l2.replace('"rho":0.5', '"rho":0'), /:3: .*rho: Too small: expected number to be >0/],
    [l2.replace('"round":2', '"round":2,"note":"x"'), /:3: .*Unrecognized key: "note"/],
    [l2.replace('"accuracy":0.8', '"accuracy":"0.8"'), /:3: .*test\.accuracy: Invalid input/],
    [l1.replace('"p2":0', '"p2":-1'), /:3: .*epsilonSpent\.p2: Too small: expected number to be >=0/],
    [l1.replace('"p2":0', '"bad party":0'), /:3: .*epsilonSpent\.bad party: Invalid key in record/],
    [l2.replace('"iterations":23', '"iterations":2.5'), /:3: .*solver\.p2\.iterations: Invalid input: expected int/],
    [l2.replace('"residual":4.5e-13', '"residual":-1'), /:3: .*solver\.p2\.residual: Too small/],
    [l2.replace(',"residual":4.5e-13', ''), /:3: .*solver\.p2\.residual: Invalid input: expected number, received undefined/],
    ['[1, 2]', /:3: trace line: Invalid input: expected object, received array/],
  ];
  for (const [line, message] of cases) {
    writeFileSync(path, `${l1}\n\n${line}\n`); // the blank line counts
    assert.throws(() => readTrace(path), (err: unknown) => err instanceof DataError && err.line === 3 && message.test(err.message), String(message));
  }
});
