// The party's privacy code pinned down line by line: the bounds by values worked out by hand
// from docs/privacy.md (not by calling the function under test again), every refusal of
// validatePrivacyConfig, parseLedger's field checks and tolerance, a restart that changes the
// budget, the noise source chosen, and the privacy report of each mechanism. These are the
// tests that kill what `npm run mutation` found surviving (docs/mutation.md).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@admm-share/core/test-support';
import { ConfigError, DataError, accountEpsilon, csrFromDense } from '@admm-share/core';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { BUDGET_RTOL, withinBudget } from '../privacy/budget.js';
import { LEDGER_FORMAT, parseLedger } from '../privacy/ledger.js';
import { type PrivacyConfig, DEFAULT_BX, defaultBw, gaussianShareSensitivity, normaliseRows, validatePrivacyConfig } from '../privacy/mechanism.js';
import { Privacy } from '../privacy/privacy.js';

const job = { lambda: 1e-3, rho: 1e-2, rounds: 10, parties: 2, features: 3, n: 100 };
const gauss = (extra: Partial<PrivacyConfig> = {}): PrivacyConfig => ({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'pins', ...extra });
const near = (actual: number, expected: number, what: string) => assert.ok(Math.abs(actual - expected) <= 1e-12 * Math.abs(expected), `${what}: ${actual}, expected ${expected}`);
const unitRows = () => new RidgeXUpdate(csrFromDense([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), job.lambda, false);

test('defaultBw is 3 bx + 1/(N rho)', () => {
  near(defaultBw(2, 10, 0.5), 6.2, 'bx 2, N 10, rho 0.5'); // 6 + 1/5
  near(defaultBw(0.5, 4, 0.125), 3.5, 'bx 0.5, N 4, rho 1/8'); // 1.5 + 2
});

test('gaussianShareSensitivity is the root of (2 sqrt(rho/lambda) (bx + bw))^2 + (2 bx)^2', () => {
  // lambda 1/4, rho 4: sqrt(rho/lambda) = 4; others = 2 * 4 * (0.5 + 2) = 20; own = 2 * 0.5 = 1.
  near(gaussianShareSensitivity({ lambda: 0.25, rho: 4, bx: 0.5, bw: 2 }), Math.sqrt(401), 'sqrt(20^2 + 1^2)');
  // lambda 2, rho 8: sqrt 2 ... others = 2 * 2 * (3 + 1) = 16; own = 6.
  near(gaussianShareSensitivity({ lambda: 2, rho: 8, bx: 3, bw: 1 }), Math.sqrt(16 * 16 + 36), 'sqrt(16^2 + 6^2)');
});

test('normaliseRows scales only rows of norm above 1, counts them, and leaves its input alone', () => {
  const X = csrFromDense([[3, 4], [0, -1], [0.1, 0], [0, 0], [1, 0], [0, 8]]);
  const before = X.values.slice();
  const { X: Y, scaled } = normaliseRows(X);
  assert.equal(scaled, 2, 'rows of norm exactly 1 are not scaled');
  const want = [0.6, 0.8, -1, 0.1, 1, 1];
  assert.equal(Y.values.length, want.length);
  want.forEach((v, k) => assert.ok(Math.abs(Y.values[k] - v) < 1e-15, `value ${k}: ${Y.values[k]}, expected ${v}`));
  assert.deepEqual(X.values, before, 'the input is not modified');
  assert.equal(Y.indptr, X.indptr);
});

test('validatePrivacyConfig accepts the valid settings', () => {
  const ok: [PrivacyConfig, boolean][] = [
    [{ mechanism: 'none', bx: DEFAULT_BX }, false],
    [{ mechanism: 'none', bx: 0, delta: 2 }, true], // nothing else is looked at without noise
    [gauss(), false],
    [gauss({ epsilon: 1e-9, delta: 1e-300 }), false],
    [gauss({ delta: 1 - 1e-16 }), false],
    [gauss({ bw: 1e-9, bx: 1e-9 }), false],
    [gauss({ rounds: 1 }), false],
    [gauss({ rounds: 2 ** 53 - 1 }), false],
    [{ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 1e-9, c1: 1e-9 }, false],
  ];
  for (const [c, intercept] of ok) assert.doesNotThrow(() => validatePrivacyConfig(c, intercept), JSON.stringify(c));
});

test('validatePrivacyConfig refuses each invalid setting with its own message', () => {
  const bad: [PrivacyConfig, boolean, RegExp][] = [
    [{ mechanism: 'none', bx: DEFAULT_BX, epsilon: 1 }, false, /^--epsilon with --mechanism none: choose a budget or no noise, not both$/],
    [gauss({ epsilon: undefined }), false, /^--mechanism gaussian-share needs --epsilon > 0$/],
    [gauss({ epsilon: 0 }), false, /needs --epsilon > 0/],
    [gauss({ epsilon: -1 }), false, /needs --epsilon > 0/],
    [gauss({ epsilon: Number.NaN }), false, /needs --epsilon > 0/],
    [{ mechanism: 'paper', bx: 5, b1: 1, c1: 1, delta: 1e-5 }, false, /^--mechanism paper needs --epsilon > 0$/],
    [gauss({ delta: undefined }), false, /^--mechanism gaussian-share needs --delta in \(0, 1\)$/],
    [gauss({ delta: 0 }), false, /needs --delta in \(0, 1\)/],
    [gauss({ delta: 1 }), false, /needs --delta in \(0, 1\)/],
    [gauss({ delta: -0.5 }), false, /needs --delta in \(0, 1\)/],
    [gauss({ delta: 1.5 }), false, /needs --delta in \(0, 1\)/],
    [gauss({ delta: Number.NaN }), false, /needs --delta in \(0, 1\)/],
    [gauss(), true, /^--intercept is not supported at a party with a privacy budget \(the bounds assume no unpenalised column\); the intercept lives at the active party$/],
    [gauss({ bx: 0 }), false, /^--bx and --bw must be positive$/],
    [gauss({ bx: -1 }), false, /--bx and --bw must be positive/],
    [gauss({ bx: Number.NaN }), false, /--bx and --bw must be positive/],
    [gauss({ bw: 0 }), false, /--bx and --bw must be positive/],
    [gauss({ bw: -2 }), false, /--bx and --bw must be positive/],
    [gauss({ bw: Number.NaN }), false, /--bx and --bw must be positive/],
    [{ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5 }, false, /^--mechanism paper needs --b1 and --c1 \(Lemma 1 of the paper\), both positive$/],
    [{ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 1 }, false, /needs --b1 and --c1/],
    [{ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, c1: 1 }, false, /needs --b1 and --c1/],
    [{ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 0, c1: 1 }, false, /needs --b1 and --c1/],
    [{ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 1, c1: 0 }, false, /needs --b1 and --c1/],
    [gauss({ rounds: 0 }), false, /^--privacy-rounds must be an integer >= 1$/],
    [gauss({ rounds: -1 }), false, /--privacy-rounds must be an integer >= 1/],
    [gauss({ rounds: 2.5 }), false, /--privacy-rounds must be an integer >= 1/],
    [gauss({ rounds: 2 ** 53 }), false, /--privacy-rounds must be an integer >= 1/],
    [gauss({ rounds: Number.NaN }), false, /--privacy-rounds must be an integer >= 1/],
  ];
  for (const [c, intercept, re] of bad) {
    assert.throws(
      () => validatePrivacyConfig(c, intercept),
      (e: unknown) => e instanceof ConfigError && re.test(e.message),
      `${JSON.stringify(c)} intercept=${intercept}`,
    );
  }
});

test('withinBudget includes the tolerance itself', () => {
  assert.equal(withinBudget(1 * (1 + BUDGET_RTOL), 1), true);
  assert.equal(withinBudget(3 * (1 + BUDGET_RTOL), 3), true);
});

test('the noise source: none for no mechanism, seeded only when a seed is given', () => {
  assert.equal(new Privacy({ mechanism: 'none', bx: DEFAULT_BX }).noise, undefined);
  const os = new Privacy(gauss({ seed: undefined }));
  assert.equal(os.noise?.seeded, false, 'without a seed: the OS CSPRNG');
  assert.equal(os.calibrate(job).seeded, false, 'and the calibration says so');
  const seededP = new Privacy(gauss({ seed: 's' }));
  assert.equal(seededP.noise?.seeded, true);
  assert.equal(seededP.calibrate(job).seeded, true);
});

test('no mechanism: the calibration, check and report say there is no noise and no budget', () => {
  const p = new Privacy({ mechanism: 'none', bx: DEFAULT_BX });
  assert.equal(p.enabled, false);
  const info = p.calibrate({ ...job, lambda: 0, rounds: 7 });
  assert.deepEqual(info, { mechanism: 'none', epsilon: null, delta: null, rounds: 7, sigma: 0, sensitivity: 0, accountant: null, seeded: false });
  assert.equal(p.bounds, undefined);
  assert.deepEqual(p.check(1, job.rho * 10), { ok: true }, 'no noise was calibrated, so no rho is too large');
  const x = unitRows();
  x.released.set([1.25, -2.5, 3]);
  p.release(x);
  assert.deepEqual(Array.from(x.released), [1.25, -2.5, 3], 'released as is');
  assert.equal(p.releases, 0);
  assert.equal(p.spent, 0);
  const r = p.report('party-1', 'job-1', 5) as Record<string, unknown>;
  assert.equal(r.format, 'admm-share-privacy-report/1');
  assert.equal(r.guarantee, 'none: shares were sent without noise');
  assert.deepEqual([r.mechanism, r.bounds, r.rowsNormalised, r.noise, r.epsilonSpent, r.epsilon], ['none', null, null, null, 0, null]);
});

test('gaussian-share and paper reports: guarantee, bounds, rows normalised and noise source', () => {
  const g = new Privacy(gauss({ seed: undefined, bw: 7 }));
  g.calibrate(job);
  const gr = g.report('party-1', 'job-1', 3) as Record<string, unknown>;
  assert.equal(gr.format, 'admm-share-privacy-report/1');
  assert.equal(gr.guarantee, "(1, 0.00001)-differential privacy for the shares released, per row of this party's data (one row replaced), under the assumptions of docs/privacy.md; per-round noisy ADMM is a research mode");
  assert.deepEqual(gr.bounds, { bx: 5, bw: 7 });
  assert.deepEqual(gr.rowsNormalised, { rule: 'rows with norm > 1 scaled to norm 1', rowsScaled: 3 });
  assert.equal(gr.noise, 'operating system CSPRNG');
  const seededG = new Privacy(gauss());
  seededG.calibrate(job);
  assert.equal((seededG.report('p', 'j', 0) as Record<string, unknown>).noise, 'SEEDED: predictable by anyone who knows the seed; for experiments only, no privacy');

  const p = new Privacy({ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 2, c1: 3, seed: 'paper' });
  p.calibrate(job);
  const pr = p.report('party-2', 'job-1', 0) as Record<string, unknown>;
  assert.match(String(pr.guarantee), /^NOT ESTABLISHED: the paper's mechanism \(eq\. 17, Theorem 3\)/);
  assert.deepEqual(pr.bounds, { b1: 2, c1: 3 });
  assert.deepEqual(pr.rowsNormalised, { rule: 'rows with norm > 1 scaled to norm 1', rowsScaled: 0 });
  assert.equal(pr.accountant, 'advanced');
});

test('calibrate refuses lambda <= 0 with noise, before dividing by it', () => {
  for (const lambda of [0, -1e-3]) {
    const p = new Privacy(gauss());
    assert.throws(() => p.calibrate({ ...job, lambda }), (e: unknown) => e instanceof ConfigError && /^privacy needs lambda > 0: the sensitivity bound divides by it$/.test(e.message), `lambda ${lambda}`);
  }
});

test('a later setup may keep rho and lambda up to a relative 1e-12; the rho check allows the same', () => {
  const p = new Privacy(gauss());
  const first = p.calibrate(job);
  assert.equal(p.calibrate({ ...job, rho: job.rho * (1 + 1e-12) }), first);
  assert.equal(p.calibrate({ ...job, lambda: job.lambda * (1 - 1e-12) }), first);
  assert.deepEqual(p.check(1, job.rho * (1 + 1e-12)), { ok: true });
  const refused = p.check(1, job.rho * 2);
  assert.deepEqual(refused, { ok: false, why: `rho ${job.rho * 2} exceeds the ${job.rho} the noise was calibrated for` });
});

test('a restart with another budget (epsilon or delta) than the ledger was calibrated for is refused', (t) => {
  const dir = tempDir(t, 'ledger-budget-');
  const path = join(dir, 'l.json');
  const a = new Privacy(gauss());
  a.calibrate(job);
  a.release(unitRows());
  a.saveLedger(path, 'job-1');
  assert.ok(readFileSync(path, 'utf8').endsWith('}\n'), 'one JSON line');
  for (const changed of [{ epsilon: 2 }, { delta: 1e-4 }]) {
    const p = new Privacy(gauss(changed));
    p.restoreLedger(path, 'job-1');
    assert.equal(p.releases, 1);
    assert.throws(() => p.calibrate(job), (e: unknown) => e instanceof ConfigError && /calibrated for gaussian-share, epsilon 1, delta 0\.00001; it was restarted with other values/.test(e.message), JSON.stringify(changed));
  }
  const same = new Privacy(gauss());
  same.restoreLedger(path, 'job-1');
  assert.equal(same.calibrate(job).sigma, a.calibrate(job).sigma);
});

/** The one entry of the ledger `config` writes after `releases` releases, parsed back as an object. */
function ledgerOf(t: { after(fn: () => void): void }, config: PrivacyConfig, releases: number): Record<string, unknown> {
  const path = join(tempDir(t, 'ledger-of-'), 'l.json');
  const p = new Privacy(config);
  p.calibrate(job);
  for (let r = 0; r < releases; r++) p.release(unitRows());
  p.saveLedger(path, 'job-1');
  return JSON.parse(readFileSync(path, 'utf8')).entries[0];
}

/** A ledger file of the one entry `e`. */
const fileOf = (e: Record<string, unknown>) => JSON.stringify({ format: LEDGER_FORMAT, entries: [e] });

test('parseLedger accepts the boundary values a real ledger can hold', (t) => {
  const none = ledgerOf(t, gauss(), 0);
  assert.equal(parseLedger('l', fileOf(none)).entries[0].releases, 0, 'no release yet');
  const paper = ledgerOf(t, { mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 1, c1: 1, seed: 'p' }, 2);
  assert.equal(paper.bw, 0, 'paper keeps no clip');
  assert.equal(parseLedger('l', fileOf(paper)).entries[0].bw, 0);
});

test('parseLedger: epsilonSpent may differ from the releases by a relative BUDGET_RTOL of the budget, no more', (t) => {
  const l = ledgerOf(t, gauss({ epsilon: 5 }), 1);
  const info = l.info as { sigma: number; sensitivity: number };
  const expected = accountEpsilon({ sigma: info.sigma, delta: 1e-5, rounds: 1, sensitivity: info.sensitivity, method: 'exact' });
  assert.ok(expected < 2.5, `the case this test is about: one release of a budget of 5 spends ${expected}`);
  // The tolerance is BUDGET_RTOL * max(spent, budget) = 5e-9 here.
  const off = (d: number) => fileOf({ ...l, epsilonSpent: expected + d });
  assert.equal(parseLedger('l', off(3e-9)).entries[0].epsilonSpent, expected + 3e-9);
  assert.equal(parseLedger('l', off(-3e-9)).entries[0].epsilonSpent, expected - 3e-9);
  assert.throws(() => parseLedger('l', off(6e-9)), /does not match the 1 releases recorded/);
});

test('parseLedger refuses each malformed field with its own message', (t) => {
  const l = ledgerOf(t, gauss(), 2);
  const info = l.info as Record<string, unknown>;
  const longId = 'x '.repeat(80);
  const cases: [string, string, RegExp][] = [
    ['a number', '7', /privacy ledger: expected a JSON object$/],
    ['a string', '"ledger"', /privacy ledger: expected a JSON object$/],
    ['infinite epsilonSpent', fileOf(l).replace(/"epsilonSpent":[^,]+/, '"epsilonSpent":1e400'), /epsilonSpent: expected a number >= 0, got null$/],
    ['negative epsilonSpent', fileOf({ ...l, epsilonSpent: -1 }), /epsilonSpent: expected a number >= 0, got -1$/],
    ['numeric job id', fileOf({ ...l, jobId: 123 }), /jobId: expected a job id, got 123$/],
    ['long job id', fileOf({ ...l, jobId: longId }), new RegExp(`jobId: expected a job id, got ${JSON.stringify(longId).slice(0, 60)}$`)],
    ['zero lambda', fileOf({ ...l, lambda: 0 }), /lambda: expected a positive number, got 0$/],
    ['negative lambda', fileOf({ ...l, lambda: -1 }), /lambda: expected a positive number, got -1$/],
    ['negative bw', fileOf({ ...l, bw: -1 }), /bw: expected a number >= 0, got -1$/],
    ['string bw', fileOf({ ...l, bw: '1' }), /bw: expected a number >= 0, got "1"$/],
    // Valid numbers each, but mu = sqrt(T) Delta / sigma overflows: the accountant cannot answer.
    ['unaccountable', fileOf({ ...l, info: { ...info, sigma: 1e-300, sensitivity: 1e300 } }), /info: cannot account 2 releases with it \(no solution: the function never changes sign\)$/],
  ];
  for (const [name, text, re] of cases) {
    assert.throws(
      () => parseLedger('the.ledger', text),
      (e: unknown) => e instanceof DataError && e.message.startsWith('the.ledger: privacy ledger: ') && re.test(e.message),
      name,
    );
  }
});

test('a ledger path that cannot be read is a DataError with the reason', (t) => {
  const dir = join(tempDir(t, 'ledger-dir-'), 'model.ledger.json');
  mkdirSync(dir);
  writeFileSync(join(dir, 'inside'), '');
  const p = new Privacy(gauss());
  assert.throws(() => p.restoreLedger(dir, 'job-1'), (e: unknown) => e instanceof DataError && e.message === `${dir}: privacy ledger: cannot read it (EISDIR)`);
});
