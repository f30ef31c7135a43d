import { readFileSync } from 'node:fs';
import { pino, type Logger } from 'pino';
import yargs, { type Argv } from 'yargs';
import { AdmmError, ConfigError, EXIT, exitCodeOf } from '@admm-share/core';

/** The --log-level choices: pino's levels from the most to the least severe (trace is left out). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** One JSON logger per process, on stdout; tests and scripts read its `listening` line. */
export function createLogger(name: string, level: LogLevel = 'info'): Logger {
  return pino({ name, level, base: { pid: process.pid, name } }, pino.destination({ fd: 1, sync: true }));
}

/** ADMM_DEBUG set to anything but '', '0' or 'false': print the stack of internal errors. */
export function debugEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.ADMM_DEBUG?.trim().toLowerCase();
  return v !== undefined && v !== '' && v !== '0' && v !== 'false';
}

/** Deepest `cause` chain followed; a cycle or a very long chain stops here. */
const MAX_CAUSES = 8;

/** The stack of an error and of each error in its `cause` chain (what ADMM_DEBUG prints). */
export function stackOf(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let i = 0; i <= MAX_CAUSES && e !== undefined && e !== null; i++) {
    parts.push((i > 0 ? 'Caused by: ' : '') + (e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e)));
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join('\n');
}

/**
 * Report a fatal error the way every admm-share command does: one line on stderr naming
 * the tool and what went wrong, a `fatal` log record, and the exit code of the error's kind.
 * No stack trace, except for an internal error (a bug: exit code 70, whether thrown as
 * anything else than an AdmmError or wrapped in an InternalError) with ADMM_DEBUG=1.
 */
export function exitWithError(tool: string, err: unknown, logger?: Logger): never {
  const code = err instanceof AdmmError ? err.code : 'ERR_INTERNAL';
  const message = err instanceof Error ? err.message : String(err);
  logger?.fatal({ err: message, code }, 'fatal');
  process.stderr.write(`${tool}: error: ${message}\n`);
  if (exitCodeOf(err) === EXIT.internal && debugEnabled()) process.stderr.write(`${stackOf(err)}\n`);
  process.exit(exitCodeOf(err));
}

/**
 * Last line of defence: an exception or rejection nothing else caught still ends the process
 * with a one-line message and the right exit code, never a raw stack trace.
 */
export function installCrashHandlers(tool: string, logger?: Logger): void {
  process.on('uncaughtException', (err) => exitWithError(tool, err, logger));
  process.on('unhandledRejection', (err) => exitWithError(tool, err, logger));
}

/**
 * yargs `.fail()` handler: a wrong flag is a configuration error (exit 64) with usage help.
 * yargs also routes here what a command handler throws or rejects with; anything but a
 * ConfigError or yargs' own YError exits as what it is (a bug: 70, with its stack under ADMM_DEBUG).
 */
export function yargsFail(tool: string) {
  return (msg: string | undefined | null, err: Error | undefined, y: { help(): unknown; showHelp(fn: (s: string) => void): unknown }) => {
    if (err && !(err instanceof ConfigError) && err.name !== 'YError') exitWithError(tool, err);
    y.showHelp((s) => process.stderr.write(s + '\n'));
    process.stderr.write(`\n${tool}: error: ${msg ?? err?.message}\n`);
    process.exit(EXIT.config);
  };
}

export function requirePositive(name: string, v: number): number {
  if (!(Number.isFinite(v) && v > 0)) throw new ConfigError(`--${name} must be a positive number, got ${v}`);
  return v;
}

export function requireNonNegative(name: string, v: number): number {
  if (!(Number.isFinite(v) && v >= 0)) throw new ConfigError(`--${name} must be a number >= 0, got ${v}`);
  return v;
}

export function requireInteger(name: string, v: number, min: number): number {
  if (!(Number.isSafeInteger(v) && v >= min)) throw new ConfigError(`--${name} must be an integer >= ${min}, got ${v}`);
  return v;
}

/**
 * The life of a long-running command (admm-party, admm-coordinator): parse the flags (a bad
 * one exits 64 before any log), build the logger, start, exit 0 when the job is done or
 * with the error's code when it fails or a signal stops it.
 */
export async function runService<C extends { logLevel: LogLevel }>(
  tool: string,
  parse: () => C,
  start: (config: C, logger: Logger) => Promise<{ done: Promise<unknown>; close(): unknown }> | { done: Promise<unknown>; close(): unknown },
): Promise<never> {
  let config: C;
  try {
    config = parse();
  } catch (err) {
    exitWithError(tool, err);
  }
  const logger = createLogger(tool, config.logLevel);
  installCrashHandlers(tool, logger);
  let stopping = false;
  try {
    const handle = await start(config, logger);
    onSignals(logger, async () => {
      stopping = true;
      await handle.close();
    });
    await handle.done;
    // A signal that came after the job's end (a coordinator keeping its HTTP port open) still stopped the process.
    process.exit(stopping ? EXIT.interrupted : EXIT.ok);
  } catch (err) {
    // Stopped by a signal: the job's end is the signal's doing, not an error.
    if (stopping) process.exit(EXIT.interrupted);
    exitWithError(tool, err, logger);
  }
}

/**
 * The yargs parser every admm-share command starts from: strict (an unknown flag is an
 * error), every flag also readable from the environment as PREFIX_FLAG, a repeated flag
 * means its last value, and a parse failure exits 64 with the usage text.
 */
export function commandLine(argv: string[], tool: string, envPrefix: string): Argv {
  return yargs(argv)
    .scriptName(tool)
    .parserConfiguration({ 'duplicate-arguments-array': false })
    .env(envPrefix)
    .strict()
    .version(false)
    .help()
    .fail(yargsFail(tool));
}

/** The contents of a file named by a flag; a missing or unreadable file is a configuration error naming both. */
export function readFlagFile(flag: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`--${flag} ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/**
 * Exit with 130 on SIGINT / SIGTERM after `stop` runs. A failure while stopping does not
 * change the exit code, but is logged (with its stack under ADMM_DEBUG=1).
 */
export function onSignals(logger: Logger, stop: () => Promise<void>): void {
  const handler = (signal: NodeJS.Signals) => {
    logger.warn({ signal }, 'stopping');
    stop()
      .catch((err: unknown) => logger.error({ err: err instanceof Error ? err.message : String(err), ...(debugEnabled() ? { stack: stackOf(err) } : {}) }, 'error while stopping'))
      .finally(() => process.exit(EXIT.interrupted));
  };
  process.once('SIGINT', handler);
  process.once('SIGTERM', handler);
}

/**
 * This process's peak resident memory so far, in bytes: VmHWM from /proc/self/status where
 * there is one (Linux), else getrusage's maxrss. On Linux maxrss is not this program's own:
 * it survives fork and exec, so a process started by a large parent (simulate, which holds
 * the whole data set) reports the parent's peak.
 */
export function peakMemoryBytes(): number {
  try {
    const hwm = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (hwm) return Number(hwm[1]) * 1024;
  } catch {
    /* no procfs: fall back */
  }
  return process.resourceUsage().maxRSS * 1024;
}
