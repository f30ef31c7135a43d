// The privacy ledger a party keeps next to its model (model-p1.ledger.json), and a one-shot
// release kept beside it (model-p1.release.bin): declared once here as a schema beside the
// writer, read back through core's parseJsonText/readJsonFile. A restarted party must not
// guess what it has spent, so the reader is as strict as a validator of the wire: exact keys,
// types, ranges, and an epsilonSpent that agrees with the releases recorded.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { accountEpsilon, expectedValue, parseJsonText, readJsonFile, writeFileAtomic, z } from '@admm-share/core';
import { type PrivacyInfo, DIGEST_RE, NAME_RE, ProtocolError, validatePartyMessage } from '@admm-share/protocol';
import { BUDGET_RTOL, reportedSpent } from './budget.js';

/** The ledger file's format tag; restoreLedger reads this version only. */
export const LEDGER_FORMAT = 'admm-share-ledger/3';


/** A finite JSON number for which `ok` holds (JSON's 1e400 reads as Infinity, and is refused). */
const number = (ok: (x: number) => boolean, what: string) => z.number({ error: expectedValue(what) }).refine(ok, { error: expectedValue(what) });

/**
 * The calibration, as the party sends it in `ready`: the protocol's validator checks it, and its
 * complaint is given as the ledger's (info, info.mechanism: ...).
 */
const calibration = z.unknown().transform((value, ctx): PrivacyInfo => {
  try {
    const ready = validatePartyMessage({ type: 'ready', jobId: 'ledger', privacy: value });
    if (ready.type === 'ready') return ready.privacy;
    ctx.issues.push({ code: 'custom', message: 'not a calibration', input: value });
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    const m = err.message.replace(/a map\b/g, 'a JSON object');
    const at = /^ready\.privacy((?:\.\w+)*): (.*)$/s.exec(m);
    const path = at ? at[1].split('.').filter(Boolean) : [];
    ctx.issues.push({ code: 'custom', message: at ? at[2] : value === undefined ? 'missing' : m, path, input: value });
  }
  return z.NEVER;
});

/** The ledger file, as saveLedger writes it. */
const ledgerFile = z
  .strictObject(
    {
      format: z.literal(LEDGER_FORMAT, { error: expectedValue(`'${LEDGER_FORMAT}'`) }),
      jobId: z.string({ error: expectedValue('a job id') }).regex(NAME_RE, { error: expectedValue('a job id') }),
      releases: number(Number.isSafeInteger, 'an integer >= 0').refine((x) => x >= 0, { error: expectedValue('an integer >= 0') }),
      epsilonSpent: number((x) => x >= 0, 'a number >= 0'),
      info: calibration,
      rho: number((x) => x > 0, 'a positive number'),
      lambda: number((x) => x > 0, 'a positive number'),
      bw: number((x) => x >= 0, 'a number >= 0'),
      /** score-release: the released vector's length and the SHA-256 of its file (kept next to the ledger). */
      release: z.strictObject({ rows: z.int().min(1), sha256: z.string().regex(DIGEST_RE, 'expected 64 hex characters') }).nullable(),
      /** What the data preparation's statistics spent before the job, composed with the release in GDP (absent in older ledgers). */
      preparation: z.strictObject({ mu: number((x) => x > 0, 'a positive number'), deltaThreshold: number((x) => x >= 0 && x < 1, 'a number in [0, 1)') }).nullable().optional(),
    },
    { error: (iss) => (iss.code === 'unrecognized_keys' ? `unexpected field '${iss.keys[0]}'` : 'expected a JSON object') },
  )
  .superRefine((l, ctx) => {
    const { info, releases } = l;
    if (info.mechanism === 'none') {
      ctx.issues.push({ code: 'custom', message: "info.mechanism is 'none': a ledger is only kept for training with noise", input: l });
      return;
    }
    let computed: number;
    try {
      computed = accountEpsilon({ sigma: info.sigma, delta: info.delta!, rounds: releases, sensitivity: info.sensitivity, method: info.accountant! });
    } catch (err) {
      ctx.issues.push({ code: 'custom', path: ['info'], message: `cannot account ${releases} releases with it (${(err as Error).message})`, input: l });
      return;
    }
    const spent = reportedSpent(computed, info.epsilon!);
    if (Math.abs(l.epsilonSpent - spent) > BUDGET_RTOL * Math.max(spent, info.epsilon!))
      ctx.issues.push({ code: 'custom', message: `epsilonSpent ${l.epsilonSpent} does not match the ${releases} releases recorded (they spend ${spent})`, input: l });
    else if (info.mechanism === 'score-release' && (l.release === null) !== (releases === 0))
      ctx.issues.push({ code: 'custom', message: `release: ${releases} releases recorded, but ${l.release ? 'a' : 'no'} released vector`, input: l });
  });

/** A ledger file's content. */
export type LedgerFile = z.output<typeof ledgerFile>;

/** What restoreLedger keeps of a ledger file, validated field by field. */
export type Ledger = Omit<LedgerFile, 'format'>;

/** Keep the ledger on disk, atomically and readable by its owner only. */
export function writeLedger(path: string, ledger: Ledger): void {
  const file: LedgerFile = { format: LEDGER_FORMAT, ...ledger };
  writeFileAtomic(path, JSON.stringify(file) + '\n', 0o600);
}

/**
 * Parse and validate a ledger read back from disk, like a message off the wire. Anything
 * wrong is a DataError naming the file and the field (a party must not guess what it has spent).
 */
export function parseLedger(path: string, text: string): Ledger {
  const { format: _, ...ledger } = parseJsonText(ledgerFile, text, path, 'privacy ledger');
  return ledger;
}

/** The ledger at `path`, if there is one (a file that cannot be read or is malformed is a DataError). */
export function readLedger(path: string): Ledger | undefined {
  if (!existsSync(path)) return undefined;
  const { format: _, ...ledger } = readJsonFile(ledgerFile, path, 'privacy ledger');
  return ledger;
}

/**
 * model-p1.ledger.json -> model-p1.release.bin: a one-shot release, kept next to its ledger so
 * that it is sent again rather than drawn again. The file holds n doubles of the party's own
 * row numbers (in its data file) and then the n released values, in the order sent.
 */
export function releaseVectorPath(ledger: string): string {
  return ledger.replace(/(\.ledger)?\.json$/, '') + '.release.bin';
}

/** One release: the party's own row numbers and the values released for them. */
export interface Released {
  rows: Uint32Array;
  values: Float64Array;
}

/** The release file's contents: rows, then values, as doubles. */
function releaseFile(r: Released): Float64Array {
  const v = new Float64Array(2 * r.rows.length);
  v.set(r.rows);
  v.set(r.values, r.rows.length);
  return v;
}

/** SHA-256 of a vector's bytes, hex. */
function vectorDigest(v: Float64Array): string {
  return createHash('sha256').update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength)).digest('hex');
}

/** What the ledger records of a release: its length and the digest of its file. */
export function releaseRecord(r: Released): { rows: number; sha256: string } {
  return { rows: r.rows.length, sha256: vectorDigest(releaseFile(r)) };
}

/** Keep a release next to its ledger (before the ledger records it). */
export function writeReleasedVector(ledger: string, r: Released): void {
  const file = releaseFile(r);
  writeFileAtomic(releaseVectorPath(ledger), new Uint8Array(file.buffer), 0o600);
}

/**
 * The vector a restored ledger says was released, checked against its length and digest; a
 * missing or altered file leaves the release lost (undefined), which scoreRelease refuses.
 */
export function readReleasedVector(path: string, expected: { rows: number; sha256: string }): Released | undefined {
  if (!existsSync(path)) return undefined;
  const bytes = readFileSync(path);
  const n = expected.rows;
  if (bytes.length !== 2 * n * 8) return undefined;
  const v = new Float64Array(2 * n);
  new Uint8Array(v.buffer).set(bytes);
  if (vectorDigest(v) !== expected.sha256) return undefined;
  return { rows: Uint32Array.from(v.subarray(0, n)), values: v.slice(n) };
}
