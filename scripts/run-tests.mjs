#!/usr/bin/env node
// Runs every compiled test file with node's test runner, then checks that no process the
// suite started is still alive. Children inherit ADMM_TEST_RUN; anything still carrying
// that marker in its environment after the run is reported, killed, and fails the suite.
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
const marker = randomBytes(8).toString('hex');
const res = spawnSync(process.execPath, ['--test', '--test-reporter=spec', ...selected], {
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
