// Secrets in files (the coordinator's --http-token-file and --credentials, a party's
// --token-file): strong enough not to be guessed, in a file only its owner can read or change.
import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from '@admm-share/core';

/**
 * Shortest secret accepted: 16 characters, 64 bits even as hex, beyond an online guess within
 * --hello-timeout per connection and MAX_PENDING_CONNECTIONS at once (and far beyond what an
 * HTTP client can try).
 */
export const MIN_SECRET_CHARS = 16;

/**
 * Fewest different characters in a secret: 16 identical characters, or a few repeated, are
 * long enough but guessed at once. A random hex secret of 16 characters has about 10.
 */
export const MIN_SECRET_DISTINCT = 8;

/** Why `secret` is too weak to accept, or undefined. */
export function weakSecret(secret: string): string | undefined {
  if (secret.length < MIN_SECRET_CHARS) return `must have at least ${MIN_SECRET_CHARS} characters`;
  if (new Set(secret).size < MIN_SECRET_DISTINCT)
    return `has fewer than ${MIN_SECRET_DISTINCT} different characters and can be guessed; use a random one (openssl rand -hex 32, or admm-share credentials)`;
  return undefined;
}

/**
 * The bearer token in `file` (surrounding white space removed): a strong secret (weakSecret),
 * in a file that only its owner can read or change. A ConfigError names the flag, the file
 * and the fix.
 */
export function readTokenFile(flag: string, file: string): string {
  let text: string;
  let mode: number;
  try {
    mode = statSync(file).mode;
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`--${flag} ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const token = text.trim();
  const weak = weakSecret(token);
  if (weak) throw new ConfigError(`--${flag} ${file}: the token ${weak}`);
  requirePrivateMode(flag, file, mode);
  return token;
}

/** A file of secrets that other users can read or change is refused (a ConfigError naming the fix). */
export function requirePrivateMode(flag: string, file: string, mode = statSync(file).mode): void {
  // Windows has no such mode bits (Node reports 0o666 for every file).
  if (process.platform !== 'win32' && (mode & 0o077) !== 0)
    throw new ConfigError(`--${flag} ${file}: other users can read or change it (mode ${(mode & 0o777).toString(8)}); make it private: chmod 600 ${file}`);
}
