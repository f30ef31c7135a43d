// Inside the packages laid out in folders by role (core, party, coordinator), each folder's
// rule says what it may import from the package's other folders and top-level files, and the
// top of src keeps only the files listed for it: anything else goes into the folder of its
// role. Protocol, runtime and admm-share are flat; a folder added to one of them needs a rule
// in the same table. Thread names are checked in every package.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, join, posix, relative, sep } from 'node:path';
import { importsOf, sourcePackages, sources, srcOf } from './layering-support.js';

/**
 * What one folder of a package's src (or one file at its top) may import from the package's
 * other folders and top-level files. A target is named by its first path segment under src: a
 * folder ('numerics') or a top-level file ('config.ts'); an entry may also name one file
 * ('job/coordinator.ts'). Its own files it may always import. Either an allow list, `only`
 * ([]: nothing else of the package, nor anything outside src by a relative path), or a deny
 * list, `never`, whichever states the rule.
 */
export type FolderRule = {
  pkg: string;
  /** A folder of the package's src, or a file at its top. */
  folder: string;
  why: string;
  /** The only bare specifiers (node: builtins aside) its sources may import. */
  onlyBare?: readonly string[];
  /** Bare specifiers (node: builtins included) it must not import, nor their subpaths. */
  neverBare?: readonly string[];
} & ({ only: readonly string[]; never?: undefined } | { never: readonly string[]; only?: undefined });

export const FOLDER_RULES: readonly FolderRule[] = [
  // core: every folder may import errors.ts, the error kinds at the top of core.
  { pkg: 'core', folder: 'linalg', only: ['errors.ts'], why: 'linalg (matrices and their products) needs nothing else in core' },
  { pkg: 'core', folder: 'io', only: ['linalg', 'errors.ts'], why: 'io reads and writes files into matrices: no PSI, threads, kernels, losses or privacy' },
  { pkg: 'core', folder: 'psi', only: ['io', 'errors.ts'], why: 'psi needs only the packed ids of io' },
  { pkg: 'core', folder: 'threads', only: ['linalg', 'errors.ts'], why: 'threads (the team mechanism and the dense team) work on matrices only' },
  { pkg: 'core', folder: 'kernels', only: ['linalg', 'errors.ts'], why: 'the WebAssembly kernels work on matrices only' },
  { pkg: 'core', folder: 'model', only: ['linalg', 'errors.ts'], why: 'model (losses, metrics, the central fit) works on matrices only' },
  { pkg: 'core', folder: 'prepare', only: ['io', 'linalg', 'privacy', 'errors.ts'], why: "prepare (a party's raw table made ready: columns, missing values, one-hot, scaling, fit privately or not) reads with io, writes matrices, draws noise with privacy: no model, PSI, threads or kernels" },
  { pkg: 'core', folder: 'privacy', only: ['errors.ts'], why: 'privacy accounting and noise are arithmetic, reviewable on their own' },
  { pkg: 'core', folder: 'errors.ts', only: [], why: 'errors.ts, which every folder imports, imports nothing of core' },

  // party: transport/ (the WebSocket link), session/ (the sans-IO state machine), xupdate/ (the
  // local numerics), privacy/ (noise, ledger, one-shot release), scoring/ (model file, scoring
  // with a trained model), intersection/ (the party's side of the PSI).
  { pkg: 'party', folder: 'xupdate', only: [], onlyBare: ['@admm-share/core', 'seedrandom'], why: 'party xupdate/ (the x-update numerics) imports only core (and seedrandom), nothing else of the party' },
  { pkg: 'party', folder: 'session', never: ['transport'], neverBare: ['ws', 'node:net', 'node:http', 'node:https', 'node:tls', 'node:dgram'], why: 'party session/ is sans-IO: no socket (ws, net, http, tls) and nothing from transport/' },
  { pkg: 'party', folder: 'transport', only: [], why: 'party transport/ (the link) knows nothing of the job: no session, x-update, privacy, scoring or intersection' },
  { pkg: 'party', folder: 'privacy', never: ['transport', 'session', 'scoring', 'intersection'], neverBare: ['ws'], why: 'party privacy/ uses the x-update and core only: no transport, session, scoring or intersection' },
  { pkg: 'party', folder: 'scoring', never: ['transport', 'session', 'xupdate', 'intersection'], neverBare: ['ws'], why: 'party scoring/ (the model file, scoring new rows) uses privacy and core: no transport, session or x-update' },
  { pkg: 'party', folder: 'intersection', only: [], neverBare: ['ws', 'pino'], why: "party intersection/ (the party's side of the PSI) imports core and protocol only" },
  { pkg: 'party', folder: 'preparation', only: ['privacy'], neverBare: ['ws'], why: "party preparation/ (reading and preparing the party's data) uses core and the privacy spend's type only" },

  // coordinator
  { pkg: 'coordinator', folder: 'numerics', only: [], onlyBare: ['@admm-share/core', '@admm-share/core/team', '@admm-share/protocol'], why: "the step's numerics (ADMM step, Anderson, kernels, threads) import only core and protocol" },
  { pkg: 'coordinator', folder: 'alignment', only: [], onlyBare: ['@admm-share/core', '@admm-share/protocol'], why: 'the alignment (PSI, row matching) imports only core and protocol' },
  { pkg: 'coordinator', folder: 'connections', only: ['alignment', 'bytes.ts', 'output/fields.ts'], why: 'connections import only the alignment, bytes.ts and the ids of output/fields.ts: nothing from the job, training, prediction, monitoring, numerics or config' },
  { pkg: 'coordinator', folder: 'output', only: [], why: "output/ (the files' schemas, writers and readers) is a leaf: it imports nothing else of the coordinator (job/summary-of.ts builds the summary from the job)" },
  { pkg: 'coordinator', folder: 'monitoring', never: ['training', 'prediction', 'job', 'numerics'], why: 'monitoring never imports the training loops, prediction, the job or the numerics' },
  { pkg: 'coordinator', folder: 'training', never: ['prediction', 'monitoring', 'job/coordinator.ts'], why: 'training loops import no prediction or monitoring code, and not the phase machine' },
  { pkg: 'coordinator', folder: 'prediction', never: ['training', 'monitoring', 'numerics', 'job/coordinator.ts'], why: 'prediction imports no training loop, monitoring, numerics or the phase machine' },
  { pkg: 'coordinator', folder: 'job', never: ['prediction'], why: 'the training job (phase machine, labels, flips) imports no prediction code' },
  { pkg: 'coordinator', folder: 'bytes.ts', only: [], why: 'bytes.ts (the bytes pair, counted in every folder) imports nothing of the coordinator' },
];

/**
 * The files at the top of src of each package laid out in folders, and only those: the
 * process's wiring (party.ts), its flags (cli.ts), the package's exports (index.ts) and what
 * every folder shares (core's errors.ts, the coordinator's config.ts and bytes.ts).
 */
export const TOP_FILES: Readonly<Record<string, readonly string[]>> = {
  core: ['errors.ts', 'hash.ts', 'index.ts', 'team.ts', 'sodium-native.d.ts', 'webassembly.d.ts'],
  party: ['cli.ts', 'index.ts', 'party.ts'],
  coordinator: ['bytes.ts', 'cli.ts', 'config.ts', 'index.ts'],
};

/** Why `spec`, imported by `file` (its path under the package's src, '/'-separated), breaks `rule`; undefined if it does not. */
export function folderViolation(rule: FolderRule, file: string, spec: string): string | undefined {
  const where = `${rule.pkg}/src/${rule.folder}`;
  if (!spec.startsWith('.')) {
    if (rule.neverBare?.some((n) => spec === n || spec.startsWith(`${n}/`))) return `imports ${spec}; ${where} never imports ${rule.neverBare.join(', ')}`;
    if (rule.onlyBare && !spec.startsWith('node:') && !rule.onlyBare.includes(spec)) return `imports ${spec}; ${where} may import only ${rule.onlyBare.join(', ')}`;
    return undefined;
  }
  const path = posix.join(posix.dirname(file), spec).replace(/\.js$/, '.ts'); // '../x.ts' when it leaves src
  const top = path.split('/')[0];
  if (top === rule.folder) return undefined;
  const named = (list: readonly string[]) => list.some((n) => n === top || n === path);
  if (rule.only && !named(rule.only)) return `imports ${path}; ${where} may import ${rule.only.length > 0 ? `only ${rule.only.join(', ')}` : 'nothing else'} of ${rule.pkg}`;
  if (rule.never && named(rule.never)) return `imports ${path}; ${where} never imports ${rule.never.join(', ')}`;
  return undefined;
}

/** The rule for `file` (a path under `pkg`'s src): its folder's, or its own if it is a top file. */
function ruleFor(pkg: string, file: string): FolderRule {
  const rule = FOLDER_RULES.find((r) => r.pkg === pkg && r.folder === file.split('/')[0]);
  assert.ok(rule, `no rule for ${pkg}/src/${file}`);
  return rule;
}

for (const rule of FOLDER_RULES)
  test(`layering (${rule.pkg}/src/${rule.folder}): ${rule.why}`, () => {
    const src = srcOf(rule.pkg);
    const files = rule.folder.endsWith('.ts') ? [join(src, rule.folder)] : sources(join(src, rule.folder));
    assert.ok(files.length > 0, `no sources in ${rule.pkg}/src/${rule.folder}`);
    for (const f of files) {
      const file = relative(src, f).split(sep).join('/');
      for (const spec of importsOf(readFileSync(f, 'utf8'))) {
        const why = folderViolation(rule, file, spec);
        assert.equal(why, undefined, `${rule.pkg}/src/${file} ${why}`);
      }
    }
  });

test('layering (folders): every folder of every package has a rule and every rule a folder (or top file); the top of src holds only its listed files', () => {
  const packages = sourcePackages();
  for (const pkg of [...new Set(FOLDER_RULES.map((r) => r.pkg)), ...Object.keys(TOP_FILES)]) assert.ok(packages.includes(pkg), `a rule for ${pkg}, which has no src`);
  for (const pkg of packages) {
    const src = srcOf(pkg);
    const entries = readdirSync(src);
    const folders = entries.filter((e) => e !== 'test' && statSync(join(src, e)).isDirectory() && sources(join(src, e)).length > 0);
    const rules = FOLDER_RULES.filter((r) => r.pkg === pkg);
    const ruled = rules.map((r) => r.folder).filter((f) => !f.endsWith('.ts'));
    assert.deepEqual(folders.sort(), ruled.sort(), `every folder of ${pkg}/src has a rule (and every rule a folder)`);
    for (const r of rules.filter((r) => r.folder.endsWith('.ts'))) assert.ok(entries.includes(r.folder), `a rule for ${pkg}/src/${r.folder}, which is not there`);
    const top = TOP_FILES[pkg];
    if (folders.length > 0) assert.ok(top, `${pkg}/src has folders: list the files its top keeps in TOP_FILES`);
    if (top) assert.deepEqual(entries.filter((e) => e.endsWith('.ts')).sort(), [...top].sort(), `${pkg}/src holds only ${top.join(', ')} at its top: anything else goes into the folder of its role`);
  }
});

const at = (file: string, ...specs: string[]) => specs.map((spec): [string, string] => [file, spec]);

/** Per package, imports its folder rules must refuse (at least one for every rule) and neighbours they must let through: [file under src, specifier]. */
const CATCHES: Readonly<Record<string, { refused: [string, string][]; allowed: [string, string][] }>> = {
  core: {
    refused: [
      ...at('io/csv.ts', '../psi/psi.js', '../hash.js'), // a top file other than errors.ts
      ...at('io/ids.ts', '../threads/thread-team.js'),
      ...at('linalg/csr.ts', '../io/index.js'),
      ...at('privacy/noise.ts', '../model/losses.js'),
      ...at('psi/psi.ts', '../threads/dense-team.js'),
      ...at('threads/dense-team.ts', '../io/index.js'),
      ...at('kernels/wasm-kernels.ts', '../model/losses.js'),
      ...at('model/central.ts', '../privacy/noise.js'),
      ...at('errors.ts', './linalg/csr.js'),
      ...at('prepare/fit.ts', '../model/losses.js', '../psi/psi.js', '../hash.js'),
    ],
    allowed: [
      ...at('io/csv.ts', '../linalg/csr.js', './lines.js', '../errors.js', 'csv-parse'),
      ...at('psi/psi-team.ts', '../io/packed-ids.js'),
      ...at('prepare/fit-dp.ts', '../privacy/noise.js', '../io/csv.js', '../linalg/dense.js'),
    ],
  },
  party: {
    refused: [
      ...at('xupdate/ridge-xupdate.ts', '../session/state.js', '../privacy/privacy.js', '../transport/link.js', '@admm-share/protocol', 'pino', 'ws'),
      ...at('session/session.ts', 'ws', 'node:net', 'node:tls', '../transport/link.js', '../transport/frames.js'),
      ...at('transport/link.ts', '../session/state.js', '../xupdate/ridge-xupdate.js', '../privacy/privacy.js', '../scoring/scoring.js'),
      ...at('privacy/privacy.ts', 'ws', '../transport/link.js', '../session/state.js', '../scoring/model-file.js'),
      ...at('scoring/scoring.ts', '../session/state.js', '../xupdate/sgd.js', '../transport/tls.js'),
      ...at('intersection/psi.ts', '../session/state.js', 'ws'),
      ...at('preparation/data.ts', '../session/state.js', '../scoring/model-file.js', 'ws'),
    ],
    allowed: [
      ...at('xupdate/ridge-xupdate.ts', './cholesky.js', '@admm-share/core', 'node:os', 'seedrandom'),
      ...at('session/session.ts', '../xupdate/ridge-xupdate.js', '../privacy/privacy.js', './state.js', 'node:crypto', '@admm-share/protocol'),
      ...at('transport/link.ts', './frames.js', 'ws', '@admm-share/protocol'),
      ...at('privacy/privacy.ts', '../xupdate/ridge-xupdate.js'),
      ...at('scoring/scoring.ts', '../privacy/budget.js'),
      ...at('intersection/psi.ts', '@admm-share/core'),
      ...at('preparation/data.ts', '../privacy/privacy.js', '@admm-share/core', 'pino'),
    ],
  },
  coordinator: {
    refused: [
      ...at('numerics/admm-step.ts', '../connections/parties.js', '../config.js'),
      ...at('numerics/anderson.ts', '@admm-share/runtime', 'pino'),
      ...at('alignment/psi.ts', '../connections/parties.js'),
      ...at('connections/parties.ts', '../training/loop.js', '../prediction/predict.js'),
      ...at('connections/party-port.ts', '../job/labels.js'),
      ...at('connections/server.ts', '../config.js'),
      ...at('connections/credentials-file.ts', '../output/summary.js', '../output/checkpoint.js'),
      ...at('output/summary.ts', '../connections/party-connection.js', '../job/job.js', '../training/loop.js', '../config.js', '../bytes.js'),
      ...at('monitoring/monitor.ts', '../training/admm-loop.js'),
      ...at('training/loops.ts', '../job/coordinator.js'), // the phase machine
      ...at('prediction/predict.ts', '../training/evaluation.js'),
      ...at('job/coordinator.ts', '../prediction/serve.js'),
      ...at('bytes.ts', './config.js'),
    ],
    allowed: [
      ...at('numerics/admm-step.ts', './anderson.js', '@admm-share/core'),
      ...at('numerics/chunks.ts', 'node:os'),
      ...at('connections/party-port.ts', '../alignment/psi.js'),
      ...at('connections/parties.ts', './auth.js'),
      ...at('connections/credentials-file.ts', '../output/fields.js'),
      ...at('output/summary.ts', './trace.js'),
      ...at('monitoring/monitor.ts', '../output/summary.js'),
      ...at('training/loop.ts', '../job/job.js'),
    ],
  },
};

for (const [pkg, { refused, allowed }] of Object.entries(CATCHES))
  test(`layering (${pkg} folders): the rules catch what they are for`, () => {
    const violation = (file: string, spec: string) => folderViolation(ruleFor(pkg, file), file, spec);
    for (const [file, spec] of refused) assert.ok(violation(file, spec), `${pkg}/src/${file} importing ${spec} must be refused`);
    for (const [file, spec] of allowed) assert.equal(violation(file, spec), undefined, `${pkg}/src/${file} importing ${spec} is allowed`);
    for (const rule of FOLDER_RULES.filter((r) => r.pkg === pkg))
      assert.ok(refused.some(([file]) => ruleFor(pkg, file) === rule), `no example of what ${pkg}/src/${rule.folder}'s rule refuses`);
  });

test('layering (folders): every package with folder rules shows what they catch', () => {
  assert.deepEqual(Object.keys(CATCHES).sort(), [...new Set(FOLDER_RULES.map((r) => r.pkg))].sort());
});

// Thread names: a thread's entry script is `<what>-thread.ts` and nothing else is; a main-thread
// object that owns threads is a team, in `<what>-team.ts` (thread-team.ts is the mechanism).

/** What breaks the thread naming in one file (its path and text), or undefined. */
export function threadNamingProblem(file: string, text: string): string | undefined {
  const name = basename(file);
  // An entry talks to its parent (parentPort, however it reaches it) or serves a team.
  const entry = /\bparentPort\b/.test(text) || /import\s*\{[^}]*\bserveTeam\b[^}]*\}\s*from/.test(text);
  if (name.endsWith('-worker.ts')) return 'a -worker.ts file: name a thread entry <what>-thread.ts, a main-thread owner <what>-team.ts';
  if (name.endsWith('-thread.ts') && !entry) return 'named -thread.ts but not a thread entry (no parentPort or serveTeam)';
  if (entry && !name.endsWith('-thread.ts')) return 'a thread entry (parentPort or serveTeam) not named <what>-thread.ts';
  for (const m of text.matchAll(/(?:new Worker\(|script:\s*)new URL\(\s*['"]\.\/([\w-]+)\.js['"]/g))
    if (!m[1].endsWith('-thread')) return `starts ${m[1]}.js: a thread entry is named <what>-thread`;
  return undefined;
}

test('thread names: entries are <what>-thread.ts and start as such, no -worker.ts files, in every package', () => {
  const packages = sourcePackages();
  for (const pkg of ['core', 'protocol', 'runtime', 'party', 'coordinator', 'admm-share']) assert.ok(packages.includes(pkg), pkg);
  for (const pkg of packages)
    for (const f of sources(srcOf(pkg)).filter((f) => basename(f) !== 'layering-folders.test.ts')) { // this file holds the examples below
      const problem = threadNamingProblem(f, readFileSync(f, 'utf8'));
      assert.equal(problem, undefined, `${f}: ${problem}`);
    }
  const src = (...p: string[]) => join(srcOf('x'), ...p);
  assert.ok(threadNamingProblem(src('fit-worker.ts'), "import { parentPort } from 'node:worker_threads';"));
  assert.ok(threadNamingProblem(src('split.ts'), "import { serveTeam } from '@admm-share/core';"));
  assert.ok(threadNamingProblem(src('fit.ts'), "const { parentPort } = await import('node:worker_threads');"));
  assert.ok(threadNamingProblem(src('fit.ts'), "import * as threads from 'node:worker_threads';\nthreads.parentPort!.postMessage(out);"));
  assert.ok(threadNamingProblem(src('dense-thread.ts'), "import { ThreadTeam } from './thread-team.js';"));
  assert.ok(threadNamingProblem(src('psi-team.ts'), "const w = new Worker(new URL('./psi-worker.js', import.meta.url));"));
  assert.ok(threadNamingProblem(src('split-team.ts'), "new ThreadTeam({ script: new URL('./split.js', import.meta.url) })"));
  assert.equal(threadNamingProblem(src('psi-thread.ts'), "import { parentPort } from 'node:worker_threads';"), undefined);
  assert.equal(threadNamingProblem(src('fit-thread.ts'), "import * as threads from 'node:worker_threads';\nthreads.parentPort!.postMessage(out);"), undefined);
  assert.equal(threadNamingProblem(src('dense-team.ts'), "new ThreadTeam({ script: new URL('./dense-thread.js', import.meta.url) })"), undefined);
});
