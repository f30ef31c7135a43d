#!/usr/bin/env node
// The label-privacy figures of issue 10 on a9a (split 66 | 57, no feature noise, lambda 1e-3 by default):
// for each label epsilon, `runs` real `admm-share simulate --label-epsilon E` runs (coordinator
// and party processes over loopback, flips from the OS CSPRNG, ADMM with the loss corrected for
// the flips). For each run it also fits, in this process, the central model of the corrected loss
// and of the plain (uncorrected) logistic loss on the same flipped labels (read back from the
// run's label-flips.json), so the distributed result can be compared with both. Prints mean,
// min and max test log loss; asserts nothing. Without --lambda, simulate's default with label
// privacy (1e-3, docs/privacy.md 10.4).
//   npm run bench:labels [-- --runs 3 --epsilons 1,2,3 --lambda 1e-4]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '3' }, epsilons: { type: 'string', default: '1,2,3' }, lambda: { type: 'string' } } });
const root = new URL('..', import.meta.url).pathname;
const core = await import(join(root, 'packages', 'core', 'dist', 'index.js'));
const a9a = join(root, 'data', 'a9a');
const cli = join(root, 'packages', 'admm-share', 'bin', 'admm-share.js');
const runs = Number(values.runs);
const LAMBDA = values.lambda === undefined ? core.LABEL_PRIVACY_LAMBDA : Number(values.lambda);

function load(path) {
  const t = core.readLibsvm(path, { ids: 'auto', features: 123 });
  return { X: t.X, y: core.binaryLabels({ file: path, ids: t.ids, raw: t.firstTokens, lines: t.lines }).y };
}
const train = load(join(a9a, 'a9a'));
const test = load(join(a9a, 'a9a.t'));
const testLogLoss = (fit) => core.classificationMetrics(core.predictScores(test.X, fit.x), test.y).logLoss;

/** One simulate with label privacy; its summary and the central fits on its flipped labels. */
function run(epsilon) {
  const out = mkdtempSync(join(tmpdir(), 'admm-labels-'));
  try {
    const r = spawnSync(process.execPath, [cli, 'simulate', '--data', join(a9a, 'a9a'), '--test', join(a9a, 'a9a.t'), '--split', '66,57', '--label-epsilon', String(epsilon), ...(values.lambda === undefined ? [] : ['--lambda', values.lambda]), '--out', out, '--no-baselines'], { encoding: 'utf8' });
    if (r.status !== 0) {
      console.error(r.stdout, r.stderr);
      process.exit(1);
    }
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    if (summary.lambda !== LAMBDA) throw new Error(`simulate ran with lambda ${summary.lambda}, expected ${LAMBDA}`);
    const flips = JSON.parse(readFileSync(join(out, 'label-flips.json'), 'utf8'));
    const y = core.applyFlips(train.y, Uint32Array.from(flips.flipped));
    const corrected = core.fitCentral(train.X, y, core.flipCorrectedLogistic(flips.flipProbability), LAMBDA);
    const plain = core.fitCentral(train.X, y, core.logistic, LAMBDA);
    return { summary, central: testLogLoss(corrected), plain: testLogLoss(plain), gap: (summary.objective - corrected.objective) / Math.abs(corrected.objective) };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

const stats = (xs) => ({ mean: xs.reduce((a, b) => a + b, 0) / xs.length, min: Math.min(...xs), max: Math.max(...xs) });
const f = (v) => v.toFixed(4);
const show = (xs) => {
  const s = stats(xs);
  return `${f(s.mean)} [${f(s.min)}, ${f(s.max)}]`;
};

console.log(`a9a, 66 | 57, lambda ${LAMBDA}, no feature noise, ${runs} runs per label epsilon (flips from the OS CSPRNG), node ${process.version}`);
console.log(`reference: central on the true labels ${f(testLogLoss(core.fitCentral(train.X, train.y, core.logistic, LAMBDA)))}`);
console.log('\nlabel epsilon  flip p   flipped (mean)  ADMM test log loss mean [min, max]  central corrected, same flips  central uncorrected, same flips  objective gap to central corrected (max)');
for (const eps of values.epsilons.split(',').filter(Boolean).map(Number)) {
  const rs = Array.from({ length: runs }, () => run(eps));
  const p = rs[0].summary.labelPrivacy.flipProbability;
  const flipped = stats(rs.map((r) => r.summary.labelPrivacy.flipped)).mean;
  console.log(
    `${String(eps).padStart(13)}  ${p.toFixed(4)}  ${flipped.toFixed(0).padStart(14)}  ${show(rs.map((r) => r.summary.test.logLoss)).padStart(34)}  ${show(rs.map((r) => r.central)).padStart(29)}  ${show(rs.map((r) => r.plain)).padStart(31)}  ${Math.max(...rs.map((r) => r.gap)).toExponential(1)}`,
  );
}
