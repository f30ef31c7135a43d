#!/usr/bin/env node
// How many rounds the exact sharing form needs to reach 1e-4 (relative) of the central
// optimum, for a range of rho*N, on a9a (66 | 57) and on the synthetic set (10 | 8 | 6).
// Runs the product's own update code (RidgeXUpdate, AdmmCoordinator) in one process, with no
// network, so the sweep takes seconds; the numbers are the same as over sockets.
//   npm run build && node scripts/rho-sweep.mjs
import { join } from 'node:path';
import { binaryLabels, csrSliceColumns, fitCentral, logistic, readLibsvm, syntheticDataset } from '@admm-share/core';
import { RidgeXUpdate } from '@admm-share/party';
import { AdmmCoordinator } from '@admm-share/coordinator';

const RHO_N = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3];
const MAX = 300;

function roundsTo(gap, X, y, cuts, lambda, rhoN, fStar) {
  const N = y.length;
  const parties = cuts.slice(0, -1).map((c, i) => new RidgeXUpdate(csrSliceColumns(X, c, cuts[i + 1]), lambda, false));
  const co = new AdmmCoordinator({ variant: 'exact', loss: logistic, y, parties: parties.length, lambda, rho: rhoN / N, alpha: 1.6, tolerance: { abs: 0, rel: 0 } });
  co.step(parties.map((p) => p.share));
  for (let r = 1; r <= MAX; r++) {
    for (const p of parties) p.updateFromBroadcast(co.c, co.rho);
    co.step(parties.map((p) => p.share));
    if (Math.abs(co.objective(parties.reduce((a, p) => a + p.penaltySq(), 0)) - fStar) / fStar <= gap) return String(r);
  }
  return `>${MAX}`;
}

function sweep(name, X, y, cuts) {
  for (const lambda of [1e-4, 1e-3, 1e-2]) {
    const fStar = fitCentral(X, y, logistic, lambda).objective;
    const row = RHO_N.map((rhoN) => roundsTo(1e-4, X, y, cuts, lambda, rhoN, fStar));
    console.log(`| ${name} | ${lambda} | ${row.join(' | ')} |`);
  }
}

console.log(`rounds to 1e-4 relative, exact form, alpha 1.6\n\n| data | lambda | ${RHO_N.map((r) => `rho*N = ${r}`).join(' | ')} |\n|---|---|${RHO_N.map(() => '---').join('|')}|`);
const a9a = join(new URL('..', import.meta.url).pathname, 'data', 'a9a', 'a9a');
const t = readLibsvm(a9a, { features: 123 });
sweep('a9a (66 \\| 57)', t.X, binaryLabels({ file: a9a, ids: t.ids, raw: t.firstTokens, lines: t.lines }).y, [0, 66, 123]);
const s = syntheticDataset();
sweep('synthetic (10 \\| 8 \\| 6)', s.train.X, s.train.y, [0, 10, 18, 24]);
