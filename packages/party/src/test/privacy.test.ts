// The party's privacy ledger and the ball-constrained update the bound relies on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { privacyVectors, seeded, tempDir } from '@admm-share/core/test-support';
import { ConfigError, DataError, GRID_BITS, accountEpsilon, csrFromDense, csrMatTVec, csrMatVec } from '@admm-share/core';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import { BUDGET_RTOL, reportedSpent, withinBudget } from '../privacy/budget.js';
import { LEDGER_FORMAT, parseLedger } from '../privacy/ledger.js';
import { Privacy } from '../privacy/privacy.js';

const job = { lambda: 1e-3, rho: 1e-2, rounds: 10, parties: 2, features: 3, n: 100 };

/** Reference sigma for Delta = 1 (test-data/gaussian-composition-vectors.json, computed outside this repository). */
function referenceSigma(epsilon: number, delta: number, rounds: number): number {
  const v = privacyVectors().calibrate.find((c) => c.sensitivity === 1 && c.epsilon === epsilon && c.delta === delta && c.rounds === rounds);
  assert.ok(v, `no reference vector for epsilon ${epsilon}, delta ${delta}, ${rounds} rounds`);
  return v.sigma_exact;
}

/**
 * delta(epsilon) of mu-GDP, Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2), with the
 * normal tails integrated numerically (composite Simpson over 12 standard deviations): another
 * algorithm than the erfc-based accountant under test.
 */
function gdpDeltaBySimpson(epsilon: number, mu: number): number {
  const tail = (a: number): number => {
    const steps = 20000;
    const h = 12 / steps;
    let sum = 0;
    for (let k = 0; k <= steps; k++) {
      const z = a + k * h;
      sum += (k === 0 || k === steps ? 1 : k % 2 ? 4 : 2) * Math.exp(-(z * z) / 2);
    }
    return (sum * h) / 3 / Math.sqrt(2 * Math.PI);
  };
  return tail(epsilon / mu - mu / 2) - Math.exp(epsilon) * tail(epsilon / mu + mu / 2);
}

test('gaussian-share calibrates its sigma for the planned rounds with the exact accountant (values computed by hand and from the reference vectors)', () => {
  const p = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'x' });
  const info = p.calibrate(job);
  // bw = 3 bx + 1/(N rho) = 15 + 1/(100 * 0.01) = 16. Theorem 1: 2 sqrt(rho/lambda) (bx + bw)
  // = 2 sqrt(10) * 21 = 42 sqrt(10), squared 17640; (2 bx)^2 = 100; Delta = sqrt(17740) = 133.191591326179...
  assert.deepEqual(p.bounds, { clip: 16, radius: 5 });
  assert.ok(Math.abs(info.sensitivity - 133.19159132617945) <= 1e-12 * 133.2, `sensitivity ${info.sensitivity}`);
  // Exact accounting: sigma = sqrt(T) Delta / mu(epsilon, delta) is linear in Delta, and the
  // reference vectors give sigma = 11.797293077095805 for Delta = 1, T = 10, epsilon 1, delta 1e-5.
  const sigma = referenceSigma(1, 1e-5, 10) * Math.sqrt(17740);
  assert.ok(Math.abs(info.sigma - sigma) <= 1e-9 * sigma, `sigma ${info.sigma}, reference ${sigma}`);
  assert.deepEqual([info.mechanism, info.accountant, info.rounds, info.seeded], ['gaussian-share', 'exact', 10, true]);
});

test('the ledger pays for exactly the budgeted rounds, then refuses; a larger rho is refused', () => {
  const p = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'y', rounds: 3 });
  const info = p.calibrate(job);
  assert.equal(info.rounds, 3, '--privacy-rounds caps the plan');
  // Three rounds at (1, 1e-5): mu = sqrt(3) Delta / sigma is the mu of one round in the reference
  // vectors, 1 / 3.730631634816171, so sigma = sqrt(3) * 3.7306... * Delta.
  const mu = 1 / referenceSigma(1, 1e-5, 1);
  assert.ok(Math.abs(info.sigma - (Math.sqrt(3) * info.sensitivity) / mu) <= 1e-9 * info.sigma);
  const x = new RidgeXUpdate(csrFromDense([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 0.5, 0]]), job.lambda, false);
  assert.equal(p.check(1, job.rho * 2).ok, false, 'rho above the calibrated one');
  let before = 0;
  for (let t = 1; t <= 3; t++) {
    assert.deepEqual(p.check(t, job.rho), { ok: true });
    p.release(x);
    // After t releases the composition is sqrt(t/3) mu-GDP; the epsilon the ledger reports must
    // be the one whose delta(epsilon) is 1e-5 there.
    const delta = gdpDeltaBySimpson(p.spent, Math.sqrt(t / 3) * mu);
    assert.ok(Math.abs(delta - 1e-5) <= 1e-6 * 1e-5, `round ${t}: spent ${p.spent}, which gives delta ${delta}`);
    assert.ok(p.spent > before);
    before = p.spent;
  }
  assert.ok(Math.abs(p.spent - 1) < 1e-9);
  const refused = p.check(4, job.rho);
  assert.equal(refused.ok, false);
  assert.match(refused.ok ? '' : refused.why, /would spend epsilon 1\.1\d* of a budget of 1/);
  assert.equal(p.check(2, job.rho).ok, false, 'a round run again is another release, and is refused too');
});

test('release adds noise of the calibrated size to the released share only', () => {
  const p = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'z' });
  const info = p.calibrate({ ...job, n: 4000 });
  const rows = Array.from({ length: 4000 }, (_, i) => [i % 2, 1 - (i % 2), 0]);
  const x = new RidgeXUpdate(csrFromDense(rows), job.lambda, false);
  x.updateFromBroadcast(new Float64Array(4000).fill(-1), job.rho, p.bounds);
  const clean = x.share.slice();
  p.release(x);
  let ss = 0;
  for (let i = 0; i < clean.length; i++) ss += (x.released[i] - clean[i]) ** 2;
  const sd = Math.sqrt(ss / clean.length);
  assert.ok(Math.abs(sd / info.sigma - 1) < 0.05, `noise sd ${sd} vs sigma ${info.sigma}`);
  assert.deepEqual(x.share, clean, 'the private share itself is untouched');
});

test('paper mechanism: sensitivity from Lemma 1, advanced composition, noise only in the column space of D', () => {
  const p = new Privacy({ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 2, c1: 3, seed: 'p' });
  const info = p.calibrate(job);
  // C = 3 / (d_m rho) (lambda c1 + (1 + M rho) b1) = 3 / (3 * 0.01) * (0.001 * 3 + 1.02 * 2) = 100 * 2.043.
  const C = 204.3;
  assert.ok(Math.abs(info.sensitivity - C) < 1e-12 * C);
  assert.equal(info.accountant, 'advanced');
  // Rank-2 data in R^3 rows: the released perturbation lies in col(D).
  const rows = Array.from({ length: 30 }, (_, i) => [i % 3, (i * 7) % 5, (i % 3) + 2 * ((i * 7) % 5)]);
  const D = csrFromDense(rows);
  const x = new RidgeXUpdate(D, job.lambda, false);
  p.release(x); // released was 0: now it is D xi
  // Project onto the orthogonal complement of col(D): (1, 2, -1) spans null(D^T D), so a
  // vector in col(D) is D v; check D^T r is consistent by least squares residual ~ 0.
  const r = x.released;
  const g = csrMatTVec(new Float64Array(3), D, r);
  const gram = [0, 1, 2].map((j) => csrMatTVec(new Float64Array(3), D, csrMatVec(new Float64Array(30), D, Float64Array.from([0, 1, 2], (k) => (k === j ? 1 : 0)))));
  // Solve on the 2-dimensional range: v = (a, b, 0) with [g00 g01; g10 g11] (a, b) = (g0, g1).
  const det = gram[0][0] * gram[1][1] - gram[0][1] * gram[1][0];
  const a = (g[0] * gram[1][1] - g[1] * gram[1][0]) / det;
  const b = (gram[0][0] * g[1] - gram[0][1] * g[0]) / det;
  const fit = csrMatVec(new Float64Array(30), D, Float64Array.of(a, b, 0));
  const resid = Math.hypot(...r.map((v, i) => v - fit[i]));
  // Up to the rounding of released values to the noise grid (a post-processing step).
  const spacing = 2 ** (Math.floor(Math.log2(info.sigma)) - GRID_BITS);
  assert.ok(resid <= (Math.sqrt(30) * spacing) / 2, `residual ${resid}, grid ${spacing}`);
  assert.ok(Math.hypot(...r) > 100 * resid, 'the noise itself is much larger than the rounding');
  assert.ok(Math.hypot(...r) > 0);
});

test('the ball-constrained x-update satisfies the KKT conditions', () => {
  const rand = seeded('kkt');
  for (let k = 0; k < 40; k++) {
    const n = 20 + Math.floor(rand() * 30);
    const d = 1 + Math.floor(rand() * 5);
    const dual = rand() < 0.3; // also the N x N form
    const cols = dual ? n + 3 : d;
    const rows = Array.from({ length: n }, () => Array.from({ length: cols }, () => (rand() < 0.4 ? 0 : rand() - 0.5)));
    const D = csrFromDense(rows, cols);
    const lambda = 10 ** (-3 + 2 * rand());
    const rho = 10 ** (-2 + 2 * rand());
    const w = Float64Array.from({ length: n }, () => (rand() - 0.5) * 40);
    const x = new RidgeXUpdate(D, lambda, false);
    x.solve(w.slice(), rho);
    const free = Math.sqrt(x.penaltySq());
    const radius = free * (0.1 + 0.8 * rand()); // binding
    x.solve(w.slice(), rho, radius);
    assert.ok(Math.abs(Math.sqrt(x.penaltySq()) - radius) < 1e-8 * radius, 'on the sphere');
    // grad = lambda x + rho D^T (D x - w) = -mu x with mu >= 0
    const res = csrMatVec(new Float64Array(n), D, x.x).map((v, i) => v - w[i]);
    const grad = csrMatTVec(new Float64Array(cols), D, res).map((v, j) => rho * v + lambda * x.x[j]);
    const mu = -grad.reduce((acc, v, j) => acc + v * x.x[j], 0) / x.penaltySq();
    assert.ok(mu >= 0);
    const kkt = Math.hypot(...grad.map((v, j) => v + mu * x.x[j]));
    assert.ok(kkt < 1e-7 * (Math.hypot(...grad) + 1e-12), `KKT residual ${kkt}`);
    x.solve(w.slice(), rho, free * 2);
    assert.ok(Math.abs(Math.sqrt(x.penaltySq()) - free) < 1e-9 * free, 'a slack ball changes nothing');
  }
});

test('the ledger survives a restart: saved after each release, restored for the same job only', (ctx) => {
  const dir = tempDir(ctx, 'ledger-');
  const path = join(dir, 'model.ledger.json');
  const x = new RidgeXUpdate(csrFromDense([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), job.lambda, false);
  const a = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'l' });
  a.calibrate(job);
  for (let t = 1; t <= 3; t++) {
    a.release(x);
    a.saveLedger(path, 'job-1');
  }
  const restarted = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'l' });
  restarted.calibrate(job);
  restarted.restoreLedger(path, 'other-job');
  assert.equal(restarted.releases, 0, 'another job\'s ledger is not ours');
  restarted.restoreLedger(path, 'job-1');
  assert.equal(restarted.releases, 3);
  assert.ok(Math.abs(restarted.spent - a.spent) < 1e-15, 'the restarted party knows what it spent');
});

test('the calibration is made once per job: a later setup cannot change sigma, and a worse one is refused', () => {
  const p = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'once' });
  const first = p.calibrate(job);
  const x = new RidgeXUpdate(csrFromDense([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), job.lambda, false);
  p.release(x);
  p.release(x);
  const spent = p.spent;
  // A rejoin's setup announcing ten times the rounds would make a fresh calibration cheaper per round.
  const again = p.calibrate({ ...job, rounds: job.rounds * 10 });
  assert.equal(again.sigma, first.sigma);
  assert.equal(again.rounds, first.rounds);
  assert.equal(p.spent, spent, 'past releases keep their price');
  assert.throws(() => p.calibrate({ ...job, rho: job.rho * 2 }), /differ from/);
  assert.throws(() => p.calibrate({ ...job, lambda: job.lambda / 2 }), /differ from/);
});

test('reportedSpent and withinBudget: one relative tolerance, BUDGET_RTOL = 1e-9', () => {
  assert.equal(BUDGET_RTOL, 1e-9);
  assert.equal(reportedSpent(1.0000000000000004, 1), 1, 'rounding above the budget is reported as the budget');
  assert.equal(reportedSpent(1 + 0.9e-9, 1), 1);
  assert.equal(reportedSpent(0.75, 1), 0.75, 'below the budget: as computed');
  assert.equal(reportedSpent(1 + 2e-9, 1), 1 + 2e-9, 'a real overspend is not hidden');
  assert.equal(reportedSpent(5.000000000000004, 5), 5);
  assert.equal(withinBudget(1 + 0.9e-9, 1), true);
  assert.equal(withinBudget(1 + 1.1e-9, 1), false);
  assert.equal(withinBudget(100 + 0.9e-7, 100), true, 'relative, not absolute');
  assert.equal(withinBudget(100 + 1.1e-7, 100), false);
});

test('the ledger never reports more than the budget because of rounding', () => {
  // epsilon 1 over 3 rounds, exact accountant: accounting the calibrated sigma gives 1.0000000000000004.
  const p = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'round', rounds: 3 });
  const info = p.calibrate(job);
  const raw = accountEpsilon({ sigma: info.sigma, delta: 1e-5, rounds: 3, sensitivity: info.sensitivity, method: 'exact' });
  assert.ok(raw > 1 && raw - 1 < 1e-12, `the case this test is about: raw ${raw}`);
  const x = new RidgeXUpdate(csrFromDense([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), job.lambda, false);
  for (let t = 1; t <= 3; t++) {
    assert.deepEqual(p.check(t, job.rho), { ok: true }, `round ${t}`);
    p.release(x);
    assert.ok(p.spent <= 1, `round ${t}: spent ${p.spent}`);
  }
  assert.equal(p.spent, 1);
  assert.equal((p.report('party-1', 'job', 0) as { epsilonSpent: number }).epsilonSpent, 1);
  assert.equal(p.check(4, job.rho).ok, false);
  // The paper mechanism's advanced accountant overshoots too (1.0000000000000002 here): same result.
  const q = new Privacy({ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 1, c1: 1, seed: 'round' });
  const qi = q.calibrate(job);
  const qraw = accountEpsilon({ sigma: qi.sigma, delta: 1e-5, rounds: 10, sensitivity: qi.sensitivity, method: 'advanced' });
  for (let t = 1; t <= 10; t++) {
    assert.deepEqual(q.check(t, job.rho), { ok: true }, `paper, round ${t}`);
    q.release(x);
  }
  assert.ok(qraw > 1, `advanced accountant raw ${qraw}`);
  assert.equal(q.spent, 1);
});

/**
 * The one entry of a ledger as saveLedger writes it after `releases` releases, for the tests
 * below to break (in a file of that one entry: fileOf), and the ledger's path (its key beside it).
 */
function validLedger(releases: number, dir = mkdtempSync(join(tmpdir(), 'ledger-valid-'))): { ledger: Record<string, unknown>; privacy: Privacy; path: string } {
  const p = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'v' });
  p.calibrate(job);
  const x = new RidgeXUpdate(csrFromDense([[1, 0, 0], [0, 1, 0], [0, 0, 1]]), job.lambda, false);
  for (let t = 0; t < releases; t++) p.release(x);
  const path = join(dir, 'l.json');
  p.saveLedger(path, 'job-1');
  return { ledger: JSON.parse(readFileSync(path, 'utf8')).entries[0], privacy: p, path };
}

/** A ledger file of the one entry `e` (as written: the whole entry is `e`, however it was edited). */
const fileOf = (e: Record<string, unknown>, format = LEDGER_FORMAT) => JSON.stringify({ format, entries: [e] });

test('a ledger written by saveLedger parses back to what the party holds', () => {
  const { ledger, privacy, path } = validLedger(4);
  rmSync(join(path, '..'), { recursive: true, force: true });
  const l = parseLedger('l.json', fileOf(ledger)).entries[0];
  assert.equal(l.jobId, 'job-1');
  assert.equal(l.releases, 4);
  assert.equal(l.epsilonSpent, privacy.spent);
  assert.equal(l.info.sigma, privacy.calibrate(job).sigma);
  assert.deepEqual([l.rho, l.lambda, l.bw], [job.rho, job.lambda, 16]); // bw = 3 * 5 + 1/(100 * 0.01)
});

test('a malformed ledger is a DataError naming the file and what is wrong, never ignored', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-bad-'));
  try {
    const { ledger, path: made } = validLedger(3);
    rmSync(join(made, '..'), { recursive: true, force: true });
    const info = ledger.info as Record<string, unknown>;
    const text = fileOf(ledger);
    const { bw: _b, ...noBw } = ledger;
    const { sigma: _s, ...infoNoSigma } = info;
    const cases: [string, string, RegExp][] = [
      ['truncated', text.slice(0, text.length / 2), /not JSON/],
      ['empty', '', /not JSON/],
      ['array', '[]', /expected a JSON object/],
      ['null', 'null', /expected a JSON object/],
      ['old format', fileOf(ledger, 'admm-share-ledger/1'), /format: expected 'admm-share-ledger\/4', got "admm-share-ledger\/1"/],
      ['no format', JSON.stringify({ entries: [ledger] }), /format: missing/],
      ['missing bw', fileOf(noBw), /bw: missing/],
      ['extra field', fileOf({ ...ledger, extra: 1 }), /unexpected field 'extra'/],
      ['__proto__', text.replace(/"entries":\[\{/, '"entries":[{"__proto__":{},'), /unexpected field '__proto__'/],
      ['negative releases', fileOf({ ...ledger, releases: -1 }), /releases: expected an integer >= 0, got -1/],
      ['fractional releases', fileOf({ ...ledger, releases: 2.5 }), /releases: expected an integer >= 0/],
      ['string releases', fileOf({ ...ledger, releases: '3' }), /releases: expected an integer >= 0, got "3"/],
      ['null epsilonSpent', fileOf({ ...ledger, epsilonSpent: null }), /epsilonSpent: expected a number >= 0, got null/],
      ['zero rho', fileOf({ ...ledger, rho: 0 }), /rho: expected a positive number/],
      ['bad job id', fileOf({ ...ledger, jobId: 'a b' }), /jobId: expected a job id/],
      ['info not an object', fileOf({ ...ledger, info: 7 }), /info: expected a JSON object, got number/],
      ['info without sigma', fileOf({ ...ledger, info: infoNoSigma }), /info: missing field 'sigma'/],
      ['negative sigma', fileOf({ ...ledger, info: { ...info, sigma: -1 } }), /info: sigma and sensitivity must be >= 0/],
      ['unknown mechanism', fileOf({ ...ledger, info: { ...info, mechanism: 'laplace' } }), /info\.mechanism: 'laplace' is not one of/],
      ['mechanism none', fileOf({ ...ledger, info: { ...info, mechanism: 'none' } }), /info\.mechanism is 'none'/],
      ['spent disagrees', fileOf({ ...ledger, epsilonSpent: 0 }), /epsilonSpent 0 does not match the 3 releases recorded/],
      ['releases disagree', fileOf({ ...ledger, releases: 1 }), /does not match the 1 releases recorded/],
    ];
    for (const [name, body, re] of cases) {
      const path = join(dir, `${name.replace(/\W/g, '-')}.ledger.json`);
      writeFileSync(path, body);
      const p = new Privacy({ mechanism: 'gaussian-share', epsilon: 1, delta: 1e-5, bx: 5, seed: 'bad' });
      assert.throws(
        () => p.restoreLedger(path, 'job-1'),
        (err: unknown) => {
          assert.ok(err instanceof DataError, `${name}: expected a DataError, got ${String(err)}`);
          assert.equal(err.file, path);
          assert.equal(err.exitCode, 65);
          assert.ok(err.message.startsWith(`${path}: privacy ledger: `), `${name}: ${err.message}`);
          assert.match(err.message, re, name);
          return true;
        },
      );
      assert.equal(p.releases, 0, `${name}: nothing restored`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a restart with another mechanism than the ledger was calibrated for is refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-mech-'));
  try {
    const { path } = validLedger(2, dir);
    const p = new Privacy({ mechanism: 'paper', epsilon: 1, delta: 1e-5, bx: 5, b1: 1, c1: 1, seed: 'm' });
    p.restoreLedger(path, 'job-1');
    assert.equal(p.releases, 2);
    assert.throws(() => p.calibrate(job), (e: unknown) => e instanceof ConfigError && /calibrated for gaussian-share/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('score-release: one draw per job; a repeat, in the process or after a restart, sends the released values for the rows asked, in their order; other rows and a lost file are refused', (ctx) => {
  const dir = tempDir(ctx, 'release-');
  const ledger = join(dir, 'model.ledger.json');
  const cfg = { mechanism: 'score-release', epsilon: 2, delta: 1e-5, bx: 20, seed: 'r' } as const;
  const oneShot = { ...job, rounds: 1, algorithm: 'one-shot' as const, bw: 1 };
  const a = new Privacy(cfg);
  a.calibrate(oneShot);
  const rows = Uint32Array.from([7, 2, 5, 0]);
  const scores = Float64Array.from([0.5, -0.5, 0.25, 0]);
  const first = a.scoreRelease(scores, rows, ledger, 'job-1');
  assert.ok(first.some((v, k) => v !== scores[k]), 'noise was added');
  const spent = a.spent;
  assert.deepEqual(a.scoreRelease(scores, rows, ledger, 'job-1'), first, 'the same values again');
  assert.equal(a.spent, spent);
  const file = readFileSync(join(dir, 'model.release.bin'));
  assert.deepEqual(Array.from(new Float64Array(file.buffer, file.byteOffset, 8)), [7, 2, 5, 0, ...first]);

  const b = new Privacy(cfg);
  b.restoreLedger(ledger, 'job-1');
  b.calibrate(oneShot);
  // The coordinator's order changed and row 2 is no longer used: the same values, reindexed.
  assert.deepEqual(Array.from(b.scoreRelease(scores, Uint32Array.from([0, 5, 7]), ledger, 'job-1')), [first[3], first[2], first[0]]);
  assert.equal(b.releases, 1);
  assert.ok(Math.abs(b.spent - spent) < 1e-15);
  assert.throws(() => b.scoreRelease(scores, Uint32Array.from([0, 3]), ledger, 'job-1'), (e: unknown) => e instanceof ConfigError && /a row it did not release \(row 4 of its data\)/.test(e.message));

  rmSync(join(dir, 'model.release.bin'));
  const c = new Privacy(cfg);
  c.restoreLedger(ledger, 'job-1');
  c.calibrate(oneShot);
  assert.throws(() => c.scoreRelease(scores, rows, ledger, 'job-1'), (e: unknown) => e instanceof ConfigError && /the released vector is lost; it will not release again/.test(e.message));
});
