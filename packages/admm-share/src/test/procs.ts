// What the end-to-end tests run and read: the three executables and the a9a files, with the
// shared helpers for child processes (runtime) and temporary directories (core).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHARED } from '@admm-share/core/test-support';
import type { Proc } from '@admm-share/runtime/test-support';

export { type Proc, STACK_LINE, killAll, run } from '@admm-share/runtime/test-support';
export { tempDir } from '@admm-share/core/test-support';

const packages = fileURLToPath(new URL('../../../', import.meta.url));
export const BIN = {
  share: join(packages, 'admm-share', 'bin', 'admm-share.js'),
  coordinator: join(packages, 'coordinator', 'bin', 'admm-coordinator.js'),
  party: join(packages, 'party', 'bin', 'admm-party.js'),
};
export const A9A = SHARED.a9a;
export const PRIVACY_VECTORS = SHARED.privacyVectors;

/** SIGSTOP, and wait (synchronously: the relay forwards nothing meanwhile) until the kernel reports the process stopped. */
export function freeze(p: Proc): void {
  const pid = p.child.pid!;
  process.kill(pid, 'SIGSTOP');
  const deadline = Date.now() + 10_000;
  for (;;) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    if (stat[stat.lastIndexOf(')') + 2] === 'T') return;
    if (Date.now() > deadline) throw new Error(`process ${pid} did not stop after SIGSTOP`);
  }
}
