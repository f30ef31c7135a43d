// The tested examples of the README and docs/: the commands of a fenced block after a
// `<!-- readme-test:NAME` marker, for the tests that run them as written (readme.test.ts,
// predict.test.ts, ...; docs.test.ts checks that every marker is one a test runs).
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

export const README = fileURLToPath(new URL('../../../../README.md', import.meta.url));
/** The command reference, whose examples readme.test.ts runs too. */
export const COMMANDS_DOC = fileURLToPath(new URL('../../../../docs/commands.md', import.meta.url));

/**
 * The commands of the fenced block that directly follows `marker`: comment and blank lines
 * dropped, `\` continuations joined, words split on blanks (the test runs them without a
 * shell, so the block may not use quoting or other shell syntax).
 */
export function fencedCommands(markdown: string, marker: string): string[][] {
  const at = markdown.indexOf(marker);
  assert.ok(at >= 0, `the document has no '${marker}' marker`);
  const lines = markdown.slice(at).split('\n').slice(1);
  assert.match(lines[0] ?? '', /^\s*```/, `the fenced block must start on the line after '${marker}'`);
  const close = lines.findIndex((l, i) => i > 0 && /^\s*```\s*$/.test(l));
  assert.ok(close > 0, `the block after '${marker}' is not closed`);
  const commands: string[][] = [];
  let current = '';
  for (const raw of lines.slice(1, close)) {
    const line = raw.trim();
    if (current === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      current += line.slice(0, -1) + ' ';
      continue;
    }
    current += line;
    assert.doesNotMatch(current, /["'`$|&;<>*?(){}[\]~]/, `${current}: the test runs commands without a shell; keep them to plain words`);
    commands.push(current.split(/\s+/).filter(Boolean));
    current = '';
  }
  assert.equal(current, '', `the block after '${marker}' ends in a continued line`);
  return commands;
}

