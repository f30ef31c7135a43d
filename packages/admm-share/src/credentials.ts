import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Argv } from 'yargs';
import { ConfigError, writeFileAtomic } from '@admm-share/core';
import { NAME_RE } from '@admm-share/protocol';
import type { Credentials } from '@admm-share/coordinator';

/**
 * Random bytes per party secret: 256 bits, written as 64 hex characters (the coordinator
 * wants at least 16 characters; the proof is an HMAC-SHA256, whose key gains nothing beyond 256 bits).
 */
export const SECRET_BYTES = 32;

/** Where the coordinator's credentials go in `dir`. */
export function credentialsPath(dir: string): string {
  return join(dir, 'credentials.json');
}

/** Where party `id`'s secret goes in `dir` (for `admm-party --token-file`). */
export function tokenPath(dir: string, id: string): string {
  return join(dir, `${id}.token`);
}

/**
 * A random secret per party (node:crypto): `credentials.json` ({"party-id": "secret"}, what
 * `admm-coordinator --credentials` reads through its schema, credentials-file.ts) and one `<party>.token` per party (what
 * `admm-party --token-file` reads), each written atomically with mode 0600. Party ids must be
 * valid names (they become file names) and distinct. Without `overwrite`, an existing file is
 * refused before anything is written, so a set of credentials is never half replaced.
 * Returns the credentials file.
 */
export function writeCredentials(dir: string, parties: readonly string[], opts: { overwrite?: boolean } = {}): string {
  if (parties.length === 0) throw new ConfigError('credentials: no party ids given');
  for (const p of parties) if (!NAME_RE.test(p)) throw new ConfigError(`credentials: '${p}' is not a valid party id (letters, digits, . _ -)`);
  const dup = parties.find((p, i) => parties.indexOf(p) !== i);
  if (dup !== undefined) throw new ConfigError(`credentials: party id '${dup}' is given twice`);
  const file = credentialsPath(dir);
  const targets = [file, ...parties.map((p) => tokenPath(dir, p))];
  if (!opts.overwrite) {
    const existing = targets.filter((f) => existsSync(f));
    if (existing.length > 0) throw new ConfigError(`credentials: ${existing.join(', ')} already exist${existing.length === 1 ? 's' : ''}; pass --force to replace them`);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const secrets: Credentials = Object.fromEntries(parties.map((p) => [p, randomBytes(SECRET_BYTES).toString('hex')]));
  writeFileAtomic(file, JSON.stringify(secrets, null, 2) + '\n', 0o600);
  for (const p of parties) writeFileAtomic(tokenPath(dir, p), secrets[p] + '\n', 0o600);
  return file;
}

/** `admm-share credentials`: its flags (yargs builder). */
export function credentialsOptions<T>(y: Argv<T>) {
  return y
    .usage('$0 credentials --parties ID,ID,... --out DIR [--force]\n\nWrite DIR/credentials.json for admm-coordinator --credentials and DIR/<party>.token for each admm-party --token-file (random secrets, mode 0600).')
    .option('parties', { type: 'string', array: true, demandOption: true, describe: 'party ids (comma or space separated)' })
    .option('out', { type: 'string', demandOption: true, describe: 'directory to write into (created if missing)' })
    .option('force', { type: 'boolean', default: false, describe: 'replace existing credential files (new secrets: every party needs its new token)' });
}

/** `admm-share credentials`: writes the files and prints where they are (never the secrets). */
export function runCredentials(a: { parties: (string | number)[]; out: string; force: boolean }, out: NodeJS.WritableStream = process.stdout): void {
  const parties = a.parties.flatMap((p) => String(p).split(',')).map((p) => p.trim()).filter((p) => p !== '');
  const dir = resolve(a.out);
  const credentials = writeCredentials(dir, parties, { overwrite: a.force });
  const tokens = Object.fromEntries(parties.map((p) => [p, tokenPath(dir, p)]));
  out.write(JSON.stringify({ credentials, tokens }, null, 2) + '\n');
}
