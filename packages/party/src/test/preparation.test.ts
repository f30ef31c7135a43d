// The party's side of data preparation: how a private party shares its budget between the
// preparation's statistics and the release, the statistics kept for a restart (reused, never
// estimated again), and the warning about columns of very different scales.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, gdpDelta, gdpMuFor, isDense, packIds, seededNoise } from '@admm-share/core';
import { tempDir } from '@admm-share/core/test-support';
import { type PreparationFlags, loadTrainingData, preparationPath, scaleWarning, shareBudget } from '../preparation/data.js';
import { DEFAULT_BX } from '../privacy/mechanism.js';
import { Privacy } from '../privacy/privacy.js';
import { capture } from './capture-log.js';

/** A bank's file in raw units: an income near 1e5 beside an age near 40, a region, a gap. */
function bankFile(dir: string): string {
  const rows = ['customer_id,age,income,region,subscribed'];
  for (let i = 0; i < 400; i++) {
    const age = 20 + ((i * 7) % 60);
    const income = i === 5 ? 'NA' : String(20_000 + ((i * 7919) % 150_000));
    rows.push(`C${i},${age},${income},${['north', 'south', 'east'][i % 3]},${i % 4 === 0 ? 'yes' : 'no'}`);
  }
  const path = join(dir, 'bank.csv');
  writeFileSync(path, rows.join('\n') + '\n');
  return path;
}

const FLAGS: PreparationFlags = { exclude: ['subscribed'], categorical: ['region'], missing: 'mean', share: 0.1 };
const READ = { idColumn: 'customer_id' };

test('shareBudget: the preparation and the release together are the party\'s (epsilon, delta), composed in GDP', () => {
  for (const categories of [true, false]) {
    const s = shareBudget({ epsilon: 2, delta: 1e-5 }, 0.1, categories);
    assert.equal(s.deltaThreshold, categories ? 0.1 * 1e-5 / 2 : 0);
    const release = gdpMuFor(s.releaseEpsilon, s.releaseDelta);
    const total = Math.hypot(s.mu, release);
    // The composition's delta at the party's epsilon, plus the threshold's: the whole budget.
    assert.ok(Math.abs(gdpDelta(2, total) + s.deltaThreshold - 1e-5) < 1e-9, `total delta ${gdpDelta(2, total) + s.deltaThreshold}`);
    assert.ok(Math.abs(s.mu ** 2 / total ** 2 - 0.1) < 1e-6, 'the preparation has its share of mu^2');
    assert.ok(s.releaseEpsilon < 2 && s.releaseEpsilon > 1.8);
  }
});

test('a private party estimates its statistics once, keeps them, reuses them after a restart, and refuses other flags', (t) => {
  const dir = tempDir(t);
  const data = bankFile(dir);
  const model = join(dir, 'model-bank.json');
  const kept = preparationPath(model);
  const { log, lines } = capture();
  let draws = 0;
  const budget = { epsilon: 2, delta: 1e-5, mechanism: 'auto', seeded: true, noise: () => (draws++, seededNoise('prep')) };
  const first = loadTrainingData(data, READ, FLAGS, budget, kept, log);
  assert.equal(draws, 1);
  assert.ok(existsSync(kept));
  assert.equal(first.spend?.reused, false);
  assert.deepEqual(first.table.featureNames.slice(0, 2), ['age', 'income']);
  assert.ok(first.preparation!.inputs.some((c) => c.kind === 'numeric' && c.centerSource === 'dp'), 'the centres are private estimates');
  assert.ok(lines.some((l) => String(l.msg).includes('estimated with differential privacy')));

  const again = loadTrainingData(data, READ, FLAGS, { ...budget, noise: () => assert.fail('a restart must not draw noise for the statistics again') }, kept, log);
  assert.equal(again.spend?.reused, true);
  assert.deepEqual(again.preparation, first.preparation);
  assert.ok(isDense(again.table.X) && isDense(first.table.X));
  assert.deepEqual(Array.from(again.table.X.data), Array.from(first.table.X.data));

  assert.throws(() => loadTrainingData(data, READ, { ...FLAGS, missing: 'median' }, budget, kept, log), (e: unknown) => e instanceof ConfigError && /other preparation flags/.test(e.message) && e.message.includes(kept));
  // Another budget, share, mechanism or seed would make the kept statistics a lie about what they cost.
  for (const other of [{ epsilon: 1 }, { delta: 1e-6 }, { seeded: false }])
    assert.throws(() => loadTrainingData(data, READ, FLAGS, { ...budget, ...other }, kept, log), (e: unknown) => e instanceof ConfigError && /other preparation flags, data or budget/.test(e.message));
  assert.throws(() => loadTrainingData(data, READ, { ...FLAGS, share: 0.2 }, budget, kept, log), (e: unknown) => e instanceof ConfigError && /budget/.test(e.message));
  // The paper's mechanism is refused before any kept file is looked at.
  assert.throws(() => loadTrainingData(data, READ, FLAGS, { ...budget, mechanism: 'paper' }, kept, log), (e: unknown) => e instanceof ConfigError && /--mechanism paper/.test(e.message));
});

test('without a budget the statistics are exact; a declared spec at a private party spends nothing', (t) => {
  const dir = tempDir(t);
  const data = bankFile(dir);
  const { log } = capture();
  const exact = loadTrainingData(data, READ, FLAGS, null, join(dir, 'k1.json'), log);
  assert.equal(exact.spend, null);
  const age = exact.preparation!.inputs.find((c) => c.name === 'age');
  const ages = Array.from({ length: 400 }, (_, i) => 20 + ((i * 7) % 60));
  assert.ok(age?.kind === 'numeric' && Math.abs(age.center - ages.reduce((a, b) => a + b, 0) / 400) < 1e-9);

  const spec = join(dir, 'spec.json');
  writeFileSync(spec, JSON.stringify({ columns: { age: { range: [18, 100] }, income: { range: [0, 200000] }, region: { categories: ['east', 'north', 'south'] } } }));
  const noBudget = { epsilon: 2, delta: 1e-5, mechanism: 'auto', seeded: false, noise: () => assert.fail('nothing to estimate') };
  const declared = loadTrainingData(data, READ, { ...FLAGS, spec }, noBudget, join(dir, 'k2.json'), log);
  assert.equal(declared.spend, null, 'the release keeps the whole budget');
  // Nothing is taken from the rows: the centre and scale of a declared range are its midpoint and half-width, the fill its centre.
  const declaredAge = declared.preparation!.inputs.find((c) => c.name === 'age');
  assert.ok(declaredAge?.kind === 'numeric');
  assert.deepEqual([declaredAge.center, declaredAge.scale, declaredAge.centerSource, declaredAge.scaleSource], [59, 41, 'declared', 'declared']);
  const income = declared.preparation!.inputs.find((c) => c.name === 'income');
  assert.ok(income?.kind === 'numeric' && income.fill === 100_000 && income.fillSource === 'declared', JSON.stringify(income));
  assert.throws(() => loadTrainingData(data, READ, { ...FLAGS, spec, missing: 'drop' }, noBudget, join(dir, 'k3.json'), log), (e: unknown) => e instanceof ConfigError && /--missing drop/.test(e.message));
  // A LIBSVM file's width is its largest index, which one row can change: a private party declares it.
  const libsvm = join(dir, 'telecom.libsvm');
  writeFileSync(libsvm, 'a 1:0.5 3:2\nb 2:1\n');
  assert.throws(() => loadTrainingData(libsvm, { ids: 'first' }, { prepare: true, share: 0.1 }, noBudget, join(dir, 'k4.json'), log), (e: unknown) => e instanceof ConfigError && /--features/.test(e.message));
  assert.equal(loadTrainingData(libsvm, { ids: 'first', features: 3 }, { prepare: true, share: 0.1 }, null, join(dir, 'k5.json'), log).table.featureNames.length, 3);
});

test('the scale warning names the column that decides every row, and stays quiet on comparable scales', () => {
  const names = ['age', 'income'];
  const raw = { rows: 3, cols: 2, data: Float64Array.from([40, 1e5, 30, 2e5, 50, 5e4]) };
  const w = scaleWarning({ file: 'f', ids: packIds(['a', 'b', 'c']), X: raw, featureNames: names });
  assert.match(w ?? '', /income ~1\.\de\+5, age ~4\d/);
  assert.match(w!, /--prepare/);
  const std = { rows: 2, cols: 2, data: Float64Array.from([1, -0.5, -1, 0.5]) };
  assert.equal(scaleWarning({ file: 'f', ids: packIds(['a', 'b']), X: std, featureNames: names }), undefined);
});

test('a job whose ledger paid for the preparation refuses a run that estimated the statistics again, and takes one that reuses them', (t) => {
  const dir = tempDir(t);
  const ledger = join(dir, 'model-telecom.ledger.json');
  const shared = shareBudget({ epsilon: 2, delta: 1e-5 }, 0.1, false);
  const cfg = { mechanism: 'auto' as const, epsilon: shared.releaseEpsilon, delta: shared.releaseDelta, seed: 'ledger', bx: DEFAULT_BX };
  const job = { lambda: 1e-4, rho: 1e-3, rounds: 1, parties: 2, features: 3, n: 4, algorithm: 'one-shot' as const, bw: 1.5 };
  const first = new Privacy(cfg, { ...shared, reused: false }, { epsilon: 2, delta: 1e-5 });
  first.calibrate(job);
  first.scoreRelease(Float64Array.from([0.1, -0.2, 0.3, 0]), Uint32Array.from([0, 1, 2, 3]), ledger, 'job-1');
  assert.throws(() => new Privacy(cfg, { ...shared, reused: false }).restoreLedger(ledger, 'job-1'), (e: unknown) => e instanceof ConfigError && /estimated them again/.test(e.message));
  assert.throws(() => new Privacy(cfg).restoreLedger(ledger, 'job-1'), (e: unknown) => e instanceof ConfigError && /has none/.test(e.message));
  const again = new Privacy(cfg, { ...shared, reused: true });
  again.restoreLedger(ledger, 'job-1');
  assert.equal(again.releases, 1);
  // Another job's ledger is not this job's business.
  new Privacy(cfg, { ...shared, reused: false }).restoreLedger(ledger, 'job-2');
});
