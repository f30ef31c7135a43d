#!/usr/bin/env node
// Stryker's build command (stryker.config.mjs), run inside its sandbox copy of the repository
// (.stryker-tmp/sandbox-*) before any test. Not part of `npm test`.
//
// 1. Links node_modules/@admm-share/<pkg> to the sandbox's own packages/<pkg>. Without this a
//    test in one package that imports another (party's tests import '@admm-share/core') would
//    walk up to the repository's node_modules and load the un-mutated original, so a mutant
//    in core could never be killed by party's tests. Every other dependency still resolves by
//    walking up to the repository's node_modules (stryker.config.mjs sets symlinkNodeModules:
//    false so that Stryker does not replace this folder with a link to the real one).
// 2. Compiles the mutated TypeScript once with `tsc -b`. Stryker instruments every mutant into
//    the source at once ("mutant switching") and marks the files // @ts-nocheck, so one build
//    serves the whole run; the tests then pick the active mutant from the environment.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const cwd = process.cwd();
if (!cwd.includes('.stryker-tmp')) {
  console.error(`mutation-build: run by Stryker inside its sandbox, not in ${cwd}`);
  process.exit(1);
}
const scope = join(cwd, 'node_modules', '@admm-share');
mkdirSync(scope, { recursive: true });
for (const pkg of readdirSync(join(cwd, 'packages'))) {
  const link = join(scope, pkg);
  if (!existsSync(link)) symlinkSync(join('..', '..', 'packages', pkg), link, 'dir');
}
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const projects = ['packages/party', 'packages/coordinator'];
const res = spawnSync(process.execPath, [tsc, '-b', ...projects], { stdio: 'inherit' });
process.exit(res.status ?? 1);
