// What the layering tests (layering.test.ts: the packages; layering-folders.test.ts: the folders
// inside them and the thread names) read the sources with: the source files, the test/non-test
// split and the import scanner.
import { readdirSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** packages/, from packages/admm-share/dist/test/. */
export const packages = fileURLToPath(new URL('../../../', import.meta.url));

/** A package's source folder: packages/<pkg>/src. */
export const srcOf = (pkg: string): string => join(packages, pkg, 'src');

/** The workspace packages that have sources. */
export function sourcePackages(): string[] {
  return readdirSync(packages).filter((d) => statSync(srcOf(d), { throwIfNoEntry: false })?.isDirectory());
}

/** Every .ts file under `dir`, recursively. */
export function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Whether a source file is a test or a test helper (under a test/ folder of a package).
 * Judged on the path inside packages/, so that a checkout under some /test/ folder is not all tests. */
export const isTest = (file: string): boolean => `${sep}${relative(packages, file)}`.includes(`${sep}test${sep}`);

/** Every module specifier a file imports or re-exports (static and dynamic). */
export function importsOf(text: string): string[] {
  const re = /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|import\s+['"]([^'"]+)['"]/g;
  return [...text.matchAll(re)].map((m) => m[1] ?? m[2] ?? m[3]);
}
