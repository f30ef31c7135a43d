// Dependencies point one way: party -> protocol, core; coordinator -> protocol, core.
// A party process must never contain coordinator code (and vice versa), and the protocol
// package stays free of transport and logging. npm workspaces do not enforce this; this does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packages = fileURLToPath(new URL('../../../', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Every module specifier a file imports or re-exports (static and dynamic). */
export function importsOf(text: string): string[] {
  const re = /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|import\s+['"]([^'"]+)['"]/g;
  return [...text.matchAll(re)].map((m) => m[1] ?? m[2] ?? m[3]);
}

const rules: { pkg: string; forbidden: RegExp; why: string }[] = [
  { pkg: 'party', forbidden: /^@admm-share\/coordinator|\/coordinator\//, why: 'party never imports coordinator code' },
  { pkg: 'coordinator', forbidden: /^@admm-share\/party|\/party\//, why: 'coordinator never imports party code' },
  { pkg: 'protocol', forbidden: /^(ws|pino|@admm-share\/)/, why: 'protocol depends on msgpackr only' },
  { pkg: 'core', forbidden: /^(ws|@admm-share\/)/, why: 'core is below every other package' },
];

for (const { pkg, forbidden, why } of rules) {
  test(`layering: ${why}`, () => {
    const files = sources(join(packages, pkg, 'src'));
    assert.ok(files.length > 0);
    for (const f of files) for (const spec of importsOf(readFileSync(f, 'utf8'))) assert.doesNotMatch(spec, forbidden, `${f} imports ${spec}`);
    const manifest = JSON.parse(readFileSync(join(packages, pkg, 'package.json'), 'utf8'));
    for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })) assert.doesNotMatch(dep, forbidden, `${pkg}/package.json depends on ${dep}`);
  });
}

test('layering: the import scanner sees the forms it must catch', () => {
  const text = `import { a } from '@admm-share/coordinator';\nexport * from "../../coordinator/src/x.js";\nconst m = await import('@admm-share/coordinator');\nimport '@admm-share/coordinator/side';`;
  assert.deepEqual(importsOf(text), ['@admm-share/coordinator', '../../coordinator/src/x.js', '@admm-share/coordinator', '@admm-share/coordinator/side']);
});
