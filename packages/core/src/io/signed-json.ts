// JSON files that are read back and acted on (a coordinator's label flips and job.json, a
// party's model) carry `mac`, an HMAC-SHA256 under a key kept beside them (key-file.ts) of the
// file's JSON without it: checked before any field is used, so that an edit is refused as an
// edit whatever it now says. The JSON holds its own format tag, so a file of one kind cannot
// pass for another signed with the same key.
import { basename } from 'node:path';
import * as z from 'zod';
import { DataError } from '../errors.js';
import { readJsonFile } from './json-file.js';
import { existingKeyFile, keyedDigest, sameDigest } from './key-file.js';

/** `body` with its `mac` under `key`, ready to write. */
export function signedJson<T extends object>(key: Uint8Array, body: T): T & { mac: string } {
  return { ...body, mac: keyedDigest(key, JSON.stringify(body)) };
}

const jsonObject = z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), 'expected a JSON object');

/**
 * The fields of the signed file at `path` (`what` names it in messages) without its `mac`, once
 * the file is in format `format` and its mac matches under the key in `keyPath`. `older` says
 * what to do with a file of an earlier format, which has no mac, so an edit to it cannot be
 * detected. `unkeyed` runs first: a file's own plain digest, which names corruption as such
 * even away from its key.
 */
export function readSignedJson(
  path: string,
  keyPath: string,
  opts: { what: string; format: string; older: string; unkeyed?: (body: Record<string, unknown>) => void },
): Record<string, unknown> {
  const { what, format } = opts;
  const { mac, ...body } = readJsonFile(jsonObject, path, what);
  if (body.format !== format) {
    const [, family, version] = /^(.*\/)(\d+)$/.exec(format) ?? [];
    const given = typeof body.format === 'string' && family !== undefined && body.format.startsWith(family) ? Number(body.format.slice(family.length)) : NaN;
    if (given < Number(version)) throw new DataError(path, undefined, `${what}: format '${body.format}' has no keyed digest, so an edit to it cannot be detected; ${opts.older}`);
    throw new DataError(path, undefined, `${what}: format: expected '${format}', got ${JSON.stringify(body.format)?.slice(0, 60)}`);
  }
  opts.unkeyed?.(body);
  if (!sameDigest(mac, keyedDigest(existingKeyFile(keyPath, path), JSON.stringify(body))))
    throw new DataError(path, undefined, `${what}: its content does not match its keyed digest (the file was changed after it was written, or the ${basename(keyPath)} beside it is not the one it was signed with)`);
  return body;
}
