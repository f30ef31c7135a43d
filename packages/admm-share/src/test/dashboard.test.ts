// The dashboard in a real browser: the README's `admm-share simulate --dashboard` on the spam
// corpus, and headless Chromium (Debian's chromium package, driven by puppeteer-core) opens the
// page it prints. The page must show the round counter rising while the job runs, draw the objective
// chart (uPlot's canvas holds the series' pixels), show every party connected during training
// and gone after it, and end on the numbers of the run's own summary.json and trace.jsonl. A
// screenshot is saved as test-artifacts/dashboard.png. Without Chromium the two browser tests
// are skipped, saying why and how to install it, so that a fresh clone's `npm test` passes; under
// CI=true a missing browser fails them instead (.ci/run installs it, so CI never skips quietly).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { readTrace } from '@admm-share/coordinator';
import { DASHBOARD_LINE, SIMULATION_FILE, readSimulation } from '../simulate.js';
import { ARTIFACTS, CHROMIUM_ARGS, chromiumPath, pageProblems, skipBrowser } from './browser.js';
import { BIN, type Proc, STACK_LINE, killAll, run, tempDir } from './procs.js';
import { README, fencedCommands } from './readme-blocks.js';

after(killAll);

/** Resolves with the first match of `re` on the process's stdout (rejects if it exits first). */
function stdoutMatch(p: Proc, re: RegExp): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = re.exec(p.stdout());
      if (m) {
        p.child.stdout!.off('data', check);
        resolve(m);
      }
    };
    p.child.stdout!.on('data', check);
    void p.exit.then(({ code }) => reject(new Error(`process exited (code ${code}) before printing ${re}; stderr: ${p.stderr()}`)));
    check();
  });
}

/**
 * Installed before the page's own scripts: records every value the round counter and the
 * party table take, so the test sees what a person watching would have seen, not only where
 * the page ends.
 */
const RECORDER = `
  window.__seen = { rounds: [], parties: [] };
  document.addEventListener('DOMContentLoaded', () => {
    const round = document.getElementById('round');
    const body = document.querySelector('#parties tbody');
    new MutationObserver(() => window.__seen.rounds.push({ round: Number(round.textContent), phase: document.getElementById('phase').textContent })).observe(round, { childList: true, characterData: true, subtree: true });
    new MutationObserver(() => window.__seen.parties.push({ round: Number(round.textContent), states: [...body.querySelectorAll('td[data-state]')].map((td) => td.dataset.state) })).observe(body, { childList: true });
  });
`;

/** Pixels of the canvas in `#id` drawn in the colour r,g,b (the series' stroke), counted in the page. */
const seriesPixels = (id: string, [r, g, b]: [number, number, number]) => `(() => {
  const c = document.querySelector('#${id} canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - ${r}) < 40 && Math.abs(d[i + 1] - ${g}) < 40 && Math.abs(d[i + 2] - ${b}) < 40 && d[i + 3] > 128) n++;
  return n;
})()`;

test('simulate --dashboard in headless Chromium: the round counter rises, the objective chart draws, the parties are connected then gone, and the page ends on summary.json and trace.jsonl; screenshot saved', { skip: skipBrowser }, async (t) => {
  const executablePath = chromiumPath();
  const out = tempDir(t);
  let browser: Browser | undefined;
  t.after(() => browser?.close());
  // Launched first, so that the page is open before training starts.
  browser = await puppeteer.launch({ executablePath, headless: true, args: CHROMIUM_ARGS });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1400 });
  const problems = pageProblems(page);
  page.on('requestfailed', (r) => {
    // The event stream is cut when the coordinator stops; that is not a problem of the page.
    if (!r.url().endsWith('api/events')) problems.push(`request failed: ${r.url()}`);
  });
  await page.evaluateOnNewDocument(RECORDER);

  // The page asks for nothing outside the coordinator's port (no CDN): every request, from the
  // first, is to the address simulate printed.
  let url = '';
  page.on('request', (r) => {
    if (!r.url().startsWith(url) && !r.url().startsWith('data:')) problems.push(`request outside the coordinator: ${r.url()}`);
  });

  // The README's command, as written, with what a test must add: its own output directory, and
  // without Anderson acceleration 100 rounds, long enough to watch.
  const commands = fencedCommands(readFileSync(README, 'utf8'), '<!-- readme-test:dashboard');
  assert.equal(commands.length, 1);
  const [npx, program, ...args] = commands[0];
  assert.deepEqual([npx, program, args[0]], ['npx', 'admm-share', 'simulate']);
  assert.ok(args.includes('--dashboard') && args.includes('--eval-every'), args.join(' '));
  const linger = args[args.indexOf('--dashboard-linger') + 1];
  const sim = run(BIN.share, [...args, '--anderson', '0', '--rounds', '100', '--out', out]);
  url = (await stdoutMatch(sim, DASHBOARD_LINE))[1];
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
  await page.goto(url);

  // While the job runs (phase training, round 5 or later, the job not finished), the objective
  // chart already has its line on the canvas.
  await page.waitForFunction(`document.getElementById('phase').textContent === 'training' && Number(document.getElementById('round').textContent) >= 5`, { timeout: 300_000 });
  const live = (await page.evaluate(`({ phase: document.getElementById('phase').textContent, round: Number(document.getElementById('round').textContent), pixels: ${seriesPixels('chart-objective', [0x17, 0x5c, 0xd3])} })`)) as { phase: string; round: number; pixels: number };
  assert.equal(live.phase, 'training', 'measured while the job runs');
  assert.equal(await page.$eval('#link', (e) => e.textContent), 'live');
  assert.ok(live.round < 100 && live.pixels > 20, `at round ${live.round} the objective line has ${live.pixels} pixels on the canvas`);
  // What the page reads holds no per-sample values: no list in the status API is as long as the
  // training or the test set (a share, a score vector or the labels would be).
  const status = (await (await fetch(`${url}api/status`)).json()) as { job: { rows: number; testRows: number } };
  const longest = (v: unknown): number => (Array.isArray(v) ? Math.max(v.length, ...v.map(longest)) : v && typeof v === 'object' ? Math.max(0, ...Object.values(v).map(longest)) : 0);
  assert.ok(status.job.rows > 100 && status.job.testRows > 100, JSON.stringify(status.job));
  assert.ok(longest(status) < Math.min(status.job.rows, status.job.testRows), `a list of ${longest(status)} values in /api/status`);

  await page.waitForFunction(`document.getElementById('phase').textContent === 'done'`, { timeout: 300_000 });
  await page.waitForFunction(`!document.getElementById('result').classList.contains('hidden')`);
  // No longer "live" once the job has ended, whether the coordinator is still up or has stopped.
  assert.match((await page.$eval('#link', (e) => e.textContent)) ?? '', /^the job has ended \(done\)|^the coordinator has stopped/);
  // simulate writes simulation.json (its baselines) before it says the dashboard stays up.
  await stdoutMatch(sim, /the dashboard stays up for/);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  const trace = readTrace(join(out, 'trace.jsonl'));
  assert.equal(summary.rounds, 100);
  assert.equal(trace.length, 100);

  // What was seen while the job ran: the counter went up step by step, never down, and at
  // least three distinct rounds were on screen before the last one.
  const seen = (await page.evaluate('window.__seen')) as { rounds: { round: number; phase: string }[]; parties: { round: number; states: string[] }[] };
  const shown = seen.rounds.map((r) => r.round);
  for (let i = 1; i < shown.length; i++) assert.ok(shown[i] >= shown[i - 1], `the round counter went back: ${shown.join(', ')}`);
  const during = [...new Set(seen.rounds.filter((r) => r.phase === 'training' && r.round > 0 && r.round < summary.rounds).map((r) => r.round))];
  assert.ok(during.length >= 3, `rounds shown during training: ${during.join(', ')}`);
  // Every party connected while rounds ran, gone at the end.
  assert.ok(
    seen.parties.some((s) => s.round > 0 && s.round < summary.rounds && s.states.length === 3 && s.states.every((x) => x === 'connected')),
    `party states seen: ${JSON.stringify(seen.parties.slice(0, 5))}`,
  );
  const finalStates = (await page.$$eval('#parties td[data-state]', (tds) => tds.map((td) => td.textContent))) as string[];
  assert.deepEqual(finalStates, ['gone', 'gone', 'gone']);
  const partyIds = (await page.$$eval('#parties tbody tr', (trs) => trs.map((tr) => tr.firstChild?.textContent))) as string[];
  assert.deepEqual(partyIds, summary.parties.map((p: { id: string }) => p.id));

  // The end state is the run's: its round, its objective curve point for point, its test metrics.
  assert.equal(await page.$eval('#round', (e) => e.textContent), String(summary.rounds));
  const chart = (await page.evaluate('(() => { const u = window.dashboard.charts.objective; return { x: u.data[0], y: u.data[1] }; })()')) as { x: number[]; y: number[] };
  assert.deepEqual(chart.x, trace.map((r) => r.round));
  assert.deepEqual(chart.y, trace.map((r) => r.objective));
  const pixels = (await page.evaluate(seriesPixels('chart-objective', [0x17, 0x5c, 0xd3]))) as number;
  assert.ok(pixels > 100, `the objective line has ${pixels} pixels on the canvas`);
  const cells = (await page.$$eval('#comparison tbody tr:first-child td', (tds) => tds.map((td) => td.textContent))) as string[];
  const shownMetric = (k: number) => Number(cells[k]);
  assert.ok(Math.abs(shownMetric(1) - summary.objective) <= 1e-6, `objective ${cells[1]} vs ${summary.objective}`);
  assert.ok(Math.abs(shownMetric(2) - summary.test.logLoss) <= 1e-4, `log loss ${cells[2]} vs ${summary.test.logLoss}`);
  assert.ok(Math.abs(shownMetric(3) - summary.test.accuracy) <= 1e-4, `accuracy ${cells[3]} vs ${summary.test.accuracy}`);
  assert.ok(Math.abs(shownMetric(4) - summary.test.auc) <= 1e-4, `AUC ${cells[4]} vs ${summary.test.auc}`);
  // Beside it, party 1's local-only model: the baseline simulate fitted before the job and
  // printed in its table (simulation.json's baselines.local).
  const local = (await page.$$eval('#comparison tbody tr:nth-child(2) td', (tds) => tds.map((td) => td.textContent))) as string[];
  const b = readSimulation(join(out, SIMULATION_FILE)).baselines!.local;
  assert.ok(b.test, 'the local baseline has test metrics');
  assert.equal(local[0], `${b.party} alone (its local-only model)`);
  assert.ok(Math.abs(Number(local[1]) - b.objective) <= 1e-6, `local objective ${local[1]} vs ${b.objective}`);
  assert.ok(Math.abs(Number(local[2]) - b.test.logLoss) <= 1e-4, `local log loss ${local[2]} vs ${b.test.logLoss}`);
  assert.ok(Math.abs(Number(local[3]) - b.test.accuracy) <= 1e-4, `local accuracy ${local[3]} vs ${b.test.accuracy}`);
  assert.ok(b.test.logLoss > summary.test.logLoss, 'party 1 alone is worse than the joint model');
  // Test metrics were drawn at every evaluation (every 10 rounds).
  const every = Number(args[args.indexOf('--eval-every') + 1]);
  const tested = (await page.evaluate('window.dashboard.charts.test.data[0]')) as number[];
  assert.deepEqual(tested, Array.from({ length: 100 / every }, (_, k) => every * (k + 1)));

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });
  assert.deepEqual(problems, []);

  // simulate printed its table and keeps the dashboard up (--dashboard-linger) until stopped.
  assert.match(sim.stdout(), new RegExp(`the dashboard stays up for ${linger} s`));
  sim.child.kill('SIGTERM');
  assert.equal((await sim.exit).code, 130);
  await assert.rejects(fetch(`${url}healthz`), 'the coordinator was stopped with simulate');
});

test('simulate --dashboard-linger: the dashboard stays up after the job, then simulate exits 0; the flags need --dashboard', async (t) => {
  const out = tempDir(t);
  const sim = run(BIN.share, ['simulate', '--rounds', '5', '--dashboard', '--dashboard-linger', '1', '--no-baselines', '--out', out]);
  const [, url] = await stdoutMatch(sim, DASHBOARD_LINE);
  await stdoutMatch(sim, /the dashboard stays up for 1 s/);
  assert.equal(sim.stdout().match(/^dashboard: /gm)?.length, 1, 'one dashboard line');
  assert.ok(sim.stdout().indexOf('the dashboard stays up') > sim.stdout().indexOf('written to'), 'the table comes first');
  assert.equal((await sim.exit).code, 0, sim.stderr());
  await assert.rejects(fetch(`${url}healthz`), 'closed after the linger');

  for (const flag of [['--dashboard-linger', '5'], ['--dashboard-port', '8080']]) {
    const p = run(BIN.share, ['simulate', '--rounds', '1', '--out', join(out, 'x'), ...flag]);
    assert.equal((await p.exit).code, 64);
    assert.match(p.stderr(), /--dashboard-port and --dashboard-linger need --dashboard/);
    assert.doesNotMatch(p.stderr(), STACK_LINE);
  }
});

test('a one-shot private job with label privacy: the page and the API show each passive party\'s budget spent against its total, the label epsilon, and the active party\'s local-only model beside the job\'s, as summary.json has them', { skip: skipBrowser }, async (t) => {
  const executablePath = chromiumPath();
  const out = tempDir(t);
  const sim = run(BIN.share, ['simulate', '--epsilon', '1', '--label-epsilon', '2', '--dashboard', '--dashboard-linger', '600', '--no-baselines', '--out', out]);
  t.after(() => sim.kill());
  const [, url] = await stdoutMatch(sim, DASHBOARD_LINE);
  await stdoutMatch(sim, /the dashboard stays up for 600 s/);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  const spent = Object.fromEntries(summary.privacy.map((q: { party: string; epsilonSpent: number }) => [q.party, q.epsilonSpent]));
  assert.equal(summary.algorithm, 'one-shot');
  assert.ok(summary.oneShot.local, 'the active party fitted its local-only model');

  type Status = { job: { algorithm: string; labelEpsilon: number }; parties: { id: string; role: string; epsilonSpent: number; epsilonBudget: number | null }[]; result: { local: unknown } };
  const st = (await (await fetch(`${url}api/status`)).json()) as Status;
  assert.equal(st.job.algorithm, 'one-shot');
  assert.equal(st.job.labelEpsilon, 2);
  assert.deepEqual(st.parties.map((p) => [p.id, p.role, p.epsilonBudget, p.epsilonSpent]), [
    ['party-1', 'active', null, spent['party-1']],
    ['party-2', 'passive', 1, spent['party-2']],
    ['party-3', 'passive', 1, spent['party-3']],
  ]);
  assert.deepEqual(st.result.local, { party: 'party-1', objective: summary.oneShot.local.objective, test: summary.oneShot.local.test });
  const metrics = await (await fetch(`${url}metrics`)).text();
  const sample = (name: string) => Number(new RegExp(`^${name.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(metrics)?.[1]);
  assert.equal(sample('admm_label_epsilon'), 2);
  for (const party of ['party-2', 'party-3']) {
    assert.equal(sample(`admm_epsilon_budget{party="${party}"}`), 1);
    assert.equal(sample(`admm_epsilon_spent{party="${party}"}`), spent[party]);
  }

  const browser = await puppeteer.launch({ executablePath, headless: true, args: CHROMIUM_ARGS });
  t.after(() => browser.close());
  const page = await browser.newPage();
  const problems = pageProblems(page);
  await page.goto(url);
  await page.waitForFunction(`!document.getElementById('result').classList.contains('hidden')`);
  const budgets = (await page.$$eval('#parties tbody tr td:last-child', (tds) => tds.map((td) => td.textContent))) as string[];
  assert.deepEqual(budgets, ['none (active party: no noise)', `${spent['party-2']} / 1 (score-release)`, `${spent['party-3']} / 1 (score-release)`]);
  assert.match((await page.$eval('#label-privacy', (e) => e.textContent)) ?? '', /label epsilon 2\b/);
  const rows = (await page.$$eval('#comparison tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)))) as string[][];
  assert.equal(rows.length, 3, 'the job, the local-only model, the base rate');
  assert.equal(rows[1][0], 'party-1 alone (its local-only model)');
  assert.ok(Math.abs(Number(rows[1][2]) - summary.oneShot.local.test.logLoss) <= 1e-4, `local log loss ${rows[1][2]}`);
  assert.ok(Math.abs(Number(rows[0][2]) - summary.test.logLoss) <= 1e-4, `job log loss ${rows[0][2]}`);
  // Its one round is drawn as a point.
  assert.ok(((await page.evaluate(seriesPixels('chart-objective', [0x17, 0x5c, 0xd3]))) as number) > 10, 'the objective point is drawn');
  assert.deepEqual(problems, []);
  sim.child.kill('SIGTERM');
  assert.equal((await sim.exit).code, 130);
});
