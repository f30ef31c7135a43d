/**
 * Error kinds shared by every process. Each has a stable `code` and maps to a
 * distinct process exit status (sysexits.h numbering, so shell scripts can tell
 * a bad flag from a bad file from a failure at run time).
 */
export const EXIT = {
  ok: 0,
  /** EX_USAGE: a wrong flag or an inconsistent configuration. */
  config: 64,
  /** EX_DATAERR: an input file that cannot be read as the format it claims. */
  data: 65,
  /** EX_UNAVAILABLE: a peer broke the protocol, went away, or rejected us. */
  peer: 69,
  /** EX_SOFTWARE: anything else (a bug). */
  internal: 70,
  /** Killed by SIGINT / SIGTERM (128 + signal number, as shells report). */
  interrupted: 130,
} as const;

export class AdmmError extends Error {
  readonly exitCode: number = EXIT.internal;
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A bug: something failed that should not have (not bad input, not a peer). Keeps what was
 * thrown as `cause`, so that ADMM_DEBUG=1 can print its stack where the process ends.
 */
export class InternalError extends AdmmError {
  override readonly name = 'InternalError';
  constructor(context: string, cause: unknown) {
    super('ERR_INTERNAL', `internal error ${context}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

export class ConfigError extends AdmmError {
  override readonly name = 'ConfigError';
  override readonly exitCode = EXIT.config;
  constructor(message: string) {
    super('ERR_CONFIG', message);
  }
}

/** A problem in an input file; the message names the file and line. */
export class DataError extends AdmmError {
  override readonly name = 'DataError';
  override readonly exitCode = EXIT.data;
  constructor(
    readonly file: string,
    readonly line: number | undefined,
    detail: string,
  ) {
    super('ERR_DATA', line === undefined ? `${file}: ${detail}` : `${file}:${line}: ${detail}`);
  }
}

/** The other side of a connection misbehaved, closed, or refused us. */
export class PeerError extends AdmmError {
  override readonly name = 'PeerError';
  override readonly exitCode = EXIT.peer;
  constructor(message: string) {
    super('ERR_PEER', message);
  }
}

export function exitCodeOf(err: unknown): number {
  return err instanceof AdmmError ? err.exitCode : EXIT.internal;
}
