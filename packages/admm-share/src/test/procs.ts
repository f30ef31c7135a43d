// Helpers for tests that run the real executables as child processes.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packages = fileURLToPath(new URL('../../../', import.meta.url));
export const BIN = {
  share: join(packages, 'admm-share', 'bin', 'admm-share.js'),
  coordinator: join(packages, 'coordinator', 'bin', 'admm-coordinator.js'),
  party: join(packages, 'party', 'bin', 'admm-party.js'),
};
export const A9A = fileURLToPath(new URL('../../../../../shared/data/a9a/', import.meta.url));

export interface Proc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Parsed JSON log lines seen so far. */
  records: Record<string, unknown>[];
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first log record matching `pred` (rejects if the process exits first). */
  waitFor(pred: (r: Record<string, unknown>) => boolean, what?: string): Promise<Record<string, unknown>>;
  kill(): void;
}

const live = new Set<Proc>();

/** Start `node script ...args` (in `opts.cwd`, default this process's directory). */
export function run(script: string, args: string[], opts: { cwd?: string } = {}): Proc {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd: opts.cwd });
  let out = '';
  let err = '';
  let partial = '';
  const records: Record<string, unknown>[] = [];
  const waiters: { pred: (r: Record<string, unknown>) => boolean; resolve: (r: Record<string, unknown>) => void }[] = [];
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    partial += d.toString();
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(line);
      } catch {
        continue;
      }
      records.push(rec);
      for (const w of waiters.slice()) if (w.pred(rec)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(rec);
      }
    }
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => {
      live.delete(proc);
      resolve({ code, signal });
    }),
  );
  const proc: Proc = {
    child,
    stdout: () => out,
    stderr: () => err,
    records,
    exit,
    waitFor(pred, what = 'log record') {
      const seen = records.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ pred, resolve });
        void exit.then(({ code }) => reject(new Error(`process exited (code ${code}) before ${what}; stderr: ${err}`)));
      });
    },
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
  live.add(proc);
  return proc;
}

/** Kill every process these helpers started and that is still running (test teardown). */
export function killAll(): void {
  for (const p of live) p.kill();
}

export function tempDir(t: { after(fn: () => void): void }, prefix = 'admm-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A stack trace line, as node prints them; user-facing errors must not contain one. */
export const STACK_LINE = /^\s+at .+\(.*:\d+:\d+\)$/m;
