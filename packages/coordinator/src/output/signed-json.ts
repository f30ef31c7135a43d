/**
 * The JSON files the coordinator reads back and acts on (the label flips, job.json) carry `mac`,
 * an HMAC-SHA256 under the coordinator's key (coordinator-key.ts) of the file's JSON without it:
 * checked before any field is used, so that an edit is refused as an edit whatever it now says.
 */
import { dirname } from 'node:path';
import { DataError, keyedDigest, readJsonFile, sameDigest, z } from '@admm-share/core';
import { coordinatorKey, signingKey } from './coordinator-key.js';

/** `body` with its `mac` under the key of `dir` (created there if it has none), ready to write. */
export function signed<T extends object>(dir: string, body: T): T & { mac: string } {
  return { ...body, mac: keyedDigest(coordinatorKey(dir), JSON.stringify(body)) };
}

const jsonObject = z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), 'expected a JSON object');

/**
 * The fields of a signed file (`what` names it in messages) without its `mac`, once the file
 * is in format `format` and its mac matches under the key of its folder. `older` says what to
 * do with a file of an earlier format, which has no mac, so an edit to it cannot be detected.
 * `unkeyed` runs first: a file's own plain digest, which names corruption as such even away from its key.
 */
export function readSigned(path: string, what: string, format: string, older: string, unkeyed?: (body: Record<string, unknown>) => void): Record<string, unknown> {
  const { mac, ...body } = readJsonFile(jsonObject, path, what);
  if (body.format !== format) {
    const [, family, version] = /^(.*\/)(\d+)$/.exec(format) ?? [];
    const given = typeof body.format === 'string' && family !== undefined && body.format.startsWith(family) ? Number(body.format.slice(family.length)) : NaN;
    if (given < Number(version))
      throw new DataError(path, undefined, `${what}: format '${body.format}' has no keyed digest, so an edit to it cannot be detected; ${older}`);
    throw new DataError(path, undefined, `${what}: format: expected '${format}', got ${JSON.stringify(body.format)?.slice(0, 60)}`);
  }
  unkeyed?.(body);
  if (!sameDigest(mac, keyedDigest(signingKey(dirname(path), path), JSON.stringify(body))))
    throw new DataError(path, undefined, `${what}: its content does not match its keyed digest (the file was changed after it was written, or its folder's coordinator.key is not the one it was signed with)`);
  return body;
}
