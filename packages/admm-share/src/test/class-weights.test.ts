// Class weights (--class-weight) over real processes, on an imbalanced set written here (about
// 10 % positives). Everything is checked against an independent computation: the balanced
// weights counted here, the weighted central optimum (Newton's method) that ADMM must reach, the
// minority class's recall of the parties' models, the weighted objective of SGD's models and the
// stationarity of the one-shot active party's local model under the weighted loss (its gradient
// written out). Bad flags stop the coordinator and simulate with exit 64.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type LabelledSet, classWeighted, csrFromDense, csrSliceColumns, fitCentral, logistic } from '@admm-share/core';
import { assertNearOptimum, normal, seeded } from '@admm-share/core/test-support';
import { BIN, killAll, run, tempDir } from './procs.js';
import { modelScores } from './model-scores.js';

after(killAll);

const LAMBDA = 1e-3;
const D = 8;
const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

/** Rows of D Gaussian features, labels from a logistic model whose offset leaves about 10 % positives. */
function imbalanced(seed: string, n: number): LabelledSet {
  const rand = seeded(seed);
  const beta = [1.5, -1, 0.8, 0.5, 1.2, -0.7, 0.3, 0.9];
  const rows: number[][] = [];
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = Array.from({ length: D }, () => normal(rand));
    rows.push(x);
    const score = x.reduce((a, v, j) => a + v * beta[j], 0) - 4.2;
    y[i] = rand() < 1 / (1 + Math.exp(-score)) ? 1 : -1;
  }
  return { ids: rows.map((_, i) => String(i + 1)), X: csrFromDense(rows, D), y };
}

function writeLibsvm(path: string, s: LabelledSet): void {
  const lines: string[] = [];
  for (let i = 0; i < s.X.rows; i++) {
    const feats: string[] = [];
    for (let k = s.X.indptr[i]; k < s.X.indptr[i + 1]; k++) feats.push(`${s.X.indices[k] + 1}:${s.X.values[k]}`);
    lines.push(`${s.y[i] > 0 ? 1 : -1} ${feats.join(' ')}`);
  }
  writeFileSync(path, lines.join('\n') + '\n');
}

const train = imbalanced('cw-train', 1200);
const test_ = imbalanced('cw-test', 600);
const positives = train.y.reduce((a, v) => a + (v > 0 ? 1 : 0), 0);
/** scikit-learn's balanced weights, N / (2 N_c), counted here. */
const BALANCED = { negative: train.y.length / (2 * (train.y.length - positives)), positive: train.y.length / (2 * positives) };

function dataFiles(dir: string): string[] {
  writeLibsvm(join(dir, 'train.libsvm'), train);
  writeLibsvm(join(dir, 'test.libsvm'), test_);
  return ['--data', join(dir, 'train.libsvm'), '--test', join(dir, 'test.libsvm'), '--split', '4,4'];
}

/** The model the parties of a run hold, as coefficients over the D features and the intercept. */
function jointModel(out: string): { x: number[]; b: number } {
  const x: number[] = [];
  let b = 0;
  for (const m of [1, 2]) {
    const model = readJson(join(out, `model-party-${m}.json`));
    x.push(...model.coefficients);
    if (model.intercept !== null) b = model.intercept;
  }
  return { x, b };
}

/** Share of the test set's positives that a model scores above 0. */
function recall({ x, b }: { x: number[]; b: number }): number {
  const t = modelScores(test_.X, x);
  let hit = 0;
  let pos = 0;
  for (let i = 0; i < t.length; i++)
    if (test_.y[i] > 0) {
      pos++;
      if (t[i] + b > 0) hit++;
    }
  return hit / pos;
}

test('simulate --class-weight balanced on a set of ~10 % positives: ADMM reaches the weighted central optimum, the summary records the weights, and the minority class\'s recall rises over the unweighted run', async (t) => {
  assert.ok(positives > 0.06 * train.y.length && positives < 0.14 * train.y.length, `positives: ${positives} of ${train.y.length}`);
  const dir = tempDir(t);
  const data = dataFiles(dir);
  const n = train.y.length;
  const common = ['simulate', ...data, '--intercept', '--lambda', String(LAMBDA), '--rounds', '500', '--rho', String(0.1 / n)];
  const weightedOut = join(dir, 'balanced');
  const plainOut = join(dir, 'plain');
  const weighted = run(BIN.share, [...common, '--out', weightedOut, '--class-weight', 'balanced']);
  assert.equal((await weighted.exit).code, 0, weighted.stderr());
  const plain = run(BIN.share, [...common, '--out', plainOut, '--no-baselines']);
  assert.equal((await plain.exit).code, 0, plain.stderr());

  const summary = readJson(join(weightedOut, 'summary.json'));
  assert.deepEqual(summary.classWeights, { mode: 'balanced', negative: { label: '-1', weight: BALANCED.negative }, positive: { label: '1', weight: BALANCED.positive } });
  assert.equal(readJson(join(plainOut, 'summary.json')).classWeights, undefined, 'unweighted: no classWeights');
  const central = fitCentral(train.X, train.y, classWeighted(logistic, BALANCED), LAMBDA, { intercept: true });
  assert.equal(summary.converged, true);
  assertNearOptimum(summary.objective, central.objective, 1e-6, 'weighted ADMM objective');
  // The reported objective is the weighted one of the parties' models, written out here.
  const model = jointModel(weightedOut);
  const scores = modelScores(train.X, model.x);
  let f = 0;
  for (let i = 0; i < n; i++) {
    const m = train.y[i] * (scores[i] + model.b);
    f += (train.y[i] > 0 ? BALANCED.positive : BALANCED.negative) * (m > 0 ? Math.log1p(Math.exp(-m)) : -m + Math.log1p(Math.exp(m)));
  }
  f = f / n + (LAMBDA / 2) * model.x.reduce((a, v) => a + v * v, 0);
  assertNearOptimum(f, central.objective, 1e-6, "the weighted objective of the parties' models");
  // simulate's own central baseline is the weighted fit too; the unweighted optimum is elsewhere.
  assert.ok(Math.abs(readJson(join(weightedOut, 'simulation.json')).baselines.central.objective - central.objective) < 1e-9 * central.objective, 'simulate fits the baseline with the weights');
  const unweighted = fitCentral(train.X, train.y, logistic, LAMBDA, { intercept: true });
  assert.ok(Math.abs(readJson(join(plainOut, 'summary.json')).objective - unweighted.objective) < 1e-5 * unweighted.objective, 'the plain run is at the plain optimum');
  assert.ok(Math.abs(unweighted.objective - central.objective) > 1e-2, 'the two optima differ: the check can fail');

  const balancedRecall = recall(model);
  const plainRecall = recall(jointModel(plainOut));
  assert.ok(balancedRecall > plainRecall + 0.15, `recall of the positives: balanced ${balancedRecall}, unweighted ${plainRecall}`);
});

test('one-shot with a private passive party and an active party, --class-weight balanced: the summary and the active model record the weights, and its local-only model is stationary under the weighted loss', async (t) => {
  const dir = tempDir(t);
  const out = join(dir, 'out');
  const p = run(BIN.share, ['simulate', ...dataFiles(dir), '--out', out, '--epsilon', '2', '--seed', 'cw-one-shot', '--lambda', String(LAMBDA), '--class-weight', 'balanced']);
  assert.equal((await p.exit).code, 0, p.stderr());
  const summary = readJson(join(out, 'summary.json'));
  assert.equal(summary.algorithm, 'one-shot');
  assert.equal(summary.oneShot.activeParty, 'party-1');
  assert.deepEqual(summary.classWeights, { mode: 'balanced', negative: { label: '-1', weight: BALANCED.negative }, positive: { label: '1', weight: BALANCED.positive } });
  const active = readJson(join(out, 'model-party-1.json'));
  assert.deepEqual(active.oneShot.classWeights, BALANCED);
  assert.equal(readJson(join(out, 'model-party-2.json')).oneShot.classWeights, undefined, 'the passive party is not sent the weights');

  // The local-only model on [party-1's rows scaled to norm <= 1, 1]: its gradient under the
  // weighted loss vanishes, under the unweighted one it does not.
  const local = active.oneShot.local;
  const X1 = csrSliceColumns(train.X, 0, 4);
  const n = train.y.length;
  const s = modelScores(X1, local.coefficients, true).map((v) => v + local.intercept);
  const gradient = (w: { negative: number; positive: number }) => {
    const g = new Float64Array(5);
    for (let i = 0; i < n; i++) {
      const y = train.y[i];
      const d = ((y > 0 ? w.positive : w.negative) * (-y / (1 + Math.exp(y * s[i])))) / n;
      let sq = 0;
      for (let k = X1.indptr[i]; k < X1.indptr[i + 1]; k++) sq += X1.values[k] ** 2;
      const scale = sq > 1 ? 1 / Math.sqrt(sq) : 1;
      for (let k = X1.indptr[i]; k < X1.indptr[i + 1]; k++) g[X1.indices[k]] += d * X1.values[k] * scale;
      g[4] += d;
    }
    for (let j = 0; j < 4; j++) g[j] += LAMBDA * local.coefficients[j];
    return Math.max(...g.map(Math.abs));
  };
  assert.ok(gradient(BALANCED) < 1e-8, `weighted gradient ${gradient(BALANCED)}`);
  assert.ok(gradient({ negative: 1, positive: 1 }) > 1e-3, `unweighted gradient ${gradient({ negative: 1, positive: 1 })}: the check tells the two apart`);
});

test('one-shot without an active party: the coordinator fits the combination with the class weights (balanced weights lift its intercept well above the unweighted fit\'s)', async (t) => {
  const dir = tempDir(t);
  const data = dataFiles(dir);
  const common = ['simulate', ...data, '--epsilon', '2', '--seed', 'cw-no-active', '--active-party', 'none', '--lambda', String(LAMBDA), '--no-baselines'];
  const weighted = run(BIN.share, [...common, '--out', join(dir, 'balanced'), '--class-weight', 'balanced']);
  assert.equal((await weighted.exit).code, 0, weighted.stderr());
  const plain = run(BIN.share, [...common, '--out', join(dir, 'plain')]);
  assert.equal((await plain.exit).code, 0, plain.stderr());
  const [w, p] = ['balanced', 'plain'].map((d) => readJson(join(dir, d, 'summary.json')));
  assert.equal(w.oneShot.activeParty, null);
  assert.equal(w.classWeights.mode, 'balanced');
  // The same releases (seeded noise), fitted with and without the weights: balanced weights make
  // the two classes weigh alike, so the intercept moves up from about the log-odds of ~10 %.
  assert.ok(p.oneShot.intercept < -1.5, `unweighted intercept ${p.oneShot.intercept}`);
  assert.ok(w.oneShot.intercept > p.oneShot.intercept + 1, `balanced intercept ${w.oneShot.intercept}, unweighted ${p.oneShot.intercept}`);
});

test('simulate --algorithm sgd --class-weight 1=5: the reported objective is the weighted objective of the parties\' models', async (t) => {
  const dir = tempDir(t);
  const out = join(dir, 'out');
  const p = run(BIN.share, ['simulate', ...dataFiles(dir), '--out', out, '--algorithm', 'sgd', '--rounds', '4', '--intercept', '--lambda', String(LAMBDA), '--class-weight', '1=5', '--no-baselines']);
  assert.equal((await p.exit).code, 0, p.stderr());
  const summary = readJson(join(out, 'summary.json'));
  assert.equal(summary.algorithm, 'sgd');
  assert.deepEqual(summary.classWeights, { mode: 'explicit', negative: { label: '-1', weight: 1 }, positive: { label: '1', weight: 5 } });
  const { x, b } = jointModel(out);
  const scores = modelScores(train.X, x);
  const objective = (wPos: number) => {
    let f = 0;
    for (let i = 0; i < scores.length; i++) f += (train.y[i] > 0 ? wPos : 1) * Math.log1p(Math.exp(-train.y[i] * (scores[i] + b)));
    return f / scores.length + (LAMBDA / 2) * x.reduce((a, v) => a + v * v, 0);
  };
  assert.ok(Math.abs(objective(5) - summary.objective) < 1e-9, `reported ${summary.objective}, weighted objective of the models ${objective(5)}`);
  assert.ok(Math.abs(objective(1) - summary.objective) > 1e-3, 'the unweighted objective is another number');
});

test('bad --class-weight flags stop the coordinator and simulate with exit 64 and a clear message', async (t) => {
  const dir = tempDir(t);
  const labels = join(dir, 'labels.csv');
  writeFileSync(labels, 'id,label\na,no\nb,yes\nc,no\n');
  const base = ['--port', '0', '--labels', labels, '--parties', 'party-1,party-2', '--out', join(dir, 'out')];
  const cases: [string[], RegExp][] = [
    [['--class-weight', 'balanced', '--loss', 'squared'], /--class-weight needs --loss logistic .*not squared/],
    [['--class-weight', 'yes'], /--class-weight 'yes': 'yes' is not LABEL=WEIGHT; use 'balanced'/],
    [['--class-weight', 'no=1;yes=2'], /the weight of 'no' is '1;yes=2', not a positive number/],
    [['--class-weight', 'maybe=3'], /--class-weight: label 'maybe' is not a class of the labels \(they are 'no' and 'yes'\)/],
    [['--class-weight', 'yes=0'], /the weight of 'yes' is '0', not a positive number/],
    [['--class-weight', 'yes=-2'], /the weight of 'yes' is '-2', not a positive number/],
  ];
  for (const [extra, message] of cases) {
    const p = run(BIN.coordinator, [...base, ...extra]);
    assert.equal((await p.exit).code, 64, `${extra.join(' ')}: ${p.stderr()}`);
    assert.match(p.stderr(), message, extra.join(' '));
  }
  const sim = run(BIN.share, ['simulate', '--out', join(dir, 'sim'), '--rounds', '2', '--class-weight', '0=2']);
  assert.equal((await sim.exit).code, 64, sim.stderr());
  assert.match(sim.stderr(), /--class-weight: label '0' is not a class of the labels \(they are '-1' and '1'\)/);
});
