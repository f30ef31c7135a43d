// Headless Chromium for the dashboard's tests (dashboard.test.ts, dashboard-alignment.test.ts):
// where the browser is, whether a test without it is skipped, and what goes wrong in a page.
import { execFileSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Page } from 'puppeteer-core';

/** Test artifacts (git-ignored): the screenshots CI keeps. */
export const ARTIFACTS = fileURLToPath(new URL('../../../../test-artifacts/', import.meta.url));

/** Chromium's flags in a container: no sandbox, no GPU, no small /dev/shm. */
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'];

/**
 * Chromium: $CHROMIUM_PATH, else `chromium` on the PATH (Debian's package; .ci/run installs it).
 * A CHROMIUM_PATH that names no executable is a mistake to report (the tests fail), not a
 * reason to skip.
 */
function findChromium(): { path: string } | { missing: string } | { wrong: string } {
  const given = process.env.CHROMIUM_PATH;
  if (given) {
    try {
      accessSync(given, constants.X_OK);
      return { path: given };
    } catch {
      return { wrong: `CHROMIUM_PATH=${given} is not an executable file` };
    }
  }
  try {
    return { path: execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim() };
  } catch {
    return { missing: "Chromium not found: the browser tests need it. Install Debian's chromium package (apt-get install chromium; .ci/run does) or set CHROMIUM_PATH" };
  }
}
const chromium = findChromium();
/** Under CI the browser tests run or fail; elsewhere a machine without Chromium skips them. */
export const skipBrowser = 'missing' in chromium && process.env.CI !== 'true' ? chromium.missing : false;
export function chromiumPath(): string {
  if ('wrong' in chromium) throw new Error(chromium.wrong);
  if ('missing' in chromium) throw new Error(`${chromium.missing} (CI=true: a missing browser fails)`);
  return chromium.path;
}

/**
 * What goes wrong in the page: console errors and warnings and uncaught errors, as a list the
 * test expects empty. Chromium's advice to set willReadFrequently follows the test's own
 * second canvas readback (seriesPixels), not anything the page does.
 */
export function pageProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warn') && !m.text().includes('willReadFrequently')) problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${(e as Error).message}`));
  return problems;
}
