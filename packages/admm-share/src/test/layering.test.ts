// Dependencies point one way: protocol and core at the bottom, runtime (the process: logger,
// flags, exit codes) on core, party and coordinator on all three, admm-share on top. A party
// process must never contain coordinator code (and vice versa), the protocol package stays
// free of transport and logging, and core holds numeric and data code only: no logger, no
// flag parser, no path that ends the process. npm workspaces do not enforce this; this does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const packages = fileURLToPath(new URL('../../../', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

const isTest = (file: string) => file.includes(`${sep}test${sep}`);

/** Every module specifier a file imports or re-exports (static and dynamic). */
export function importsOf(text: string): string[] {
  const re = /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|import\s+['"]([^'"]+)['"]/g;
  return [...text.matchAll(re)].map((m) => m[1] ?? m[2] ?? m[3]);
}

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
  const files = sources(join(packages, pkg, 'src'));
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
  for (const pkg of readdirSync(packages).filter((d) => statSync(join(packages, d, 'src'), { throwIfNoEntry: false })?.isDirectory())) {
    for (const f of sources(join(packages, pkg, 'src')).filter((f) => !isTest(f)))
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

// ---------------------------------------------------------------------------------------
// core's folders: what each may import from the others (relative imports of its non-test
// sources; errors.ts, at the top of core, every folder may import).

interface FolderRule {
  folder: string;
  /** The other core folders its sources may import. */
  may: readonly string[];
  why: string;
}

export const coreFolderRules: FolderRule[] = [
  { folder: 'linalg', may: [], why: 'linalg (matrices and their products) needs nothing else in core' },
  { folder: 'io', may: ['linalg'], why: 'io reads and writes files into matrices: no PSI, threads, kernels, losses or privacy' },
  { folder: 'psi', may: ['io'], why: 'psi needs only the packed ids of io' },
  { folder: 'threads', may: ['linalg'], why: 'threads (the team mechanism and the dense team) work on matrices only' },
  { folder: 'kernels', may: ['linalg'], why: 'the WebAssembly kernels work on matrices only' },
  { folder: 'model', may: ['linalg'], why: 'model (losses, metrics, the central fit) works on matrices only' },
  { folder: 'privacy', may: [], why: 'privacy accounting and noise are arithmetic, reviewable on their own' },
];

const coreSrc = join(packages, 'core', 'src');

/** The core folder a relative import of `file` lands in: '' for a file at the top of core/src, undefined outside core/src. */
export function coreFolderOf(file: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const target = join(file, '..', spec);
  if (!target.startsWith(coreSrc + sep)) return undefined;
  const rest = target.slice(coreSrc.length + 1).split(sep);
  return rest.length > 1 ? rest[0] : '';
}

/** Whether an import from a file of `rule.folder` into `target` (a core folder, '' for the top, `file` the top file's name) is allowed. */
function folderAllows(rule: FolderRule, target: string, file: string): boolean {
  return target === rule.folder || rule.may.includes(target) || (target === '' && file === 'errors.js');
}

for (const rule of coreFolderRules)
  test(`layering (core folders): ${rule.why}`, () => {
    const files = sources(join(coreSrc, rule.folder));
    assert.ok(files.length > 0, `no sources in core/src/${rule.folder}`);
    for (const f of files.filter((f) => !isTest(f)))
      for (const spec of importsOf(readFileSync(f, 'utf8'))) {
        const target = coreFolderOf(f, spec);
        if (target !== undefined) assert.ok(folderAllows(rule, target, spec.split('/').pop()!), `${f} imports ${spec}: ${rule.why}`);
      }
  });

test('layering (core folders): every folder of core/src has a rule, and the rules catch what they are for', () => {
  const folders = readdirSync(coreSrc).filter((d) => d !== 'test' && statSync(join(coreSrc, d)).isDirectory() && sources(join(coreSrc, d)).length > 0);
  assert.deepEqual(folders.sort(), coreFolderRules.map((r) => r.folder).sort());
  const allowed = (folder: string, from: string, spec: string) => {
    const target = coreFolderOf(join(coreSrc, folder, from), spec);
    return target === undefined || folderAllows(coreFolderRules.find((r) => r.folder === folder)!, target, spec.split('/').pop()!);
  };
  assert.ok(!allowed('io', 'csv.ts', '../psi/psi.js'), 'io -> psi');
  assert.ok(!allowed('io', 'ids.ts', '../threads/thread-team.js'), 'io -> threads');
  assert.ok(!allowed('linalg', 'csr.ts', '../io/index.js'), 'linalg -> io');
  assert.ok(!allowed('privacy', 'noise.ts', '../model/losses.js'), 'privacy -> model');
  assert.ok(!allowed('psi', 'psi.ts', '../threads/dense-team.js'), 'psi -> threads');
  assert.ok(!allowed('io', 'csv.ts', '../release.js'), 'a top file other than errors.ts');
  assert.ok(allowed('io', 'csv.ts', '../linalg/csr.js'));
  assert.ok(allowed('io', 'csv.ts', './lines.js'));
  assert.ok(allowed('io', 'csv.ts', '../errors.js'));
  assert.ok(allowed('psi', 'psi-team.ts', '../io/packed-ids.js'));
  assert.ok(allowed('io', 'csv.ts', 'csv-parse'));
});

// ---------------------------------------------------------------------------------------
// Thread names: a thread's entry script is `<what>-thread.ts` and nothing else is; a main-thread
// object that owns threads is a team, in `<what>-team.ts` (thread-team.ts is the mechanism).
// Checked in the packages that already follow it; party and coordinator join when renamed.

const THREAD_NAMING_PACKAGES = ['core', 'protocol', 'runtime', 'party', 'coordinator', 'admm-share'];

/** What breaks the thread naming in one file (its path and text), or undefined. */
export function threadNamingProblem(file: string, text: string): string | undefined {
  const name = file.split(sep).pop()!;
  const entry = /import\s*\{[^}]*\b(parentPort|serveTeam)\b[^}]*\}\s*from/.test(text);
  if (name.endsWith('-worker.ts')) return 'a -worker.ts file: name a thread entry <what>-thread.ts, a main-thread owner <what>-team.ts';
  if (name.endsWith('-thread.ts') && !entry) return 'named -thread.ts but not a thread entry (no parentPort or serveTeam)';
  if (entry && !name.endsWith('-thread.ts')) return 'a thread entry not named <what>-thread.ts';
  for (const m of text.matchAll(/(?:new Worker\(|script:\s*)new URL\(\s*['"]\.\/([\w-]+)\.js['"]/g))
    if (!m[1].endsWith('-thread')) return `starts ${m[1]}.js: a thread entry is named <what>-thread`;
  return undefined;
}

test('thread names: entries are <what>-thread.ts and start as such, no -worker.ts files', () => {
  for (const pkg of THREAD_NAMING_PACKAGES)
    for (const f of sources(join(packages, pkg, 'src')).filter((f) => !f.endsWith(`${sep}layering.test.ts`))) { // this file holds the examples below
      const problem = threadNamingProblem(f, readFileSync(f, 'utf8'));
      assert.equal(problem, undefined, `${f}: ${problem}`);
    }
  const src = (...p: string[]) => join(packages, 'x', 'src', ...p);
  assert.ok(threadNamingProblem(src('fit-worker.ts'), "import { parentPort } from 'node:worker_threads';"));
  assert.ok(threadNamingProblem(src('split.ts'), "import { serveTeam } from '@admm-share/core';"));
  assert.ok(threadNamingProblem(src('dense-thread.ts'), "import { ThreadTeam } from './thread-team.js';"));
  assert.ok(threadNamingProblem(src('psi-team.ts'), "const w = new Worker(new URL('./psi-worker.js', import.meta.url));"));
  assert.ok(threadNamingProblem(src('split-team.ts'), "new ThreadTeam({ script: new URL('./split.js', import.meta.url) })"));
  assert.equal(threadNamingProblem(src('psi-thread.ts'), "import { parentPort } from 'node:worker_threads';"), undefined);
  assert.equal(threadNamingProblem(src('dense-team.ts'), "new ThreadTeam({ script: new URL('./dense-thread.js', import.meta.url) })"), undefined);
});

/**
 * Paths a test may not name: another checkout's files (`../shared`, absolute paths into
 * someone's tree) or anything above the repository. Data lives in data/ and test-data/;
 * /proc (process state) and deliberately missing paths (/nonexistent...) are fine.
 */
export const OUTSIDE_REPOSITORY = /\.\.\/shared\b|['"`]\/(?!proc\/|nonexistent)[a-z][\w.-]*\/|new URL\(\s*['"`](\.\.\/){5,}/;

test('tests read nothing outside the repository (data/, test-data/ and their own temporary directories)', () => {
  // From packages/<pkg>/dist/test/<file>.js, '../../../../' is the repository root.
  for (const pkg of readdirSync(packages).filter((d) => statSync(join(packages, d, 'src'), { throwIfNoEntry: false })?.isDirectory()))
    for (const f of sources(join(packages, pkg, 'src')).filter((f) => isTest(f) && !f.endsWith(`${sep}layering.test.ts`))) // this file holds the examples below
      readFileSync(f, 'utf8')
        .split('\n')
        .forEach((line, k) => assert.doesNotMatch(line, OUTSIDE_REPOSITORY, `${f}:${k + 1}`));
  for (const bad of ["join(here, '../shared/a9a')", "readFileSync('/work/shared/x.json')", 'const p = `/home/me/data`', "new URL('../../../../../x', import.meta.url)"]) assert.match(bad, OUTSIDE_REPOSITORY, bad);
  for (const ok of ["readFileSync(`/proc/${pid}/stat`)", "'/nonexistent.pem'", "'-subj', `/CN=${name} test CA`", "new URL('../../../../test-data/v.json', import.meta.url)", "join(dir, 'out')"]) assert.doesNotMatch(ok, OUTSIDE_REPOSITORY, ok);
});

// ---- party: folders by role (issue 44) ----------------------------------------------------
// packages/party/src is laid out by role: transport/ (the WebSocket link), session/ (the
// sans-IO state machine), xupdate/ (the local numerics), privacy/ (noise, ledger, one-shot
// release), scoring/ (model file, scoring with a trained model), intersection/ (the party's side
// of the PSI), and at the top only the process's wiring (party.ts), its flags (cli.ts) and the
// package's exports (index.ts). Each folder's rule says what it may not reach for.

interface PartyFolderRule {
  folder: string;
  why: string;
  /** An import specifier (from any file of the folder) that must not appear. */
  forbidden: RegExp;
  /** The only bare (non-relative, non-node:) specifiers the folder may import. */
  onlyBare?: readonly string[];
}

const partyFolderRules: PartyFolderRule[] = [
  {
    folder: 'xupdate',
    forbidden: /^\.\.\//,
    onlyBare: ['@admm-share/core', 'seedrandom'],
    why: 'party xupdate/ (the x-update numerics) imports only core (and seedrandom), nothing else of the party',
  },
  {
    folder: 'session',
    forbidden: /^(ws|node:(net|http|https|tls|dgram))$|^\.\.\/transport\//,
    why: 'party session/ is sans-IO: no socket (ws, net, http, tls) and nothing from transport/',
  },
  {
    folder: 'transport',
    forbidden: /^\.\.\/(?!transport\/)/,
    why: 'party transport/ (the link) knows nothing of the job: no session, x-update, privacy, scoring or intersection',
  },
  {
    folder: 'privacy',
    forbidden: /^(ws)$|^\.\.\/(transport|session|scoring|intersection)\//,
    why: 'party privacy/ uses the x-update and core only: no transport, session, scoring or intersection',
  },
  {
    folder: 'scoring',
    forbidden: /^(ws)$|^\.\.\/(transport|session|xupdate|intersection)\//,
    why: 'party scoring/ (the model file, scoring new rows) uses privacy and core: no transport, session or x-update',
  },
  {
    folder: 'intersection',
    forbidden: /^(ws|pino)$|^\.\.\//,
    why: "party intersection/ (the party's side of the PSI) imports core and protocol only",
  },
];

/** Files allowed at the top of packages/party/src: the wiring, the flags and the exports. */
const PARTY_TOP_FILES = ['cli.ts', 'index.ts', 'party.ts'];

for (const rule of partyFolderRules)
  test(`layering: ${rule.why}`, () => {
    const files = sources(join(packages, 'party', 'src', rule.folder));
    assert.ok(files.length > 0, `no sources in party/src/${rule.folder}`);
    for (const f of files)
      for (const spec of importsOf(readFileSync(f, 'utf8'))) {
        assert.doesNotMatch(spec, rule.forbidden, `${f} imports ${spec}`);
        if (rule.onlyBare && !spec.startsWith('.') && !spec.startsWith('node:'))
          assert.ok(rule.onlyBare.includes(spec), `${f} imports ${spec}; party/src/${rule.folder} may import only ${rule.onlyBare.join(', ')}`);
      }
  });

test('layering: party/src has a folder for every role and only the wiring at its top', () => {
  const src = join(packages, 'party', 'src');
  const entries = readdirSync(src);
  const folders = entries.filter((e) => statSync(join(src, e)).isDirectory() && e !== 'test');
  assert.deepEqual(folders.sort(), partyFolderRules.map((r) => r.folder).sort(), 'every folder of party/src has a rule above (and every rule a folder)');
  assert.deepEqual(entries.filter((e) => e.endsWith('.ts')).sort(), PARTY_TOP_FILES, 'party/src holds only cli.ts, index.ts and party.ts at its top: anything else goes into the folder of its role');
});

test('layering: party thread files are named for what they are (an entry is <what>-thread.ts, nothing else is; no -worker.ts)', () => {
  for (const f of sources(join(packages, 'party', 'src')).filter((f) => !isTest(f))) {
    const text = readFileSync(f, 'utf8');
    const entry = /\bparentPort\b/.test(text);
    assert.equal(f.endsWith('-thread.ts'), entry, `${f}: ${entry ? 'a thread entry (it uses parentPort) is named <what>-thread.ts' : 'only a thread entry is named -thread.ts'}`);
    assert.ok(!f.endsWith('-worker.ts'), `${f}: a thread entry is <what>-thread.ts; a main-thread helper is not named -worker`);
  }
});

test('layering: the party folder rules catch what they are for', () => {
  const hit = (folder: string, spec: string) => partyFolderRules.find((r) => r.folder === folder)!.forbidden.test(spec);
  const bareOk = (folder: string, spec: string) => partyFolderRules.find((r) => r.folder === folder)!.onlyBare?.includes(spec) ?? true;
  for (const spec of ['../session/state.js', '../privacy/privacy.js', '../transport/link.js']) assert.ok(hit('xupdate', spec), spec);
  for (const spec of ['./cholesky.js', '@admm-share/core', 'node:os']) assert.ok(!hit('xupdate', spec), spec);
  assert.ok(!bareOk('xupdate', '@admm-share/protocol') && !bareOk('xupdate', 'pino') && !bareOk('xupdate', 'ws') && bareOk('xupdate', 'seedrandom'));
  for (const spec of ['ws', 'node:net', 'node:tls', '../transport/link.js', '../transport/frames.js']) assert.ok(hit('session', spec), spec);
  for (const spec of ['../xupdate/ridge-xupdate.js', '../privacy/privacy.js', './state.js', 'node:crypto', '@admm-share/protocol']) assert.ok(!hit('session', spec), spec);
  for (const spec of ['../session/state.js', '../xupdate/ridge-xupdate.js', '../privacy/privacy.js', '../scoring/scoring.js']) assert.ok(hit('transport', spec), spec);
  for (const spec of ['./frames.js', 'ws', '@admm-share/protocol']) assert.ok(!hit('transport', spec), spec);
  for (const spec of ['ws', '../transport/link.js', '../session/state.js', '../scoring/model-file.js']) assert.ok(hit('privacy', spec), spec);
  assert.ok(!hit('privacy', '../xupdate/ridge-xupdate.js'));
  for (const spec of ['../session/state.js', '../xupdate/sgd.js', '../transport/tls.js']) assert.ok(hit('scoring', spec), spec);
  assert.ok(!hit('scoring', '../privacy/budget.js'));
  for (const spec of ['../session/state.js', 'ws']) assert.ok(hit('intersection', spec), spec);
  assert.ok(!hit('intersection', '@admm-share/core'));
});
// ---- Coordinator folders (issue 44): what each folder of packages/coordinator/src may import ----
// The coordinator's sources are grouped by role; these rules keep the roles apart. A target is
// named by its first path segment under src: a folder ('numerics') or a top-level file
// ('config.ts', 'bytes.ts'). `only`: the folder imports nothing else of the coordinator (its
// own files aside); `never`: the folders and files it must not import; `onlyBare`: the only
// bare specifiers (node: aside) its sources may import.

interface CoordinatorFolderRule {
  folder: string;
  why: string;
  only?: readonly string[];
  never?: readonly string[];
  onlyBare?: readonly string[];
}

export const COORDINATOR_FOLDERS: CoordinatorFolderRule[] = [
  { folder: 'numerics', only: [], onlyBare: ['@admm-share/core', '@admm-share/protocol'], why: "the step's numerics (ADMM step, Anderson, kernels, threads) import only core and protocol" },
  { folder: 'alignment', only: [], onlyBare: ['@admm-share/core', '@admm-share/protocol'], why: 'the alignment (PSI, row matching) imports only core and protocol' },
  { folder: 'connections', never: ['job', 'training', 'prediction', 'output', 'monitoring', 'numerics', 'config.ts'], why: 'connections import nothing from the job, training, prediction, output, monitoring or numerics' },
  { folder: 'output', never: ['connections', 'monitoring', 'prediction'], why: 'output files import no connection, monitoring or prediction code' },
  { folder: 'monitoring', never: ['training', 'prediction', 'job', 'numerics'], why: 'monitoring never imports the training loops, prediction, the job or the numerics' },
  { folder: 'training', never: ['prediction', 'monitoring', 'job/coordinator'], why: 'training loops import no prediction or monitoring code, and not the phase machine' },
  { folder: 'prediction', never: ['training', 'monitoring', 'numerics', 'job/coordinator'], why: 'prediction imports no training loop, monitoring, numerics or the phase machine' },
  { folder: 'job', never: ['prediction'], why: 'the training job (phase machine, labels, flips) imports no prediction code' },
];

const coordinatorSrc = join(packages, 'coordinator', 'src');

/** What `spec`, imported by `file` (a path under coordinator/src), names: its first path segment under src, and its path there without extension; undefined for a bare specifier. */
export function coordinatorTarget(file: string, spec: string): { top: string; path: string } | undefined {
  if (!spec.startsWith('.')) return undefined;
  const rel = join(file, '..', spec).replace(/\.js$/, '');
  const [top, ...rest] = rel.split(sep);
  return { top: rest.length ? top : `${top}.ts`, path: rel.split(sep).join('/') };
}

/** Why `spec` in `file` (relative to coordinator/src) breaks `rule`, or undefined. */
export function folderViolation(rule: CoordinatorFolderRule, file: string, spec: string): string | undefined {
  const target = coordinatorTarget(file, spec);
  if (!target) {
    if (rule.onlyBare && !spec.startsWith('node:') && !rule.onlyBare.includes(spec)) return `imports ${spec}; ${rule.folder} may import only ${rule.onlyBare.join(', ')}`;
    return undefined;
  }
  if (target.top === rule.folder) return undefined;
  if (rule.only && !rule.only.includes(target.top)) return `imports ${target.path}; ${rule.folder} imports nothing else of the coordinator`;
  if (rule.never?.some((n) => n === target.top || n === target.path)) return `imports ${target.path}`;
  return undefined;
}

for (const rule of COORDINATOR_FOLDERS)
  test(`layering (coordinator/src/${rule.folder}): ${rule.why}`, () => {
    const dir = join(coordinatorSrc, rule.folder);
    const files = sources(dir);
    assert.ok(files.length > 0, `no sources in ${dir}`);
    for (const f of files) {
      const rel = f.slice(coordinatorSrc.length + 1);
      for (const spec of importsOf(readFileSync(f, 'utf8'))) {
        const why = folderViolation(rule, rel, spec);
        assert.equal(why, undefined, `${rel} ${why}`);
      }
    }
  });

test('layering (coordinator/src): every source folder has a rule, every rule a folder', () => {
  const folders = readdirSync(coordinatorSrc).filter((d) => d !== 'test' && statSync(join(coordinatorSrc, d)).isDirectory());
  assert.deepEqual([...folders].sort(), COORDINATOR_FOLDERS.map((r) => r.folder).sort());
});

test('layering (coordinator/src): the folder rules catch what they are for', () => {
  const rule = (folder: string) => COORDINATOR_FOLDERS.find((r) => r.folder === folder)!;
  const bad = (folder: string, file: string, spec: string) => folderViolation(rule(folder), file, spec) !== undefined;
  // numerics: core and protocol only, nothing else of the coordinator.
  assert.ok(bad('numerics', 'numerics/admm-step.ts', '../connections/parties.js'));
  assert.ok(bad('numerics', 'numerics/admm-step.ts', '../config.js'));
  assert.ok(bad('numerics', 'numerics/anderson.ts', '@admm-share/runtime'));
  assert.ok(bad('numerics', 'numerics/anderson.ts', 'pino'));
  assert.ok(!bad('numerics', 'numerics/admm-step.ts', './anderson.js'));
  assert.ok(!bad('numerics', 'numerics/admm-step.ts', '@admm-share/core'));
  assert.ok(!bad('numerics', 'numerics/chunks.ts', 'node:os'));
  assert.ok(bad('alignment', 'alignment/psi.ts', '../connections/parties.js'));
  // connections: nothing from training, prediction, the job or output.
  assert.ok(bad('connections', 'connections/parties.ts', '../training/loop.js'));
  assert.ok(bad('connections', 'connections/parties.ts', '../prediction/predict.js'));
  assert.ok(bad('connections', 'connections/party-port.ts', '../job/labels.js'));
  assert.ok(bad('connections', 'connections/server.ts', '../config.js'));
  assert.ok(!bad('connections', 'connections/party-port.ts', '../alignment/psi.js'));
  assert.ok(!bad('connections', 'connections/parties.ts', './auth.js'));
  // output: no connection code.
  assert.ok(bad('output', 'output/summary.ts', '../connections/party-connection.js'));
  assert.ok(!bad('output', 'output/summary.ts', './trace.js'));
  // monitoring: never the training loops.
  assert.ok(bad('monitoring', 'monitoring/monitor.ts', '../training/admm-loop.js'));
  assert.ok(!bad('monitoring', 'monitoring/monitor.ts', '../output/summary.js'));
  // training and prediction: not the phase machine.
  assert.ok(bad('training', 'training/loops.ts', '../job/coordinator.js'));
  assert.ok(!bad('training', 'training/loop.ts', '../job/job.js'));
  assert.ok(bad('prediction', 'prediction/predict.ts', '../training/evaluation.js'));
  assert.ok(bad('job', 'job/coordinator.ts', '../prediction/serve.js'));
});
// ---- end of the coordinator folders ----
