#!/usr/bin/env node
// Runs every compiled test file with node's test runner (a file that runs longer than
// TEST_TIMEOUT_MS fails), then checks that no process the suite started is still alive.
// Children inherit ADMM_TEST_RUN; anything still carrying that marker in its environment
// after the run is reported, killed, and fails the suite.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

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
 * Time limit of node's test runner, so that a hang (a test that never settles, or a file that
 * never exits because it left a handle open) fails instead of blocking CI. Node 20 applies it
 * to each test file as a whole (a file is one test of the runner: checked, a file whose tests
 * each finish in time but together exceed it fails), so it must hold the longest file:
 * restart-race.test.ts takes about 45 s on an idle 2-core machine, the others less, and a
 * machine shared with other work can be many times slower. Ten minutes leaves that room and
 * still ends a hang.
 */
const TEST_TIMEOUT_MS = 600_000;
// --test-timeout exists from Node 20.11 (and 21.2); older versions run without it.
const [major, minor] = process.versions.node.split('.').map(Number);
const timeoutFlag = major > 21 || (major === 21 && minor >= 2) || (major === 20 && minor >= 11) ? [`--test-timeout=${TEST_TIMEOUT_MS}`] : [];
if (timeoutFlag.length === 0) console.error(`run-tests: node ${process.versions.node} has no --test-timeout: a hanging test will hang the run`);
const marker = randomBytes(8).toString('hex');
const res = spawnSync(process.execPath, ['--test', '--test-reporter=spec', ...timeoutFlag, ...selected], {
  stdio: 'inherit',
  env: { ...process.env, ADMM_TEST_RUN: marker },
});

const leftovers = [];
for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
  try {
    if (readFileSync(`/proc/${pid}/environ`, 'latin1').includes(`ADMM_TEST_RUN=${marker}`)) leftovers.push(Number(pid));
  } catch {
    /* gone or not ours */
  }
}
if (leftovers.length) {
  for (const pid of leftovers) {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0/g, ' ');
    console.error(`run-tests: process ${pid} outlived the suite: ${cmd}`);
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  process.exit(1);
}
console.log('run-tests: no test process left running');
process.exit(res.status ?? 1);
