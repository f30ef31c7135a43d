/**
 * The credentials file (`admm-share credentials` writes it, an operator may write it by hand):
 * {"party-id": "secret", ...}, every id a valid party id and every secret at least
 * MIN_SECRET_CHARS characters, MIN_SECRET_DISTINCT of them different, in a file only its owner
 * can read or change. Declared once; `admm-coordinator --credentials` reads it here.
 */
import { readJsonFile, z } from '@admm-share/core';
import { nameSchema } from '../output/fields.js';
import { MIN_SECRET_CHARS, MIN_SECRET_DISTINCT, requirePrivateMode } from '@admm-share/runtime';

export const credentialsSchema = z.record(
  nameSchema,
  z
    .string({ error: `expected a secret (a string)` })
    .min(MIN_SECRET_CHARS, `a secret must have at least ${MIN_SECRET_CHARS} characters`)
    .refine((v) => new Set(v).size >= MIN_SECRET_DISTINCT, `a secret must have at least ${MIN_SECRET_DISTINCT} different characters (a random one: admm-share credentials)`),
  { error: (issue) => (issue.code === 'invalid_key' ? 'not a valid party id (letters, digits, . _ -)' : 'expected a JSON object {"party-id": "secret", ...}') },
);

export type Credentials = z.infer<typeof credentialsSchema>;

/**
 * Read `file` as credentials; a DataError names the file and the party id that is wrong, a
 * ConfigError a file other users can read or change.
 */
export function readCredentials(file: string): Credentials {
  const credentials = readJsonFile(credentialsSchema, file, 'credentials');
  requirePrivateMode('credentials', file);
  return credentials;
}
