import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

const require = createRequire(import.meta.url);

/** Path of a workspace package's bin script, e.g. binPath('coordinator', 'admm-coordinator'). */
export function binPath(pkg: string, bin: string): string {
  return join(dirname(require.resolve(`@admm-share/${pkg}/package.json`)), 'bin', `${bin}.js`);
}

/**
 * Node's flags for a party process, also on the first line of its bin script (a test compares
 * them). A young generation of at most 3 x 2 MB: reading a data file makes tens of millions of
 * short-lived strings, and V8's default (up to 3 x 16 MB) keeps that much garbage resident, a
 * third of a small party's peak memory. The collector in the party's own thread: with its helper
 * threads, V8 began marking the whole heap about every round of a million rows, although the
 * young-generation collection each round (RoundGarbage) had freed the round's buffers;
 * without them it did not (docs/scaling.md).
 */
export const PARTY_NODE_FLAGS = ['--max-semi-space-size=2', '--single-threaded-gc', '--expose-gc'];

/**
 * Node's flags for the coordinator process, also on the first line of its bin script (a test
 * compares them). Each round leaves the coordinator a few megabytes of array buffers (the
 * shares as received and decoded, the socket's reads; a checkpoint's encoding, every tenth
 * round when that was the default), which V8 counts against a limit of about 24 MB above the
 * live heap: on a9a that was a full collection every 7-8 rounds, 1.3-5.7 ms each, on the
 * round's critical path. With the old generation's first limit at 128 MB, 0-2 in 90 rounds
 * instead of 12-13 (docs/scaling.md). The price is up to that much garbage held between
 * collections, in a process with no memory target of its own.
 */
export const COORDINATOR_NODE_FLAGS = ['--initial-old-space-size=128'];

/**
 * The environment a party process gets beyond its parent's, also on the first line of its bin
 * script. glibc serves every allocation below its mmap threshold from its heap, and raises that
 * threshold to the size of each large block freed (up to 32 MiB); freed heap memory mostly stays
 * resident. A million-row party's vectors and points are 8-32 MB each: after the intersection
 * its heap held 110-124 MB, most of it free (docs/scaling.md). A fixed threshold of 4 MiB gives
 * every larger block back to the system when it is freed: the points and the intersection's
 * messages (and, before long vectors came in parts of 512 KiB, each round's message and
 * decoded vector, 8 MB at a million rows). A fresh block costs a page fault every 4 KiB as it
 * is written.
 */
export const PARTY_ENV: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: String(4 << 20) };

export interface Child {
  name: string;
  proc: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last lines the process wrote on stderr (its error message, if it failed). */
  stderrTail(): string;
}

/**
 * Start a node script as a separate OS process. Its stdout (pino JSON lines) and stderr
 * go to `logFile`; each stdout line that parses as JSON is also handed to `onRecord`.
 */
export function spawnNode(name: string, script: string, args: string[], logFile: string, onRecord?: (rec: Record<string, unknown>) => void, nodeFlags: string[] = [], env: Readonly<Record<string, string>> = {}): Child {
  const proc = spawn(process.execPath, [...nodeFlags, script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const log = createWriteStream(logFile);
  const tail: string[] = [];
  const lines = createInterface({ input: proc.stdout! });
  lines.on('line', (line) => {
    log.write(line + '\n');
    if (!onRecord) return;
    try {
      onRecord(JSON.parse(line));
    } catch {
      /* not a log record */
    }
  });
  createInterface({ input: proc.stderr! }).on('line', (line) => {
    log.write(line + '\n');
    tail.push(line);
    if (tail.length > 20) tail.shift();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.on('error', () => resolve({ code: null, signal: null }));
    proc.on('close', (code, signal) => {
      log.end();
      resolve({ code, signal });
    });
  });
  return { name, proc, exited, stderrTail: () => tail.join('\n') };
}

/** Kill every child still running (used on failure, signals and exit). */
export function killAll(children: Iterable<Child>): void {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGTERM');
}
