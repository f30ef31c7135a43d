// The alignment on the job's HTTP port, over real processes: at a million rows the private set
// intersection is most of a job's time, so /api/status, /metrics and the page show it step by
// step while it runs. A coordinator and two parties align N generated ids (enough for each step
// to take several chunks of 4,096, a few seconds on two cores); the test polls the status
// API and watches the page in headless Chromium meanwhile. It must see a step part done (done <
// total, with an estimate of the time left), the metrics at that moment, a progress bar on the
// page; and at the end every step done with the ids each side holds (N, known from the data, not
// from the coordinator), and the alignment's seconds as summary.json records them.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';
import { syntheticDataset } from '@admm-share/core';
import { writeVerticalSplit } from '../split.js';
import { ARTIFACTS, CHROMIUM_ARGS, chromiumPath, pageProblems, skipBrowser } from './browser.js';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

/**
 * Ids on every side: five chunks of 4,096 per step. Two threads report the first two chunks
 * together and the last alone, so a step is part done for two chunks' time (about 0.4 s or
 * more), longer than the page's 250 ms between updates.
 */
const N = 20_480;

interface Step {
  step: string;
  party: string | null;
  set: string;
  done: number;
  total: number | null;
  seconds: number;
  etaSeconds: number | null;
}
interface Status {
  phase: string;
  alignment: { phase: string; seconds: number | null; waitingFor: { party: string; joined: boolean }[]; steps: Step[] };
}

/** Prometheus text as 'name{a="x",b="y"}' (labels sorted by name) -> value. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = [...(m[2] ?? '').matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)].map(([, k, v]) => `${k}="${v}"`).sort();
    out.set(labels.length ? `${m[1]}{${labels.join(',')}}` : m[1], Number(m[3]));
  }
  return out;
}
const key = (name: string, s: Pick<Step, 'step' | 'party' | 'set'>) => `${name}{party="${s.party ?? ''}",set="${s.set}",step="${s.step}"}`;
const running = (s: Step) => s.total !== null && s.done > 0 && s.done < s.total;

/**
 * Installed before the page's scripts: every state the alignment's table takes (each row's
 * progress bar and its estimate), so the test sees what a person watching saw.
 */
const RECORDER = `
  window.__aligning = [];
  document.addEventListener('DOMContentLoaded', () => {
    const body = document.querySelector('#alignment-steps tbody');
    if (body) new MutationObserver(() => window.__aligning.push([...body.rows].map((tr) => {
      const bar = tr.querySelector('progress');
      return { step: tr.dataset.step, party: tr.dataset.party, value: bar ? bar.value : null, max: bar ? bar.max : null, left: tr.cells[6].textContent };
    }))).observe(body, { childList: true });
  });
`;

test(`the alignment of ${N} ids on the job's HTTP port: /api/status and /metrics show each step's ids done of the total while it runs and all done at the end, with the alignment's seconds; the page shows a progress bar per step, then the duration`, async (t) => {
  const dir = tempDir(t);
  const s = syntheticDataset({ trainRows: N, testRows: 10, blocks: [3, 3], seed: 'dashboard-alignment' });
  const files = writeVerticalSplit(join(dir, 'data'), [3, 3], s.train);
  const out = join(dir, 'out');
  const coord = run(BIN.coordinator, [
    '--port', '0', '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out,
    '--rounds', '2', '--http-port', '0', '--http-linger', '60',
  ]);
  t.after(() => coord.kill());
  const { httpPort } = (await coord.waitFor((r) => r.msg === 'http listening')) as { httpPort: number };
  const url = `http://127.0.0.1:${httpPort}/`;

  // The status API every 100 ms (the port serves 20 requests a second between all clients);
  // the metrics once, the first time a party's intersection is seen part done.
  const seen: Status[] = [];
  let midway: { step: Step; metrics: Map<string, number> } | undefined;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const st = (await (await fetch(`${url}api/status?limit=1`)).json()) as Status;
      seen.push(st);
      const step = st.alignment?.steps.find((x) => x.party !== null && running(x));
      if (step && !midway) midway = { step, metrics: samples(await (await fetch(`${url}metrics`)).text()) };
      if (st.phase === 'done' || st.phase === 'failed') return;
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  t.after(() => (polling = false));

  // The page opens before the parties start: the alignment is shown while it runs.
  const browser = skipBrowser ? undefined : await puppeteer.launch({ executablePath: chromiumPath(), headless: true, args: CHROMIUM_ARGS });
  t.after(() => browser?.close());
  const page = await browser?.newPage();
  const problems = page ? pageProblems(page) : [];
  if (page) {
    await page.setViewport({ width: 1280, height: 1000 });
    await page.evaluateOnNewDocument(RECORDER);
    await page.goto(url);
    await page.waitForSelector('#alignment[data-phase="aligning"] #alignment-steps progress', { timeout: 10_000 });
    assert.equal(await page.$eval('#alignment-waiting', (e) => e.textContent), 'Waiting for the ids of party-1 (not joined yet), party-2 (not joined yet).');
  } else t.diagnostic(`the page is not checked: ${skipBrowser}`);

  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  for (const f of files.parties) run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`)]);
  if (page) {
    // A party's bar part filled, with an estimate of the time left.
    await page.waitForFunction(`[...document.querySelectorAll('#alignment-steps tr[data-party^="party-"] progress')].some((p) => p.value > 0 && p.value < p.max)`, { timeout: 60_000 });
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-alignment.png') });
  }
  await poller;
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { alignment: { seconds: number } };

  // While it ran: a party's step part done, with a positive estimate, and the metrics agreeing.
  // Before the parties started (the first answer was asked for before), the alignment waited for both.
  assert.deepEqual(seen[0].alignment?.waitingFor, [{ party: 'party-1', joined: false }, { party: 'party-2', joined: false }]);
  const during = seen.filter((st) => st.alignment?.phase === 'aligning');
  assert.ok(during.length >= 3, `${during.length} status answers while aligning`);
  const parts = during.flatMap((st) => st.alignment.steps.filter(running));
  t.diagnostic(`alignment ${summary.alignment.seconds.toFixed(1)} s; ${during.length} status answers while aligning, ${parts.length} steps seen part done`);
  assert.ok(parts.some((x) => x.party !== null), `no party's step seen part done: ${JSON.stringify(during.at(-1)?.alignment)}`);
  assert.ok(parts.every((x) => x.total === N && x.etaSeconds !== null && x.etaSeconds > 0), JSON.stringify(parts.slice(0, 3)));
  assert.ok(midway, 'the metrics were scraped while a party was part done');
  const m = midway.metrics;
  assert.ok(m.get(key('admm_alignment_ids_done', midway.step))! >= midway.step.done && m.get(key('admm_alignment_ids_done', midway.step))! <= N, `${key('admm_alignment_ids_done', midway.step)} ${m.get(key('admm_alignment_ids_done', midway.step))}`);
  assert.equal(m.get(key('admm_alignment_ids_total', midway.step)), N);
  assert.equal(m.get('admm_alignment_running'), 1);
  // Each step's count never went back.
  const last = new Map<string, number>();
  for (const st of seen)
    for (const x of st.alignment.steps) {
      const k = key('', x);
      assert.ok(x.done >= (last.get(k) ?? 0), `${k} went back to ${x.done}`);
      last.set(k, x.done);
    }

  // At the end: every step done, each of N ids (every party holds every id), the coordinator's
  // own steps beside one intersection per party; the seconds are the summary's.
  const end = seen.at(-1)!;
  assert.equal(end.phase, 'done');
  assert.equal(end.alignment.phase, 'done');
  assert.deepEqual(end.alignment.waitingFor, []);
  assert.equal(end.alignment.seconds, summary.alignment.seconds);
  assert.ok(summary.alignment.seconds > 0);
  const steps = end.alignment.steps;
  assert.deepEqual(steps.filter((x) => x.party !== null).map((x) => [x.party, x.set, x.step]).sort(), [['party-1', 'train', 'intersecting ids'], ['party-2', 'train', 'intersecting ids']]);
  assert.ok(steps.some((x) => x.party === null), 'the coordinator hashes and blinds its label ids');
  for (const x of steps) assert.deepEqual([x.done, x.total, x.etaSeconds], [N, N, 0], JSON.stringify(x));
  const metrics = samples(await (await fetch(`${url}metrics`)).text());
  for (const x of steps) {
    assert.equal(metrics.get(key('admm_alignment_ids_done', x)), N, key('admm_alignment_ids_done', x));
    assert.equal(metrics.get(key('admm_alignment_ids_total', x)), N);
    assert.equal(metrics.get(key('admm_alignment_eta_seconds', x)), 0);
  }
  assert.equal(metrics.get('admm_alignment_seconds'), summary.alignment.seconds);
  assert.equal(metrics.get('admm_alignment_running'), 0);

  if (page) {
    // What the page showed: a party's bar part filled with an estimate; at the end the duration.
    const shown = (await page.evaluate('window.__aligning')) as { party: string; value: number; max: number; left: string }[][];
    assert.ok(shown.flat().some((r) => r.party.startsWith('party-') && r.value > 0 && r.value < r.max && r.max === N && /^about \d/.test(r.left)), JSON.stringify(shown.at(-1)));
    await page.waitForFunction(`document.getElementById('phase').textContent === 'done'`, { timeout: 10_000 });
    const shownSeconds = /^.* · ids aligned in (\d+\.\d) s · /.exec((await page.$eval('#job-line', (e) => e.textContent)) ?? '');
    assert.ok(shownSeconds, 'the job line gives the alignment\'s duration');
    assert.equal(Number(shownSeconds[1]), Number(summary.alignment.seconds.toFixed(1)));
    assert.equal(await page.$eval('#alignment', (e) => e.classList.contains('hidden')), true, 'the finished alignment is put away');
    assert.deepEqual(problems, []);
  }
  coord.child.kill('SIGTERM');
  await coord.exit;
});
