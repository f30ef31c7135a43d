// End to end: `admm-share simulate` starts a real coordinator and real party processes on
// localhost; the result is compared with the optimum computed centrally by Newton's method.
// The comparisons are two-sided: no model's objective can be below the optimum f*, so a run
// that reports one (an objective computed wrongly) fails as surely as one that stops short.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { binaryLabels, fitCentral, logistic, readLibsvm, syntheticDataset } from '@admm-share/core';
import { BELOW_OPTIMUM_RTOL, assertNearOptimum } from '@admm-share/core/test-support';
import { readTrace } from '@admm-share/coordinator';
import { SIMULATION_FILE, readSimulation } from '../simulation-file.js';
import { A9A, BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

const synthetic = syntheticDataset(); // what `simulate` uses without --data (same default seed)

/** Every round's objective (each is the objective of that round's model) is at least f*, up to rounding. */
function assertNeverBelow(trace: { round: number; objective: number }[], fStar: number): void {
  for (const r of trace)
    assert.ok(r.objective >= fStar * (1 - BELOW_OPTIMUM_RTOL), `round ${r.round}: objective ${r.objective} below the optimum ${fStar}`);
}

for (const intercept of [false, true]) {
  test(`simulate, synthetic data, 3 parties, ${intercept ? 'with' : 'without'} intercept, converges to the central optimum`, async (t) => {
    const out = tempDir(t);
    const args = ['simulate', '--out', out, '--rounds', '400', '--rho', String(0.1 / synthetic.train.ids.length), '--no-baselines'];
    if (intercept) args.push('--intercept');
    const p = run(BIN.share, args);
    const { code } = await p.exit;
    assert.equal(code, 0, p.stderr());
    assert.match(p.stdout(), /privacy: none/);

    const central = fitCentral(synthetic.train.X, synthetic.train.y, logistic, 1e-4, { intercept });
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    assertNearOptimum(summary.objective, central.objective, 1e-6, 'final objective');
    assert.equal(summary.converged, true);
    assert.equal(summary.parties.length, 3);
    assert.deepEqual(summary.parties.map((q: { features: number }) => q.features), synthetic.blocks);
    assert.equal(summary.droppedRows, 0);
    assert.ok(summary.bytes.toCoordinator > 0 && summary.bytes.fromCoordinator > 0);
    for (const k of ['logLoss', 'accuracy', 'auc']) assert.ok(Number.isFinite(summary.test[k]), k);
    // Each process's peak memory: a node process with its data holds at least 20 MB and, here, less than 2 GB.
    const { peakMemory } = readSimulation(join(out, SIMULATION_FILE));
    assert.deepEqual(Object.keys(peakMemory), ['coordinator', 'party-1', 'party-2', 'party-3']);
    for (const [who, b] of Object.entries(peakMemory)) assert.ok(b > 20e6 && b < 2e9, `${who}: ${b} bytes`);
    assert.match(p.stdout(), /peak memory: coordinator \d+ MB, party-1 \d+ MB, party-2 \d+ MB, party-3 \d+ MB/);

    const trace = readTrace(join(out, 'trace.jsonl'));
    assert.equal(trace.length, summary.rounds);
    assert.deepEqual(trace.map((r) => r.round), Array.from({ length: summary.rounds }, (_, i) => i + 1));
    assertNeverBelow(trace, central.objective);

    // Each party's model holds its own block of the central solution.
    let offset = 0;
    for (const [m, d] of synthetic.blocks.entries()) {
      const model = JSON.parse(readFileSync(join(out, `model-party-${m + 1}.json`), 'utf8'));
      assert.equal(model.coefficients.length, d);
      for (let j = 0; j < d; j++) assert.ok(Math.abs(model.coefficients[j] - central.x[offset + j]) < 1e-3, `party ${m + 1} coefficient ${j}`);
      assert.equal(model.intercept === null, !(intercept && m === 0));
      offset += d;
    }
    if (intercept) {
      const model = JSON.parse(readFileSync(join(out, 'model-party-1.json'), 'utf8'));
      assert.ok(Math.abs(model.intercept - central.intercept) < 1e-3);
    }
    assert.deepEqual(readdirSync(out).filter((f) => f.endsWith('.tmp') || f.endsWith('.partial')), []);
  });
}

test('simulate on a9a (66 | 57, lambda 1e-4, defaults) reaches the optimum from above, and the reference accuracy', async (t) => {
  const out = tempDir(t);
  const p = run(BIN.share, ['simulate', '--data', join(A9A, 'a9a'), '--test', join(A9A, 'a9a.t'), '--split', '66,57', '--out', out, '--no-baselines']);
  // f* by Newton's method on the same rows (no intercept, lambda 1e-4), while the job runs.
  const data = readLibsvm(join(A9A, 'a9a'), { ids: 'auto' });
  const y = binaryLabels({ file: join(A9A, 'a9a'), ids: data.ids, raw: data.firstTokens!, lines: data.lines }).y;
  const fStar = fitCentral(data.X, y, logistic, 1e-4).objective;
  // The same optimum as scikit-learn's (ALGORITHM.md: 0.3245069247): two solvers agree.
  assert.ok(Math.abs(fStar - 0.3245069247) <= 1e-9, `f* ${fStar}`);
  const { code } = await p.exit;
  assert.equal(code, 0, p.stderr());
  const trace = readTrace(join(out, 'trace.jsonl'));
  assertNeverBelow(trace, fStar);
  const first = trace.find((r) => r.objective - fStar <= 1e-4 * fStar);
  assert.ok(first && first.round <= 100, `objective within 1e-4 of f* by round 100 (first at ${first?.round})`);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assertNearOptimum(summary.objective, fStar, 1e-4, 'final objective');
  assert.ok(summary.test.accuracy >= 0.849, `accuracy ${summary.test.accuracy}`);
  assert.equal(summary.rows.train, 32561);
  assert.equal(summary.rows.test, 16281);
});

test('simulate with a wrong split fails with a clear message and exit code 64', async (t) => {
  const out = tempDir(t);
  const p = run(BIN.share, ['simulate', '--split', '30,5', '--out', out]);
  const { code } = await p.exit;
  assert.equal(code, 64);
  assert.match(p.stderr(), /--split '30,5'/);
  assert.equal(existsSync(join(out, 'summary.json')), false);
});

test('simulate --dataset spam (a small subsample): three parties (headers | body | links) train a joint model', async (t) => {
  const out = tempDir(t);
  const p = run(BIN.share, ['simulate', '--dataset', 'spam', '--rows', '700', '--intercept', '--rounds', '40', '--out', out]);
  const { code } = await p.exit;
  assert.equal(code, 0, p.stderr());
  assert.match(p.stdout(), /SpamAssassin corpus \(headers 2048 \| body 4096 \| links 1024 hashed features\)/);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.deepEqual(summary.parties.map((q: { features: number }) => q.features), [2048, 4096, 1024]);
  assert.equal(summary.rows.train + summary.rows.test, 700);
  assert.ok(summary.test.auc > 0.9, `AUC ${summary.test.auc}`);
  assertNearOptimum(summary.objective, readSimulation(join(out, SIMULATION_FILE)).baselines!.central.objective, 0.05, '40-round objective');
});

test('simulate --algorithm sgd: mini-batch SGD over the same processes approaches the central optimum, one trace line per epoch', async (t) => {
  const out = tempDir(t);
  const p = run(BIN.share, ['simulate', '--algorithm', 'sgd', '--rounds', '15', '--eval-every', '5', '--intercept', '--out', out, '--no-baselines']);
  const { code } = await p.exit;
  assert.equal(code, 0, p.stderr());
  assert.match(p.stdout(), /SGD, 3 parties/);
  const central = fitCentral(synthetic.train.X, synthetic.train.y, logistic, 1e-4, { intercept: true });
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.algorithm, 'sgd');
  assert.equal(summary.rounds, 15);
  // SGD with a decaying step is approximate: within 3 % of the optimum after 15 epochs here (and never below it).
  assertNearOptimum(summary.objective, central.objective, 0.03, 'SGD objective');
  const trace = readTrace(join(out, 'trace.jsonl'));
  assert.deepEqual(trace.map((r) => r.epoch), Array.from({ length: 15 }, (_, i) => i + 1));
  assert.deepEqual(trace.filter((r) => r.test).map((r) => r.epoch), [5, 10, 15]);
  assert.ok(trace[14].steps === 15 * (Math.ceil(2000 / 128) + 1), `steps ${trace[14].steps}`);
  const model = JSON.parse(readFileSync(join(out, 'model-party-1.json'), 'utf8'));
  assert.equal(model.hyperParameters.variant, 'sgd');
});

test('simulate with two dense blocks of 700 features and --party-threads 1: each party factors its block by Cholesky in pieces with a second thread, which shares its products, and the job reaches the central optimum', async (t) => {
  const dir = tempDir(t);
  // 1500 rows x 1400 dense features, labels from a logistic model on a few of them (seeded).
  const rand = (() => {
    let x = 12345;
    return () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32);
  })();
  const [n, d] = [1500, 1400];
  const lines: string[] = [];
  const rows: number[][] = [];
  for (let i = 0; i < n; i++) {
    const row = Array.from({ length: d }, () => Math.round((rand() * 2 - 1) * 1000) / 1000);
    const score = row[0] * 3 - row[800] * 2 + row[5] - row[1300];
    rows.push(row);
    lines.push(`${rand() < 1 / (1 + Math.exp(-score)) ? 1 : -1} ${row.map((v, j) => `${j + 1}:${v}`).join(' ')}`);
  }
  const data = join(dir, 'dense.libsvm');
  writeFileSync(data, lines.join('\n') + '\n');
  const out = join(dir, 'run');
  const lambda = 1e-2;
  const p = run(BIN.share, ['simulate', '--data', data, '--split', '700,700', '--lambda', String(lambda), '--rounds', '300', '--out', out, '--no-baselines', '--party-threads', '1']);
  const { code } = await p.exit;
  assert.equal(code, 0, p.stderr());
  for (const id of ['party-1', 'party-2']) {
    const setup = readFileSync(join(out, 'logs', `${id}.log`), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((r) => r.msg === 'aligned and factorised');
    assert.equal(setup?.form, 'cholesky', `${id}: ${JSON.stringify(setup)}`);
    assert.equal(setup?.dense, true);
    assert.ok(setup?.factorPieces > 1, `${id}: factored in pieces, the event loop's turns between them`);
    assert.equal(setup?.threads, 1, `${id}: a thread beside its own (its block is in shared memory)`);
  }
  const t0 = readLibsvm(data, { features: d });
  const { y } = binaryLabels({ file: data, ids: t0.ids, raw: t0.firstTokens!, lines: t0.lines });
  const central = fitCentral(t0.X, y, logistic, lambda, { intercept: false });
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assertNearOptimum(summary.objective, central.objective, 1e-6, 'final objective');
  assertNeverBelow(readTrace(join(out, 'trace.jsonl')), central.objective);
});

test('simulate with blocks too large to factor (650 features each, lambda 0): conjugate gradients, with their iterations and residual in the trace', async (t) => {
  const dir = tempDir(t);
  // 900 rows x 1300 sparse features (about 20 non-zeros per row), labels from a few of them (seeded).
  const rand = (() => {
    let x = 777;
    return () => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32);
  })();
  const lines: string[] = [];
  for (let i = 0; i < 900; i++) {
    const cols = [...new Set(Array.from({ length: 20 }, () => 1 + Math.floor(rand() * 1300)))].sort((a, b) => a - b);
    const vals = cols.map(() => Math.round((rand() * 2 - 1) * 100) / 100);
    const score = cols.reduce((s, j, k) => s + (j % 97 === 0 ? 3 * vals[k] : 0), 0);
    lines.push(`${rand() < 1 / (1 + Math.exp(-score)) ? 1 : -1} ${cols.map((j, k) => `${j}:${vals[k]}`).join(' ')}`);
  }
  const data = join(dir, 'sparse.libsvm');
  writeFileSync(data, lines.join('\n') + '\n');
  const out = join(dir, 'run');
  const p = run(BIN.share, ['simulate', '--data', data, '--features', '1300', '--split', '650,650', '--lambda', '0', '--rounds', '6', '--out', out, '--no-baselines']);
  const { code } = await p.exit;
  assert.equal(code, 0, p.stderr());
  for (const id of ['party-1', 'party-2']) {
    const setup = readFileSync(join(out, 'logs', `${id}.log`), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((r) => r.msg === 'aligned and factorised');
    assert.equal(setup?.form, 'cg', `${id}: ${JSON.stringify(setup)}`);
  }
  const trace = readTrace(join(out, 'trace.jsonl'));
  assert.equal(trace.length, 6);
  for (const line of trace) {
    assert.deepEqual(Object.keys(line.solver ?? {}).sort(), ['party-1', 'party-2'], JSON.stringify(line));
    for (const s of Object.values(line.solver ?? {})) {
      assert.ok(Number.isInteger(s.iterations) && s.iterations >= 1 && s.iterations < 2000, JSON.stringify(s));
      assert.ok(s.residual <= 1e-12, `residual ${s.residual}`);
    }
  }
});
