// Dependencies point one way: protocol and core at the bottom, runtime (the process: logger,
// flags, exit codes) on core, party and coordinator on all three, admm-share on top. A party
// process must never contain coordinator code (and vice versa), the protocol package stays
// free of transport and logging, and core holds numeric and data code only: no logger, no
// flag parser, no path that ends the process. npm workspaces do not enforce this; this does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { importsOf, isTest, packages, sourcePackages, sources, srcOf } from './layering-support.js';

/** Ways a module can end or take over the process: only the runtime package (and commands) may. */
export const PROCESS_EXIT = /\bprocess\s*\.\s*(exit|abort|kill|exitCode)\b|\bprocess\s*\.\s*(on|once|addListener|prependListener)\s*\(\s*['"](uncaughtException|unhandledRejection|exit|beforeExit|SIG[A-Z]+)['"]/;

interface Rule {
  pkg: string;
  why: string;
  /** An import specifier (from any file of the package, tests included) that must not appear. */
  forbidden?: RegExp;
  /** The only bare (non-relative, non-node:) specifiers the package's non-test sources may import. */
  onlyBare?: readonly string[];
  /** Text that must not appear in the package's non-test sources. */
  forbiddenText?: RegExp;
  /** The package.json `dependencies`, exactly. */
  dependencies?: readonly string[];
}

const rules: Rule[] = [
  { pkg: 'party', forbidden: /^@admm-share\/(coordinator|admm-share)\b|\/(coordinator|admm-share)\//, why: 'party never imports coordinator code' },
  { pkg: 'coordinator', forbidden: /^@admm-share\/(party|admm-share)\b|\/(party|admm-share)\//, why: 'coordinator never imports party code' },
  {
    pkg: 'protocol',
    forbidden: /^(ws|pino|yargs|@admm-share\/)|\.\.\/\.\.\/\.\.\//,
    onlyBare: ['msgpackr'],
    forbiddenText: PROCESS_EXIT,
    dependencies: ['msgpackr'],
    why: 'protocol depends on msgpackr only',
  },
  {
    pkg: 'core',
    forbidden: /^(ws|pino|yargs|node:process$|@admm-share\/)|\.\.\/\.\.\/\.\.\//,
    forbiddenText: PROCESS_EXIT,
    why: 'core is below every other package: no logger, flag parser, runtime package or process exit',
  },
  { pkg: 'runtime', forbidden: /^(ws|@admm-share\/(?!core$))|\.\.\/\.\.\/\.\.\//, why: 'runtime depends on core only among the workspace packages' },
];

function checkRule({ pkg, forbidden, onlyBare, forbiddenText, dependencies }: Rule): void {
  const files = sources(srcOf(pkg));
  assert.ok(files.length > 0, `no sources in ${pkg}`);
  for (const f of files) {
    const text = readFileSync(f, 'utf8');
    for (const spec of importsOf(text)) {
      if (forbidden) assert.doesNotMatch(spec, forbidden, `${f} imports ${spec}`);
      if (onlyBare && !isTest(f) && !spec.startsWith('.') && !spec.startsWith('node:'))
        assert.ok(onlyBare.includes(spec), `${f} imports ${spec}; ${pkg} may import only ${onlyBare.join(', ')}`);
    }
    if (forbiddenText && !isTest(f)) assert.doesNotMatch(text, forbiddenText, `${f} contains ${text.match(forbiddenText)?.[0]}`);
  }
  const manifest = JSON.parse(readFileSync(join(packages, pkg, 'package.json'), 'utf8'));
  if (forbidden)
    for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })) assert.doesNotMatch(dep, forbidden, `${pkg}/package.json depends on ${dep}`);
  if (dependencies) assert.deepEqual(Object.keys(manifest.dependencies ?? {}).sort(), [...dependencies].sort(), `${pkg}/package.json dependencies`);
}

for (const rule of rules) test(`layering: ${rule.why}`, () => checkRule(rule));

test('layering: test helpers stay in tests', () => {
  for (const pkg of sourcePackages()) {
    for (const f of sources(srcOf(pkg)).filter((f) => !isTest(f)))
      for (const spec of importsOf(readFileSync(f, 'utf8'))) assert.doesNotMatch(spec, /\/test-support$|(^|\/)test\//, `${f} imports ${spec}`);
  }
});

test('layering: the import scanner sees the forms it must catch', () => {
  const text = `import { a } from '@admm-share/coordinator';\nexport * from "../../coordinator/src/x.js";\nconst m = await import('@admm-share/coordinator');\nimport '@admm-share/coordinator/side';`;
  assert.deepEqual(importsOf(text), ['@admm-share/coordinator', '../../coordinator/src/x.js', '@admm-share/coordinator', '@admm-share/coordinator/side']);
});

test('layering: the rules catch what they are for', () => {
  const hit = (pkg: string, spec: string) => rules.find((r) => r.pkg === pkg)!.forbidden!.test(spec);
  assert.ok(hit('party', '@admm-share/coordinator'));
  assert.ok(hit('party', '../../coordinator/src/admm.js'));
  assert.ok(!hit('party', '@admm-share/core'));
  assert.ok(hit('coordinator', '@admm-share/party'));
  assert.ok(!hit('coordinator', '@admm-share/protocol'));
  for (const spec of ['pino', 'yargs', 'yargs/helpers', '@admm-share/runtime', 'node:process', 'ws']) assert.ok(hit('core', spec), spec);
  for (const spec of ['node:fs', 'seedrandom', 'ml-matrix', './errors.js']) assert.ok(!hit('core', spec), spec);
  assert.ok(hit('runtime', '@admm-share/protocol'));
  assert.ok(hit('runtime', '@admm-share/party'));
  assert.ok(!hit('runtime', '@admm-share/core'));
  assert.ok(!hit('runtime', 'pino'));
  for (const text of ['process.exit(1)', 'process.exit (EXIT.ok)', "process.on('uncaughtException', f)", 'process.once("SIGTERM", h)', 'process.exitCode = 2', 'process.kill(pid)'])
    assert.match(text, PROCESS_EXIT, text);
  for (const text of ['process.pid', 'process.env.ADMM_DEBUG', "process.on('warning', f)", 'exitCodeOf(err)']) assert.doesNotMatch(text, PROCESS_EXIT, text);
});

/**
 * Paths a test may not name: another checkout's files (`../shared`, absolute paths into
 * someone's tree) or anything above the repository. Data lives in data/ and test-data/;
 * /proc (process state) and deliberately missing paths (/nonexistent...) are fine.
 */
export const OUTSIDE_REPOSITORY = /\.\.\/shared\b|['"`]\/(?!proc\/|nonexistent)[a-z][\w.-]*\/|new URL\(\s*['"`](\.\.\/){5,}/;

test('tests read nothing outside the repository (data/, test-data/ and their own temporary directories)', () => {
  // From packages/<pkg>/dist/test/<file>.js, '../../../../' is the repository root.
  for (const pkg of sourcePackages())
    for (const f of sources(srcOf(pkg)).filter((f) => isTest(f) && basename(f) !== 'layering.test.ts')) // this file holds the examples below
      readFileSync(f, 'utf8')
        .split('\n')
        .forEach((line, k) => assert.doesNotMatch(line, OUTSIDE_REPOSITORY, `${f}:${k + 1}`));
  for (const bad of ["join(here, '../shared/a9a')", "readFileSync('/work/shared/x.json')", 'const p = `/home/me/data`', "new URL('../../../../../x', import.meta.url)"]) assert.match(bad, OUTSIDE_REPOSITORY, bad);
  for (const ok of ["readFileSync(`/proc/${pid}/stat`)", "'/nonexistent.pem'", "'-subj', `/CN=${name} test CA`", "new URL('../../../../test-data/v.json', import.meta.url)", "join(dir, 'out')"]) assert.doesNotMatch(ok, OUTSIDE_REPOSITORY, ok);
});
