// The documentation checked against the code, so that it cannot drift: every relative link
// resolves (file and anchor), every `packages/...` path a document names exists, the command
// reference (docs/commands.md) names exactly the flags each command's --help prints, the
// architecture doc (docs/architecture.md) lists exactly the source folders there are and its two
// paths through the code name files that declare what they say, the README's tour names only
// what the sources declare, every tested example is run by some test, and the README and
// docs/scaling.md stay short enough to read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN } from './procs.js';

const root = fileURLToPath(new URL('../../../../', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** The documents a newcomer reads: the README, docs/ (with its folders), each package's markdown. */
function documents(): string[] {
  const docs = (dir: string): string[] =>
    readdirSync(join(root, dir)).flatMap((name) => {
      const p = join(dir, name);
      return statSync(join(root, p)).isDirectory() ? docs(p) : name.endsWith('.md') ? [p] : [];
    });
  const packages = readdirSync(join(root, 'packages')).flatMap((pkg) =>
    readdirSync(join(root, 'packages', pkg))
      .filter((name) => name.endsWith('.md'))
      .map((name) => join('packages', pkg, name)),
  );
  return ['README.md', ...docs('docs'), ...packages];
}

/** The text outside fenced code blocks (a link or path in an example is not the document's). */
function prose(markdown: string): string {
  let fenced = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (/^\s*```/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    })
    .join('\n');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, each blank a hyphen. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors a markdown file has: its headings' slugs (a repeated one gets -1, -2, ...). */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

test('docs: every relative link in README.md and docs/ points to a file that exists, and to a heading it has', () => {
  const broken: string[] = [];
  for (const doc of documents()) {
    const text = prose(read(doc));
    for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1];
      if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? join(root, doc) : join(root, dirname(doc), decodeURIComponent(path));
      if (!existsSync(file)) {
        broken.push(`${doc}: ${target} (no ${relative(root, file)})`);
        continue;
      }
      if (anchor !== undefined && !(statSync(file).isFile() && file.endsWith('.md') && anchors(readFileSync(file, 'utf8')).has(anchor))) broken.push(`${doc}: ${target} (no heading #${anchor} in ${relative(root, file)})`);
    }
  }
  assert.deepEqual(broken, []);
});

test('docs: every `packages/...` path README.md and docs/ name exists', () => {
  const missing: string[] = [];
  for (const doc of documents()) {
    for (const m of prose(read(doc)).matchAll(/`(packages\/[^`\s]+)`/g)) {
      const path = m[1].replace(/\/$/, '');
      if (/[*{}<>]/.test(path)) continue; // a pattern, not a path
      if (!existsSync(join(root, path))) missing.push(`${doc}: ${m[1]}`);
    }
  }
  assert.deepEqual(missing, []);
});

test('docs: the README and docs/scaling.md stay short (at most 450 lines each)', () => {
  for (const doc of ['README.md', 'docs/scaling.md']) {
    const lines = read(doc).split('\n').length - 1;
    assert.ok(lines <= 450, `${doc} has ${lines} lines; move detail into docs/`);
  }
});

test('docs: every tested example (a readme-test marker) is one that a test file runs', () => {
  const testDir = join(root, 'packages', 'admm-share', 'src', 'test');
  const tests = readdirSync(testDir)
    .filter((f) => f.endsWith('.ts') && f !== 'docs.test.ts')
    .map((f) => readFileSync(join(testDir, f), 'utf8'))
    .join('\n');
  const markers = documents().flatMap((doc) => [...read(doc).matchAll(/<!-- readme-test:([\w-]+)/g)].map((m) => ({ doc, name: m[1] })));
  assert.ok(markers.length >= 5, 'the README keeps its tested examples');
  for (const { doc, name } of markers) assert.ok(tests.includes(`readme-test:${name}`), `${doc}: no test runs the example marked readme-test:${name}`);
  const names = markers.map((m) => m.name);
  assert.deepEqual(names, [...new Set(names)], 'each marker once');
});

// ---- the command reference ----

const BINS: Record<string, string> = { 'admm-share': BIN.share, 'admm-coordinator': BIN.coordinator, 'admm-party': BIN.party };

const helpCache = new Map<string, string>();
function help(command: string): string {
  let out = helpCache.get(command);
  if (out === undefined) {
    const [bin, ...sub] = command.split(' ');
    const res = spawnSync(process.execPath, [BINS[bin], ...sub, '--help'], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(res.status, 0, `${command} --help: ${res.stderr}`);
    out = res.stdout;
    helpCache.set(command, out);
  }
  return out;
}

/** The flags a command's --help prints (without --help itself), each alias too (`--id-mode, --ids`). */
function helpFlags(command: string): Set<string> {
  const text = help(command);
  const options = text.slice(text.indexOf('\nOptions:'));
  const names = [...options.matchAll(/^\s{2}(--[a-z0-9][a-z0-9-]*(?:, --[a-z0-9][a-z0-9-]*)*)/gm)].flatMap((m) => m[1].split(', ').map((f) => f.slice(2)));
  return new Set(names.filter((f) => f !== 'help'));
}

/** The subcommands a command's --help lists under "Commands:". */
function subcommands(command: string): string[] {
  const text = help(command);
  const at = text.indexOf('\nCommands:');
  if (at < 0) return [];
  const block = text.slice(at, text.indexOf('\nOptions:'));
  return [...block.matchAll(/^\s{2}(\S+(?: [a-z][\w-]*)+)\s/gm)].map((m) => m[1]).filter((c) => c.startsWith(`${command} `));
}

/**
 * Every command a user can run: the leaves of each bin's --help, and a command with
 * subcommands that also runs by itself (its --help prints flags: `admm-party` beside `admm-party predict`).
 */
function allCommands(): string[] {
  const runnable = (command: string): string[] => {
    const subs = subcommands(command);
    return subs.length === 0 ? [command] : [...(helpFlags(command).size > 0 ? [command] : []), ...subs.flatMap(runnable)];
  };
  return Object.keys(BINS).flatMap(runnable);
}

/** The sections of docs/commands.md whose heading is one command in backticks: command -> text. */
function commandSections(): Map<string, string> {
  const text = prose(read('docs/commands.md'));
  const sections = new Map<string, string>();
  const headings = [...text.matchAll(/^#{1,6}\s+(.*)$/gm)];
  headings.forEach((h, i) => {
    const m = /^`((?:admm-share|admm-coordinator|admm-party)(?: [a-z][\w-]*)*)`$/.exec(h[1].trim());
    if (!m) return;
    assert.ok(!sections.has(m[1]), `docs/commands.md: two sections for ${m[1]}`);
    sections.set(m[1], text.slice(h.index, headings[i + 1]?.index ?? text.length));
  });
  return sections;
}

/**
 * The flags a piece of text names, by command: a code span that starts with a command
 * (`admm-party --role active`) names that command's flags; every other flag is `own`'s. `--no-x`
 * names the boolean `--x`.
 */
function namedFlags(text: string, own: string, commands: readonly string[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const add = (command: string, flag: string) => {
    const f = flag.startsWith('no-') ? flag.slice(3) : flag;
    if (!out.has(command)) out.set(command, new Set());
    out.get(command)!.add(f);
  };
  const flagsIn = (s: string) => [...s.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*)/g)].map((m) => m[1]);
  const rest = text.replace(/`([^`]+)`/g, (span, inner: string) => {
    const words = inner.replace(/^npx\s+/, '').split(/\s+/);
    if (!BINS[words[0]]) return span;
    // The longest run of words that leads to a command (`admm-share privacy calibrate`).
    const leads = (c: string) => commands.some((k) => k === c || k.startsWith(`${c} `));
    let command = words[0];
    for (const w of words.slice(1)) {
      if (leads(`${command} ${w}`)) command = `${command} ${w}`;
      else break;
    }
    for (const f of flagsIn(inner)) add(command, f);
    return '';
  });
  for (const f of flagsIn(rest)) add(own, f);
  return out;
}

test('docs/commands.md: one section per command, naming exactly the flags its --help prints', () => {
  const commands = allCommands();
  const sections = commandSections();
  assert.deepEqual([...sections.keys()].filter((c) => !commands.includes(c)), [], 'sections for commands that do not exist');
  assert.deepEqual(commands.filter((c) => !sections.has(c)), [], 'commands without a section in docs/commands.md');
  const problems: string[] = [];
  for (const [command, text] of sections) {
    assert.ok(help(command).split('\n')[0].startsWith(command), `${command} --help is that command's help`);
    const printed = helpFlags(command);
    const named = namedFlags(text, command, commands);
    for (const f of printed) if (!named.get(command)?.has(f)) problems.push(`${command}: --${f} is in --help but not in its section`);
    for (const [other, flags] of named)
      for (const f of flags) if (!helpFlags(other).has(f)) problems.push(`${command}'s section: ${other} has no --${f}`);
  }
  assert.deepEqual(problems, []);
});

/** The commands a document writes out: its code spans, and the lines of its fenced blocks (continuations joined). */
function commandTexts(markdown: string): string[] {
  const spans = [...prose(markdown).matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  const fencedLines: string[] = [];
  let fenced = false;
  let current = '';
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (fenced) {
      current += line.trim().replace(/\\$/, ' ');
      if (line.trim().endsWith('\\')) continue;
      fencedLines.push(current);
    }
    current = '';
  }
  return [...spans, ...fencedLines];
}

test('docs: a command written out anywhere in README.md or docs/ names only flags that command has', () => {
  const commands = allCommands();
  const problems: string[] = [];
  for (const doc of ['README.md', ...documents().filter((d) => d.startsWith('docs'))]) {
    const spans = commandTexts(read(doc)).map((t) => `\`${t.replace(/`/g, '')}\``);
    for (const [command, flags] of namedFlags(spans.join(' '), '(none)', commands)) {
      if (command === '(none)') continue;
      for (const f of flags) if (!helpFlags(command).has(f)) problems.push(`${doc}: \`${command} --${f}\`: no such flag`);
    }
  }
  assert.deepEqual(problems, []);
});

// ---- the architecture doc ----

/** A section of docs/architecture.md: from its `## ` heading to the next. */
function archSection(title: string): string {
  const text = read('docs/architecture.md');
  const at = text.search(new RegExp(`^## ${title.replace(/[.*+?^${}()|[\]\\`]/g, '\\$&')}\\s*$`, 'm'));
  assert.ok(at >= 0, `docs/architecture.md has no '## ${title}' section`);
  const end = text.indexOf('\n## ', at + 1);
  return text.slice(at, end < 0 ? text.length : end);
}

/** Every source folder: packages/<pkg>/src and the folders below it, test folders excluded. */
function sourceFolders(): string[] {
  const walk = (dir: string): string[] => [
    `${dir}/`,
    ...readdirSync(join(root, dir))
      .filter((name) => name !== 'test' && statSync(join(root, dir, name)).isDirectory())
      .flatMap((name) => walk(`${dir}/${name}`)),
  ];
  return readdirSync(join(root, 'packages'))
    .filter((pkg) => existsSync(join(root, 'packages', pkg, 'src')))
    .flatMap((pkg) => walk(`packages/${pkg}/src`))
    .sort();
}

test('docs/architecture.md: one line per source folder, every folder listed and every listed folder there', () => {
  const lines = archSection('Source folders')
    .split('\n')
    .filter((l) => l.startsWith('- '));
  const listed = lines.map((l) => {
    const m = /^- `(packages\/[\w.-]+\/src\/(?:[\w.-]+\/)*)` - \S/.exec(l);
    assert.ok(m, `not "- \`packages/.../src/.../\` - role": ${l}`);
    return m[1];
  });
  assert.deepEqual(listed, [...new Set(listed)], 'a folder listed twice');
  const actual = sourceFolders();
  assert.deepEqual(
    actual.filter((f) => !listed.includes(f)),
    [],
    'source folders missing from docs/architecture.md',
  );
  assert.deepEqual(
    listed.filter((f) => !actual.includes(f)),
    [],
    'folders docs/architecture.md lists that do not exist',
  );
});

/** Whether a TypeScript source declares `name`: a function, class, type, variable or method of that name. */
export function declares(source: string, name: string): boolean {
  const n = name.replace(/\$/g, '\\$');
  return (
    new RegExp(`\\b(?:function\\*?|class|interface|type|enum|const|let|var)\\s+${n}\\b`).test(source) ||
    // A method: its name first on the line, then its parameters; a call statement ends in ';'.
    new RegExp(`^\\s*(?:(?:export|public|private|protected|static|async|readonly|override|get|set)\\s+)*${n}\\s*(?:<[^>\\n]*>)?\\((?![^\\n]*;\\s*$)`, 'm').test(source)
  );
}

for (const path of ['One training round', 'One `POST /score`']) {
  test(`docs/architecture.md, "${path}": each hop names a file that exists and declares what it names`, () => {
    const hops = archSection(path)
      .split('\n')
      .filter((l) => /^\d+\. /.test(l));
    assert.ok(hops.length >= 5, `a handful of hops (${hops.length})`);
    for (const hop of hops) {
      const m = /^\d+\. `(packages\/[^`]+\.ts)` `([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)?)` - \S/.exec(hop);
      assert.ok(m, `not "N. \`packages/.../file.ts\` \`Name\` - what happens": ${hop}`);
      const [, file, name] = m;
      assert.ok(existsSync(join(root, file)), `${file} does not exist`);
      const source = readFileSync(join(root, file), 'utf8');
      for (const part of name.split('.')) assert.ok(declares(source, part), `${file} declares no ${part} (${hop})`);
    }
  });
}

/** Every non-test TypeScript source of every package (its src folder), by path. */
function sourceFiles(): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string) => {
    for (const name of readdirSync(join(root, dir))) {
      const p = `${dir}/${name}`;
      if (statSync(join(root, p)).isDirectory()) {
        if (name !== 'test') walk(p);
      } else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.set(p, readFileSync(join(root, p), 'utf8'));
    }
  };
  for (const folder of sourceFolders().filter((f) => /^packages\/[^/]+\/src\/$/.test(f))) walk(folder.slice(0, -1));
  return out;
}

test("README.md, the tour of the code: every class and function it names is declared in the sources (`Name` or `Class.method`)", () => {
  const readme = read('README.md');
  const at = readme.indexOf('\n## A short tour of the code');
  assert.ok(at >= 0, 'the README has its short tour');
  const tour = readme.slice(at, readme.indexOf('\n## ', at + 1));
  const sources = [...sourceFiles().values()];
  const names = [...tour.matchAll(/`([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)?)`/g)].map((m) => m[1]);
  assert.ok(names.length >= 3, `the tour names the code it describes (${names.join(', ')})`);
  for (const name of names) {
    const parts = name.split('.');
    assert.ok(
      sources.some((src) => parts.every((part) => declares(src, part))),
      `README's tour names \`${name}\`, which no source file declares`,
    );
  }
});

test('docs: the helpers of these checks', () => {
  assert.equal(slug('10. Label differential privacy at the coordinator (`--label-epsilon`)'), '10-label-differential-privacy-at-the-coordinator---label-epsilon');
  assert.equal(slug('One `POST /score`'), 'one-post-score');
  assert.ok(declares('export class AdmmLoop {\n  async run(p: P): Promise<R> {', 'run'));
  assert.ok(declares('  private sendRound(t: number): void {', 'sendRound'));
  assert.ok(declares('  request<T extends X>(out: O): Promise<T> {', 'request'));
  assert.ok(!declares('  this.run(x);\n', 'sendRound'));
  assert.ok(!declares('    sendRound(t);\n', 'sendRound'), 'a call statement is not a declaration');
  assert.ok(!declares('const x = run(1);', 'run'), 'a call is not a declaration');
});
