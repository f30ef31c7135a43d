#!/usr/bin/env node
// How many rounds the exact sharing form needs to reach 1e-4 (relative) of the central
// optimum, without and with Anderson acceleration (docs/rho.md):
// - the acceleration table: the defaults (rho = 0.01/N, alpha 1.6, lambda 1e-4) on a9a, a
//   w8a-shaped set, the spam set and the synthetic set, plain against Anderson (memory 5);
// - the rho table: a range of rho*N and lambda on a9a and the synthetic set, both ways.
// Runs the product's own update code (RidgeXUpdate, AdmmStep) in one process, with no
// network, so the sweep takes a minute or two; over sockets the iterates are the same.
//   npm run rho-sweep [-- --table acceleration|rho]
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import seedrandom from 'seedrandom';
import { CsrBuilder, binaryLabels, csrSliceColumns, fitCentral, logistic, readLibsvm, syntheticDataset } from '@admm-share/core';
import { RidgeXUpdate } from '@admm-share/party';
import { AdmmStep, DEFAULT_ANDERSON } from '@admm-share/coordinator';
import { spamDataset } from '@admm-share/admm-share';

const { values } = parseArgs({ options: { table: { type: 'string' } } });
const RHO_N = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3];
const MAX = 300;

function roundsTo(gap, set, lambda, rhoN, fStar, anderson) {
  const { X, y, cuts } = set;
  const N = y.length;
  const parties = cuts.slice(0, -1).map((c, i) => new RidgeXUpdate(csrSliceColumns(X, c, cuts[i + 1]), lambda, false));
  const co = new AdmmStep({ variant: 'exact', loss: logistic, y, parties: parties.length, lambda, rho: rhoN / N, alpha: 1.6, tolerance: { abs: 0, rel: 0 }, anderson });
  co.step(parties.map((p) => p.share), true);
  for (let r = 1; r <= MAX; r++) {
    parties.forEach((p, m) => p.updateFromBroadcast(co.cFor(m), co.rho));
    co.step(parties.map((p) => p.share));
    if (Math.abs(co.objective(parties.reduce((a, p) => a + p.penaltySq(), 0)) - fStar) / fStar <= gap) return r;
  }
  return Infinity;
}
const show = (r) => (Number.isFinite(r) ? String(r) : `>${MAX}`);

/**
 * A seeded set of w8a's shape: 300 sparse binary features whose frequencies fall off
 * (a few common, most rare; about 12 non-zeros per row), labels from a logistic model with
 * a strongly negative intercept (about 3 % positive, as in w8a).
 */
function w8aShaped(rows = 20000, d = 300) {
  const rng = seedrandom('w8a-shaped');
  const b = new CsrBuilder(d);
  const y = new Float64Array(rows);
  const w = Array.from({ length: d }, () => (rng() - 0.5) * 4);
  const p = Array.from({ length: d }, (_, j) => 0.2 * Math.exp(-j / 40) + 0.005);
  for (let i = 0; i < rows; i++) {
    let s = -4.5;
    for (let j = 0; j < d; j++)
      if (rng() < p[j]) {
        b.push(j, 1);
        s += w[j];
      }
    b.endRow();
    y[i] = rng() < 1 / (1 + Math.exp(-s)) ? 1 : -1;
  }
  return { X: b.build(d), y };
}

function sets() {
  const a9aPath = join(new URL('..', import.meta.url).pathname, 'data', 'a9a', 'a9a');
  const t = readLibsvm(a9aPath, { features: 123 });
  const a9a = { name: 'a9a (66 \\| 57)', X: t.X, y: binaryLabels({ file: a9aPath, ids: t.ids, raw: t.firstTokens, lines: t.lines }).y, cuts: [0, 66, 123] };
  const w = w8aShaped();
  const w8a = { name: 'w8a-shaped (150 \\| 150)', X: w.X, y: w.y, cuts: [0, 150, 300] };
  const sp = spamDataset({ seed: 'spam' });
  const spamCuts = sp.blocks.reduce((acc, b) => [...acc, acc[acc.length - 1] + b], [0]);
  const spam = { name: `spam (${sp.blocks.join(' \\| ')})`, X: sp.train.X, y: sp.train.y, cuts: spamCuts };
  const s = syntheticDataset();
  const synthetic = { name: 'synthetic (10 \\| 8 \\| 6)', X: s.train.X, y: s.train.y, cuts: [0, 10, 18, 24] };
  return { a9a, w8a, spam, synthetic };
}

const all = sets();
if (values.table !== 'rho') {
  console.log(`rounds to 1e-4 relative, defaults (exact form, rho*N = 0.01, alpha 1.6, lambda 1e-4)\n`);
  console.log(`| data | rows | plain | Anderson (memory ${DEFAULT_ANDERSON}) |\n|---|---|---|---|`);
  for (const set of [all.a9a, all.w8a, all.spam, all.synthetic]) {
    const fStar = fitCentral(set.X, set.y, logistic, 1e-4).objective;
    const [plain, fast] = [0, DEFAULT_ANDERSON].map((a) => roundsTo(1e-4, set, 1e-4, 0.01, fStar, a));
    console.log(`| ${set.name} | ${set.y.length} | ${show(plain)} | ${show(fast)} |`);
  }
  console.log();
}
if (values.table !== 'acceleration') {
  console.log(`rounds to 1e-4 relative, exact form, alpha 1.6: plain / Anderson (memory ${DEFAULT_ANDERSON})\n`);
  console.log(`| data | lambda | ${RHO_N.map((r) => `rho*N = ${r}`).join(' | ')} |\n|---|---|${RHO_N.map(() => '---').join('|')}|`);
  for (const set of [all.a9a, all.synthetic])
    for (const lambda of [1e-4, 1e-3, 1e-2]) {
      const fStar = fitCentral(set.X, set.y, logistic, lambda).objective;
      const row = RHO_N.map((rhoN) => [0, DEFAULT_ANDERSON].map((a) => show(roundsTo(1e-4, set, lambda, rhoN, fStar, a))).join(' / '));
      console.log(`| ${set.name} | ${lambda} | ${row.join(' | ')} |`);
    }
}
