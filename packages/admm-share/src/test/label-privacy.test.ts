// Label privacy at the coordinator (--label-epsilon) over real processes. The coordinator's flips
// are read back from the job's label-flips.json, and everything it trained is checked against
// an independent computation on those flipped labels: ADMM reaches the central optimum of the
// corrected loss (Newton's method), the active party's one-shot local model is a stationary
// point of the corrected loss (its gradient, written out here), and the test metrics are those
// of the true test labels. Restarts (kill -9, then --resume; and a one-shot job started again
// with the same --job) reuse the flips; bad flags are refused with exit 64.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyFlips, classificationMetrics, csrSliceColumns, fitCentral, flipCorrectedLogistic, logistic, syntheticDataset } from '@admm-share/core';
import { BELOW_OPTIMUM_RTOL, assertNearOptimum } from '@admm-share/core/test-support';
import { readTrace } from '@admm-share/coordinator';
import { writeVerticalSplit } from '../split.js';
import { gate, roundMessage } from './gate.js';
import { BIN, type Proc, killAll, run, tempDir } from './procs.js';
import { modelScores } from './model-scores.js';

after(killAll);

/** The ridge weight with --label-epsilon when --lambda is not given (core's LABEL_PRIVACY_LAMBDA, docs/privacy.md 10.4). */
const LAMBDA = 1e-3;

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

/** The flipped training labels of a job, from its label-flips.json and the true labels in label-file order. */
function flippedLabels(out: string, y: Float64Array): { y: Float64Array; p: number; flips: number[]; bytes: string } {
  const bytes = readFileSync(join(out, 'label-flips.json'), 'utf8');
  const f = JSON.parse(bytes);
  assert.equal(f.rows, y.length);
  return { y: applyFlips(y, Uint32Array.from(f.flipped)), p: f.flipProbability, flips: f.flipped, bytes };
}

test('simulate --label-epsilon: ADMM over real processes reaches the central optimum of the corrected loss on the flipped labels; test metrics use the true test labels', async (t) => {
  const out = tempDir(t);
  const s = syntheticDataset(); // what simulate uses without --data
  const n = s.train.ids.length;
  const p = run(BIN.share, ['simulate', '--out', out, '--rounds', '400', '--rho', String(0.1 / n), '--no-baselines', '--label-epsilon', '1']);
  assert.equal((await p.exit).code, 0, p.stderr());
  assert.match(p.stdout(), /label privacy: label epsilon 1 at the coordinator: randomized response flips each training label with probability 0\.2689 once \(flips from the OS CSPRNG\)/);

  const flipped = flippedLabels(out, s.train.y);
  assert.equal(flipped.p, 1 / (1 + Math.E));
  const summary = readJson(join(out, 'summary.json'));
  assert.deepEqual(summary.labelPrivacy, { epsilon: 1, flipProbability: flipped.p, flipped: flipped.flips.length, seeded: false });
  assert.equal(summary.lambda, LAMBDA, 'the default lambda with label privacy');
  assert.match(p.stdout(), /loss corrected for the flips, lambda 0\.001;/);
  assert.match(p.stdout(), new RegExp(`label privacy: label epsilon 1, randomized response flipped ${flipped.flips.length} of ${n} training labels \\(probability 0\\.2689\\), loss corrected for the flips`));
  // Binomial(2000, 0.269): mean 538, sd 19.8.
  assert.ok(Math.abs(flipped.flips.length - n * flipped.p) < 6 * Math.sqrt(n * flipped.p * (1 - flipped.p)), `${flipped.flips.length} flips`);

  const corrected = fitCentral(s.train.X, flipped.y, flipCorrectedLogistic(flipped.p), LAMBDA);
  assertNearOptimum(summary.objective, corrected.objective, 1e-6, 'final objective');
  assert.equal(summary.converged, true);
  const trace = readTrace(join(out, 'trace.jsonl'));
  for (const r of trace) assert.ok(r.objective >= corrected.objective - BELOW_OPTIMUM_RTOL * Math.abs(corrected.objective), `round ${r.round} below the optimum`);
  // The check can fail: the uncorrected loss on the same flipped labels, and the corrected loss
  // on the true labels, have other optima, far beyond the tolerance.
  const uncorrected = fitCentral(s.train.X, flipped.y, logistic, LAMBDA);
  const onTruth = fitCentral(s.train.X, s.train.y, flipCorrectedLogistic(flipped.p), LAMBDA);
  for (const other of [uncorrected, onTruth]) assert.ok(Math.abs(other.objective - corrected.objective) > 1e-3 * Math.abs(corrected.objective), `${other.objective} vs ${corrected.objective}`);

  // Each party holds its block of the corrected central model.
  const x = new Float64Array(s.train.X.cols);
  let offset = 0;
  for (const [m, d] of s.blocks.entries()) {
    const model = readJson(join(out, `model-party-${m + 1}.json`));
    for (let j = 0; j < d; j++) {
      assert.ok(Math.abs(model.coefficients[j] - corrected.x[offset + j]) < 1e-3, `party ${m + 1} coefficient ${j}`);
      x[offset + j] = model.coefficients[j];
    }
    offset += d;
  }
  // The test metrics are those of the parties' models on the TRUE test labels (never flipped).
  const test = classificationMetrics(modelScores(s.test.X, Array.from(x)), s.test.y);
  for (const k of ['logLoss', 'accuracy', 'auc'] as const) assert.ok(Math.abs(summary.test[k] - test[k]) < 1e-9, `${k}: ${summary.test[k]} vs ${test[k]}`);
  // Another simulate into the same --out is another job with flips of its own (not refused as the first job's).
  const again = run(BIN.share, ['simulate', '--out', out, '--rounds', '3', '--no-baselines', '--label-epsilon', '1']);
  assert.equal((await again.exit).code, 0, again.stderr());
  assert.notEqual(readJson(join(out, 'summary.json')).jobId, summary.jobId);
});

test('simulate --algorithm sgd --label-epsilon (seeded flips): the reported objective is the corrected one of the parties\' models, and SGD heads for the corrected optimum', async (t) => {
  const out = tempDir(t);
  const s = syntheticDataset();
  const p = run(BIN.share, ['simulate', '--algorithm', 'sgd', '--rounds', '15', '--intercept', '--out', out, '--no-baselines', '--label-epsilon', '1', '--seed', 'sgd-test']);
  assert.equal((await p.exit).code, 0, p.stderr());
  assert.match(p.stdout(), /SEEDED flips \('sgd-test\/labels'\): predictable, for experiments only/);
  const flipped = flippedLabels(out, s.train.y);
  const summary = readJson(join(out, 'summary.json'));
  assert.equal(summary.algorithm, 'sgd');
  assert.equal(summary.labelPrivacy.seeded, true);
  const x: number[] = [];
  let b = 0;
  for (let m = 1; m <= s.blocks.length; m++) {
    const model = readJson(join(out, `model-party-${m}.json`));
    x.push(...model.coefficients);
    if (model.intercept !== null) b = model.intercept;
  }
  const lambda = LAMBDA;
  const c = flipped.p / (1 - 2 * flipped.p);
  /** The corrected training objective of the model (coefficients w, intercept w0), written out. */
  const correctedObjective = (w: ArrayLike<number>, w0: number) => {
    const t1 = modelScores(s.train.X, Array.from(w));
    let f = 0;
    for (let i = 0; i < t1.length; i++) f += Math.log1p(Math.exp(-flipped.y[i] * (t1[i] + w0))) - c * flipped.y[i] * (t1[i] + w0);
    return f / t1.length + (lambda / 2) * Array.from(w).reduce((a, v) => a + v * v, 0);
  };
  assert.ok(Math.abs(correctedObjective(x, b) - summary.objective) < 1e-9, `reported ${summary.objective}, the corrected objective of the models ${correctedObjective(x, b)}`);
  const corrected = fitCentral(s.train.X, flipped.y, flipCorrectedLogistic(flipped.p), lambda, { intercept: true });
  const plain = fitCentral(s.train.X, flipped.y, logistic, lambda, { intercept: true });
  // SGD with a decaying step is approximate, but it heads for the corrected optimum: an SGD on
  // the plain loss would end near the plain optimum, whose corrected objective is far higher
  // (0.48 to 0.57 against optima of 0.28 to 0.50 over six draws of the flips; SGD reached
  // within 0.03 of the optimum in each).
  const atPlain = correctedObjective(plain.x, plain.intercept);
  assert.ok(summary.objective >= corrected.objective * (1 - BELOW_OPTIMUM_RTOL), 'not below the optimum');
  assert.ok(summary.objective - corrected.objective < 0.5 * (atPlain - corrected.objective), `SGD ${summary.objective}, corrected optimum ${corrected.objective}, the plain optimum's corrected objective ${atPlain}`);
});

function smallSet(dir: string, seed: string) {
  const s = syntheticDataset({ trainRows: 500, testRows: 100, seed });
  return { s, files: writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test) };
}

test('kill -9 the coordinator of a label-private ADMM job and --resume it: the flips are read back, not drawn again, and the job ends at the corrected optimum on them', async (t) => {
  const dir = tempDir(t);
  const { s, files } = smallSet(dir, 'label-resume');
  const out = join(dir, 'out');
  const n = s.train.ids.length;
  const coordinator = (extra: string[]) =>
    run(BIN.coordinator, [
      '--port', '0', '--labels', files.labels, '--test-labels', files.testLabels!, '--parties', files.parties.map((f) => f.id).join(','), '--out', out,
      '--rounds', '300', '--rho', String(0.1 / n), '--tol-abs', '0', '--tol-rel', '0', '--job', 'label-resume', '--label-epsilon', '2', '--checkpoint-every', '5', ...extra,
    ]);
  const first = coordinator([]);
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  const drawn = flippedLabels(out, s.train.y); // written before the coordinator listens
  assert.ok(first.records.some((r) => typeof r.msg === 'string' && r.msg.startsWith('label privacy: randomized response')));
  const relay = await gate(port);
  t.after(() => relay.close());
  // Round 23 is held back from party-1; the coordinator is killed there once its background
  // writer has put a checkpoint on disk (killed as round 23 was sent, on a loaded machine it
  // could have left none).
  let held!: () => void;
  const round23 = new Promise<void>((resolve) => (held = resolve));
  relay.before(roundMessage(23), () => {
    held();
    return 'drop';
  });
  const parties = files.parties.map((f, m) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${m === 0 ? relay.port : port}`, '--id', f.id, '--data', f.train, '--test', f.test!, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`), '--reconnect-timeout', '30000']),
  );
  await round23;
  const deadline = Date.now() + 30_000;
  while (!existsSync(join(out, 'checkpoint.bin')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  first.child.kill('SIGKILL');
  assert.equal((await first.exit).signal, 'SIGKILL');
  // Without --label-epsilon, or with another one, the job is refused rather than trained on other labels.
  for (const [extra, message] of [
    [['--label-epsilon', '3'], /job 'label-resume' flipped its labels with --label-epsilon 2 .*, not 3/],
  ] as const) {
    const bad = coordinator([...extra, '--resume', '--port', '0']);
    assert.equal((await bad.exit).code, 64, bad.stderr());
    assert.match(bad.stderr(), message);
  }
  const noFlag = run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--test-labels', files.testLabels!, '--parties', files.parties.map((f) => f.id).join(','), '--out', out, '--resume']);
  assert.equal((await noFlag.exit).code, 64);
  assert.match(noFlag.stderr(), /--resume: the checkpointed job trains on labels flipped with probability 0\.119\d* \(label privacy\): resume it with its --label-epsilon/);

  const second = coordinator(['--resume', '--port', String(port)]);
  await second.waitFor((r) => r.msg === 'label privacy: the flips of this job are reused, not drawn again', 'reuse');
  for (const p of [second, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.ok(second.records.some((r) => r.msg === 'resuming from checkpoint; waiting for the parties to rejoin'));
  assert.ok(!second.records.some((r) => typeof r.msg === 'string' && r.msg.startsWith('label privacy: randomized response')), 'no second draw');
  assert.equal(readFileSync(join(out, 'label-flips.json'), 'utf8'), drawn.bytes, 'the flips file is unchanged');
  const summary = readJson(join(out, 'summary.json'));
  assert.equal(summary.rounds, 300);
  assert.equal(summary.labelPrivacy.flipped, drawn.flips.length);
  assertNearOptimum(summary.objective, fitCentral(s.train.X, drawn.y, flipCorrectedLogistic(drawn.p), LAMBDA).objective, 1e-5, 'resumed objective');
  assert.match(second.stdout(), /corrected objective .*label privacy: label epsilon 2, randomized response flipped \d+ of 500 training labels/);
});

test('a label-private one-shot job killed before the fit and started again with the same --job: the same flips; the active party fits the corrected loss on them', async (t) => {
  const dir = tempDir(t);
  const { s, files } = smallSet(dir, 'label-oneshot');
  const out = join(dir, 'out');
  const n = s.train.ids.length;
  const coordinator = () =>
    run(BIN.coordinator, ['--port', '0', '--job', 'label-oneshot', '--labels', files.labels, '--test-labels', files.testLabels!, '--parties', files.parties.map((f) => f.id).join(','), '--out', out, '--active-party', 'party-1', '--label-epsilon', '1']);
  const first = coordinator();
  const { port } = (await first.waitFor((r) => r.msg === 'listening')) as { port: number };
  const drawn = flippedLabels(out, s.train.y);
  const relay = await gate(port);
  t.after(() => relay.close());
  relay.before((m) => m.type === 'fit', () => {
    first.child.kill('SIGKILL');
    return 'drop';
  });
  const parties: Proc[] = files.parties.map((f, m) =>
    run(BIN.party, ['--coordinator', `ws://127.0.0.1:${relay.port}`, '--id', f.id, '--data', f.train, '--test', f.test!, '--ids', 'first', '--model', join(out, `model-${f.id}.json`), ...(m === 0 ? ['--role', 'active'] : ['--epsilon', '2', '--release-test-scores'])]),
  );
  await first.exit;
  const second = coordinator();
  relay.target = ((await second.waitFor((r) => r.msg === 'listening')) as { port: number }).port;
  for (const p of [second, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  assert.equal(readFileSync(join(out, 'label-flips.json'), 'utf8'), drawn.bytes, 'the flips file is unchanged');
  assert.ok(second.records.some((r) => r.msg === 'label privacy: the flips of this job are reused, not drawn again'));
  const summary = readJson(join(out, 'summary.json'));
  assert.equal(summary.algorithm, 'one-shot');
  assert.equal(summary.labelPrivacy.flipped, drawn.flips.length);

  // The active party's local-only model: [party-1's rows scaled to norm <= 1, 1], fitted by it
  // on the flipped labels it was sent. Its gradient under the corrected loss vanishes, its
  // gradient under the plain logistic loss does not; its objective is the one reported.
  const active = readJson(join(out, 'model-party-1.json'));
  assert.equal(active.oneShot.labelFlip, drawn.p);
  const local = active.oneShot.local;
  const X1 = csrSliceColumns(s.train.X, 0, s.blocks[0]);
  const t1 = modelScores(X1, local.coefficients, true).map((v) => v + local.intercept);
  const lambda = LAMBDA;
  const c = drawn.p / (1 - 2 * drawn.p);
  const gradient = (correction: number) => {
    const g = new Float64Array(s.blocks[0] + 1);
    for (let i = 0; i < n; i++) {
      const y = drawn.y[i];
      const d = (-y / (1 + Math.exp(y * t1[i])) - correction * y) / n;
      let sq = 0;
      for (let k = X1.indptr[i]; k < X1.indptr[i + 1]; k++) sq += X1.values[k] ** 2;
      const scale = sq > 1 ? 1 / Math.sqrt(sq) : 1;
      for (let k = X1.indptr[i]; k < X1.indptr[i + 1]; k++) g[X1.indices[k]] += d * X1.values[k] * scale;
      g[s.blocks[0]] += d;
    }
    for (let j = 0; j < s.blocks[0]; j++) g[j] += lambda * local.coefficients[j];
    return Math.max(...g.map(Math.abs));
  };
  assert.ok(gradient(c) < 1e-8, `corrected gradient ${gradient(c)}`);
  assert.ok(gradient(0) > 1e-3, `plain gradient ${gradient(0)}: the check tells the two losses apart`);
  let objective = 0;
  for (let i = 0; i < n; i++) objective += Math.log1p(Math.exp(-drawn.y[i] * t1[i])) - c * drawn.y[i] * t1[i];
  objective = objective / n + (lambda / 2) * local.coefficients.reduce((a: number, v: number) => a + v * v, 0);
  assert.ok(Math.abs(objective - summary.oneShot.local.objective) < 1e-9, `${objective} vs ${summary.oneShot.local.objective}`);
});

test('bad label privacy flags stop the coordinator and simulate with exit 64 and a clear message', async (t) => {
  const dir = tempDir(t);
  const { files } = smallSet(dir, 'label-flags');
  const base = ['--port', '0', '--labels', files.labels, '--parties', 'party-1,party-2,party-3', '--out', join(dir, 'out')];
  const cases: [string[], RegExp][] = [
    [['--label-epsilon', '1', '--loss', 'squared'], /--label-epsilon needs --loss logistic .*not squared/],
    [['--label-epsilon', '0'], /--label-epsilon must be a positive number, got 0/],
    [['--label-epsilon', '-1'], /--label-epsilon must be a positive number, got -1/],
    [['--label-epsilon', 'abc'], /--label-epsilon must be a positive number, got NaN/],
    [['--label-epsilon', 'Infinity'], /--label-epsilon must be a positive number, got Infinity/],
    [['--label-epsilon', '1', '--lambda', '0'], /--label-epsilon needs --lambda > 0: the loss corrected for flipped labels is unbounded below without the ridge term/],
    [['--label-seed', 's'], /--label-seed needs --label-epsilon/],
  ];
  for (const [extra, message] of cases) {
    const p = run(BIN.coordinator, [...base, ...extra]);
    assert.equal((await p.exit).code, 64, `${extra.join(' ')}: ${p.stderr()}`);
    assert.match(p.stderr(), message, extra.join(' '));
  }
  for (const bad of ['abc', '0']) {
    const p = run(BIN.share, ['simulate', '--out', join(dir, `sim-${bad}`), '--label-epsilon', bad]);
    assert.equal((await p.exit).code, 64, p.stderr());
    assert.match(p.stderr(), /--label-epsilon must be a positive number/);
  }
});
