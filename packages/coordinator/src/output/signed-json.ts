/**
 * The JSON files the coordinator reads back and acts on (the label flips, job.json) are signed
 * with the coordinator's key (core's signed JSON, under coordinator.key beside them).
 */
import { dirname, join } from 'node:path';
import { readSignedJson, signedJson } from '@admm-share/core';
import { COORDINATOR_KEY_FILE, coordinatorKey } from './coordinator-key.js';

/** `body` with its `mac` under the key of `dir` (created there if it has none), ready to write. */
export function signed<T extends object>(dir: string, body: T): T & { mac: string } {
  return signedJson(coordinatorKey(dir), body);
}

/** The fields of a signed file of the coordinator's, without its `mac`, checked (core's readSignedJson). */
export function readSigned(path: string, what: string, format: string, older: string, unkeyed?: (body: Record<string, unknown>) => void): Record<string, unknown> {
  return readSignedJson(path, join(dirname(path), COORDINATOR_KEY_FILE), { what, format, older, unkeyed });
}
