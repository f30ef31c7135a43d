#!/usr/bin/env node
// Runs every compiled test file with node's test runner, one `node --test` per file and
// TEST_JOBS of them at a time, so that each file is timed on its own (the ten slowest are
// printed at the end) and a file that fails is named in the summary. A file that runs longer
// than TEST_TIMEOUT_MS fails. Then it checks that no process the suite started is still
// alive: children inherit ADMM_TEST_RUN (one value per file); anything still carrying it in
// its environment after the run is reported with the file that started it, killed, and fails
// the suite.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const files = [];
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (name.endsWith('.test.js')) files.push(p);
  }
};
for (const pkg of readdirSync(join(root, 'packages'))) {
  const dir = join(root, 'packages', pkg, 'dist', 'test');
  try {
    walk(dir);
  } catch {
    /* package without tests */
  }
}
const only = process.argv.slice(2);
const selected = only.length ? files.filter((f) => only.some((o) => f.includes(o))) : files;
if (selected.length === 0) {
  console.error('run-tests: no test files found (did tsc -b run?)');
  process.exit(1);
}
/**
 * Time limit of one test file, so that a hang (a test that never settles, or a file that
 * never exits because it left a handle open) fails instead of blocking CI. Node 20's
 * --test-timeout applies it to the file as a whole (a file is one test of the runner), and
 * this script kills a file that outlives it by a minute (older nodes have no flag). The
 * slowest file takes about a minute on an idle 2-core machine; a machine shared with other
 * work can be many times slower. Ten minutes leaves that room and still ends a hang.
 */
const TEST_TIMEOUT_MS = 600_000;
/**
 * Files run at the same time. One file at a time leaves a 2-core machine half idle: a test
 * waits on the processes it starts (coordinators, parties, simulate), on their start-up and
 * on timeouts. Measured on nine end-to-end files on a shared 2-core machine: 185 s one at a
 * time, 108 s two at a time, 88 s three at a time; the CPU time was the same at two and 8 %
 * more at three, and the tests that time a party out get less room. TEST_JOBS sets it
 * (TEST_JOBS=1: one by one).
 */
const JOBS = Math.max(1, Number(process.env.TEST_JOBS) || 2);
// --test-timeout exists from Node 20.11 (and 21.2); older versions rely on the kill below.
const [major, minor] = process.versions.node.split('.').map(Number);
const timeoutFlag = major > 21 || (major === 21 && minor >= 2) || (major === 20 && minor >= 11) ? [`--test-timeout=${TEST_TIMEOUT_MS}`] : [];
const marker = randomBytes(8).toString('hex');
const name = (file) => relative(root, file).replace('/dist/test/', '/src/test/').replace(/\.js$/, '.ts');

/** Pids whose environment carries this run's marker, with the marker's value. */
const MARKED = new RegExp(`(?:^|\\0)ADMM_TEST_RUN=(${marker}\\.\\d+)(?:\\0|$)`);
function markedProcesses() {
  const found = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    if (Number(pid) === process.pid) continue;
    try {
      const m = MARKED.exec(readFileSync(`/proc/${pid}/environ`, 'latin1'));
      if (m) found.push({ pid: Number(pid), value: m[1] });
    } catch {
      /* gone or not ours */
    }
  }
  return found;
}

/** SIGKILL each of `procs` that is still there. */
function killAll(procs) {
  for (const { pid } of procs) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

// Stopped (Ctrl-C, or CI cancelling the job): nothing the suite started may live on.
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => {
    killAll(markedProcesses());
    console.error(`run-tests: stopped by ${signal}`);
    process.exit(130);
  });

/**
 * The counts node prints at the end of a file's spec output (ℹ tests 3, ℹ pass 2, ...),
 * summed over the files here and left out of each file's own output.
 */
const COUNTS = ['tests', 'pass', 'fail', 'cancelled', 'skipped', 'todo'];
const totals = Object.fromEntries(COUNTS.map((k) => [k, 0]));
const COUNT_LINE = /^ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) [\d.]+$/;

/** Runs one file; resolves with its outcome once it has exited and its output is printed. */
function runFile(file, index) {
  const started = performance.now();
  const child = spawn(process.execPath, ['--test', '--test-reporter=spec', ...timeoutFlag, file], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ADMM_TEST_RUN: `${marker}.${index}` },
  });
  const chunks = [];
  child.stdout.on('data', (d) => chunks.push(d));
  child.stderr.on('data', (d) => chunks.push(d));
  let timedOut = false;
  const kill = setTimeout(() => {
    timedOut = true;
    killAll(markedProcesses().filter((p) => p.value === `${marker}.${index}`));
    child.kill('SIGKILL');
  }, TEST_TIMEOUT_MS + 60_000);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(kill);
      const seconds = (performance.now() - started) / 1000;
      const lines = Buffer.concat(chunks).toString('utf8').replace(/\s+$/, '').split('\n');
      // Node prints the counts, then the failing tests again; both are summed up or listed in
      // the run's own summary instead.
      const plain = lines.map((l) => l.replace(/\x1b\[[0-9;]*m/g, ''));
      const countsAt = plain.findLastIndex((l, i) => COUNT_LINE.test(l) && !COUNT_LINE.test(plain[i - 1] ?? ''));
      const failing = [];
      // A skipped test says why (a browser test without Chromium, say): listed again at the end.
      const skipped = plain.slice(0, countsAt >= 0 ? countsAt : plain.length).flatMap((l) => {
        const m = /^\s*﹣ (.*) \([\d.]+ms\) # (.*)$/.exec(l);
        return m ? [{ test: m[1], reason: m[2] }] : [];
      });
      if (countsAt >= 0) {
        for (const l of plain.slice(countsAt)) {
          const count = /^ℹ (\w+) ([\d.]+)$/.exec(l);
          if (count && COUNTS.includes(count[1])) totals[count[1]] += Number(count[2]);
          else if (/^✖ /.test(l) && l !== '✖ failing tests:') failing.push(l.slice(2));
        }
        lines.length = countsAt;
      }
      const failed = code !== 0 || timedOut;
      const why = timedOut ? `killed after ${TEST_TIMEOUT_MS / 1000 + 60} s` : signal ? `killed by ${signal}` : code !== 0 ? `exit ${code}` : '';
      console.log(`\n▶ ${name(file)} (${seconds.toFixed(1)} s${failed ? `, FAILED: ${why}` : ''})`);
      if (lines.length) console.log(lines.join('\n'));
      resolve({ file, seconds, failed, why, failing, skipped });
    });
  });
}

/**
 * Each file's time in the last run (git-ignored, beside CI's screenshots): the slowest files
 * start first, so that the run does not end on one long file alone. Files it does not know
 * (a fresh clone has none) keep their place, in front.
 */
const TIMES = join(root, 'test-artifacts', 'test-times.json');
let lastTimes = {};
try {
  const parsed = JSON.parse(readFileSync(TIMES, 'utf8'));
  if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) lastTimes = parsed;
} catch {
  /* no earlier run */
}
const lastTime = (file) => (typeof lastTimes[name(file)] === 'number' ? lastTimes[name(file)] : Infinity);

const started = performance.now();
const queue = selected.map((file, index) => ({ file, index })).sort((a, b) => lastTime(b.file) - lastTime(a.file) || a.index - b.index);
const results = [];
await Promise.all(
  Array.from({ length: Math.min(JOBS, queue.length) }, async () => {
    for (let next = queue.shift(); next; next = queue.shift()) results.push(await runFile(next.file, next.index));
  }),
);
const wall = (performance.now() - started) / 1000;

const leftovers = markedProcesses();
for (const { pid, value } of leftovers) {
  let cmd = '?';
  try {
    cmd = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0/g, ' ');
  } catch {
    /* gone meanwhile */
  }
  console.error(`run-tests: process ${pid} outlived the suite (started by ${name(selected[Number(value.split('.')[1])])}): ${cmd}`);
}
killAll(leftovers);

try {
  mkdirSync(join(root, 'test-artifacts'), { recursive: true });
  writeFileSync(TIMES, JSON.stringify({ ...lastTimes, ...Object.fromEntries(results.map((r) => [name(r.file), Math.round(r.seconds * 10) / 10])) }, null, 1) + '\n');
} catch (e) {
  console.error(`run-tests: could not write ${TIMES}: ${e.message}`);
}

const slowest = [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 10);
console.log(`\nrun-tests: the ${slowest.length} slowest test file${slowest.length === 1 ? "" : "s"}`);
for (const r of slowest) console.log(`${r.seconds.toFixed(1).padStart(8)} s  ${name(r.file)}`);
console.log(`run-tests: ${results.length} files, ${COUNTS.map((k) => `${totals[k]} ${k}`).join(', ')}; ${wall.toFixed(1)} s wall, ${JOBS} at a time`);
const skipped = results.flatMap((r) => r.skipped.map((k) => ({ file: r.file, ...k })));
if (skipped.length) {
  console.log(`run-tests: ${skipped.length} test${skipped.length === 1 ? '' : 's'} skipped:`);
  for (const k of skipped) console.log(`  ${name(k.file)}: ${k.test}\n    because: ${k.reason}`);
}
const failed = results.filter((r) => r.failed);
if (failed.length) {
  console.error(`run-tests: ${failed.length} test file${failed.length === 1 ? '' : 's'} failed:`);
  for (const r of failed) {
    console.error(`  ${name(r.file)} (${r.why})`);
    for (const t of r.failing) console.error(`    ✖ ${t}`);
  }
}
if (leftovers.length) {
  console.error(`run-tests: ${leftovers.length} process${leftovers.length === 1 ? '' : 'es'} outlived the suite`);
  process.exit(1);
}
console.log('run-tests: no test process left running');
process.exit(failed.length ? 1 : 0);
