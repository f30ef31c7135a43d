// Test helpers for real child processes (exported as @admm-share/runtime/test-support): run
// a script, read its JSON log lines as they come, wait for one, kill what is left at teardown.
import { type ChildProcess, spawn } from 'node:child_process';

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

/** Run `node script ...args` (with `env` instead of this process's environment, if given). */
export function run(script: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Proc {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...(opts.env ? { env: opts.env } : {}), ...(opts.cwd ? { cwd: opts.cwd } : {}) });
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

/** A stack trace line, as node prints them (with or without a function name); user-facing errors must not contain one. */
export const STACK_LINE = /^\s+at .+:\d+:\d+\)?$/m;
