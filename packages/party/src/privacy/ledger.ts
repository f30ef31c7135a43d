// The privacy ledger a party keeps next to its model (model-p1.ledger.json): every job's
// history, append-only, each entry chained to the one before and sealed with the party's key
// (chain.ts); and the one-shot releases kept beside it (model-p1.release.bin). Declared once
// here as a schema beside the writer. A restarted party must not guess what it has spent, so
// the reader is as strict as a validator of the wire: exact keys, types, ranges, an
// epsilonSpent that agrees with the releases recorded, and no job whose history goes back.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { DataError, accountEpsilon, expectedValue, parseJsonText, parseWith, readJsonFile, writeFileAtomic, z } from '@admm-share/core';
import { type PrivacyInfo, DIGEST_RE, NAME_RE, ProtocolError, validatePartyMessage } from '@admm-share/protocol';
import { BUDGET_RTOL, reportedSpent } from './budget.js';
import { Chain, canonical, chainFields, ledgerKey, refuseUnsignedOverSigned, verifyChain } from './chain.js';

/** The ledger file's format tag. */
export const LEDGER_FORMAT = 'admm-share-ledger/4';
/** The single-job format before it, converted on first read. */
const OLD_LEDGER_FORMAT = 'admm-share-ledger/3';


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

/** A job's state as one ledger entry records it (the old single-job format held one, without offset). */
function jobState<R extends z.ZodType>(release: R) {
  return {
    jobId: z.string({ error: expectedValue('a job id') }).regex(NAME_RE, { error: expectedValue('a job id') }),
    releases: number(Number.isSafeInteger, 'an integer >= 0').refine((x) => x >= 0, { error: expectedValue('an integer >= 0') }),
    epsilonSpent: number((x) => x >= 0, 'a number >= 0'),
    info: calibration,
    rho: number((x) => x > 0, 'a positive number'),
    lambda: number((x) => x > 0, 'a positive number'),
    bw: number((x) => x >= 0, 'a number >= 0'),
    /** score-release: where the released vector is in the release file, its length and the SHA-256 of its bytes. */
    release: release.nullable(),
    /** What the data preparation's statistics spent before the job, composed with the release in GDP. */
    preparation: z.strictObject({ mu: number((x) => x > 0, 'a positive number'), deltaThreshold: number((x) => x >= 0 && x < 1, 'a number in [0, 1)') }).nullable().optional(),
  };
}

const sha256 = z.string().regex(DIGEST_RE, 'expected 64 hex characters');
const strict = { error: (iss: { code?: string; keys?: string[] }) => (iss.code === 'unrecognized_keys' ? `unexpected field '${iss.keys![0]}'` : 'expected a JSON object') };

/** One entry's own consistency: its epsilonSpent is what its releases spend, and a release has its vector. */
function checkState(l: { info: PrivacyInfo; releases: number; epsilonSpent: number; release: unknown }, ctx: z.RefinementCtx, path: (string | number)[]): void {
  const { info, releases } = l;
  if (info.mechanism === 'none') {
    ctx.addIssue({ code: 'custom', path, message: "info.mechanism is 'none': a ledger is only kept for training with noise" });
    return;
  }
  let computed: number;
  try {
    computed = accountEpsilon({ sigma: info.sigma, delta: info.delta!, rounds: releases, sensitivity: info.sensitivity, method: info.accountant! });
  } catch (err) {
    ctx.addIssue({ code: 'custom', path: [...path, 'info'], message: `cannot account ${releases} releases with it (${(err as Error).message})` });
    return;
  }
  const spent = reportedSpent(computed, info.epsilon!);
  if (Math.abs(l.epsilonSpent - spent) > BUDGET_RTOL * Math.max(spent, info.epsilon!))
    ctx.addIssue({ code: 'custom', path, message: `epsilonSpent ${l.epsilonSpent} does not match the ${releases} releases recorded (they spend ${spent})` });
  else if (info.mechanism === 'score-release' && (l.release === null) !== (releases === 0))
    ctx.addIssue({ code: 'custom', path, message: `release: ${releases} releases recorded, but ${l.release ? 'a' : 'no'} released vector` });
}

/** Where one job's release is in the release file (bytes from `offset`: its row numbers, then its values, as doubles). */
const releaseRef = z.strictObject({ offset: z.int().min(0), rows: z.int().min(1), sha256 });

const entry = z.strictObject({ ...chainFields, ...jobState(releaseRef) }, strict);

/** The ledger file, as LedgerBook writes it: every job's history, one entry per booking, chained. */
const ledgerFile = z
  .strictObject({ format: z.literal(LEDGER_FORMAT, { error: expectedValue(`'${LEDGER_FORMAT}'`) }), entries: z.array(entry, { error: expectedValue('a JSON array') }) }, strict)
  .superRefine((file, ctx) => {
    const last = new Map<string, LedgerEntry>();
    file.entries.forEach((e, i) => {
      const path = ['entries', i];
      checkState(e, ctx, path);
      const was = last.get(e.jobId);
      if (was && e.releases < was.releases)
        ctx.addIssue({ code: 'custom', path, message: `job ${e.jobId} goes backwards: ${e.releases} releases after entries[${was.seq}] recorded ${was.releases}` });
      else if (was && was.release !== null && canonical(e.release) !== canonical(was.release))
        ctx.addIssue({ code: 'custom', path, message: `job ${e.jobId}'s release differs from the one entries[${was.seq}] recorded` });
      last.set(e.jobId, e);
    });
  });

/** The single-job ledger of earlier versions (admm-share-ledger/3): read once and converted. */
const oldLedgerFile = z
  .strictObject(
    { format: z.literal(OLD_LEDGER_FORMAT), ...jobState(z.strictObject({ rows: z.int().min(1), sha256 })) },
    strict,
  )
  .superRefine((l, ctx) => checkState(l, ctx, []));

/** A ledger file's content. */
export type LedgerFile = z.output<typeof ledgerFile>;
type LedgerEntry = z.output<typeof entry>;

/** One job's state: what the latest entry of that job records. */
export type Ledger = Omit<LedgerEntry, 'seq' | 'prev' | 'mac'>;

const WHAT = 'privacy ledger';

/**
 * Which version of the file is on disk, without reading it: every write is a new file renamed
 * into place (writeFileAtomic), so another process's write changes its inode, size or time.
 */
function fileVersion(path: string): string {
  if (!existsSync(path)) return 'none';
  const s = statSync(path, { bigint: true });
  return `${s.ino}:${s.size}:${s.mtimeNs}`;
}

/** Bytes of one release in the release file: its row numbers and values, as doubles. */
const releaseBytes = (rows: number) => 2 * rows * 8;

/**
 * Parse a ledger file's text (format, fields, each entry's accounting and the history of each
 * job), like a message off the wire; the MACs are checked by LedgerBook, which has the key.
 * Anything wrong is a DataError naming the file and the field.
 */
export function parseLedger(path: string, text: string): LedgerFile {
  return parseJsonText(ledgerFile, text, path, 'privacy ledger');
}

/**
 * Every job's history of one party (model-p1.ledger.json), append-only and chained with the
 * party's key (chain.ts), with the one-shot releases in the release file beside it
 * (model-p1.release.bin, every job's release one after the other). Opening it checks the
 * chain, and that the release file holds nothing the ledger does not account for: a ledger
 * deleted, or replaced by an older one, while releases it recorded are still on disk is
 * refused, naming both files.
 */
export class LedgerBook {
  /** The file as this process last read or wrote it (fileVersion): another writer changes it. */
  private version: string;

  private constructor(
    readonly path: string,
    private readonly chain: Chain<Ledger>,
  ) {
    this.version = fileVersion(path);
  }

  static open(path: string): LedgerBook {
    if (!existsSync(path)) {
      const book = new LedgerBook(path, new Chain(path, WHAT, undefined));
      book.checkReleaseFile(false);
      return book;
    }
    const value = readJsonFile(z.unknown(), path, WHAT);
    if (typeof value === 'object' && value !== null && (value as { format?: unknown }).format === OLD_LEDGER_FORMAT) {
      // Read once and converted: the old ledger's one job becomes the first entry of the chain.
      refuseUnsignedOverSigned(path, WHAT, OLD_LEDGER_FORMAT);
      const { format: _, release, ...old } = parseWith(oldLedgerFile, value, path, WHAT);
      const book = new LedgerBook(path, new Chain(path, WHAT, undefined));
      book.chain.push({ ...old, release: release && { offset: 0, ...release }, preparation: old.preparation ?? null });
      book.checkReleaseFile(true);
      book.write();
      return book;
    }
    const { entries } = parseWith(ledgerFile, value, path, WHAT);
    const key = ledgerKey(path, true, WHAT);
    verifyChain(path, WHAT, key, entries);
    const book = new LedgerBook(path, new Chain(path, WHAT, key, entries));
    book.checkReleaseFile(true);
    return book;
  }

  /** The latest state of job `jobId`, if the ledger has any. */
  job(jobId: string): Ledger | undefined {
    return this.chain.latest(jobId);
  }

  /** Where the next release goes in the release file: after every release the ledger records. */
  get releaseEnd(): number {
    let end = 0;
    for (const e of this.chain.entries) if (e.release) end = Math.max(end, e.release.offset + releaseBytes(e.release.rows));
    return end;
  }

  /**
   * Book a job's new state: a new entry at the end of the chain, the whole file written
   * atomically. A file another process (a second job on the same --model) wrote since this one
   * read it is refused rather than overwritten, which would drop that job's entries and let the
   * release file be written over.
   */
  append(state: Ledger): void {
    if (fileVersion(this.path) !== this.version)
      throw new DataError(this.path, undefined, `${WHAT}: another process wrote it since this party read it; run one job at a time with one --model`);
    this.chain.push(state);
    this.write();
  }

  private write(): void {
    const file: LedgerFile = { format: LEDGER_FORMAT, entries: this.chain.entries };
    writeFileAtomic(this.path, JSON.stringify(file) + '\n', 0o600);
    this.version = fileVersion(this.path);
  }

  private checkReleaseFile(ledgerExists: boolean): void {
    const file = releaseVectorPath(this.path);
    if (!existsSync(file)) return;
    const size = statSync(file).size;
    const end = this.releaseEnd;
    if (size <= end) return;
    const why = ledgerExists ? `the ledger accounts for ${end} bytes of it` : 'the ledger does not exist';
    throw new DataError(
      this.path,
      undefined,
      `privacy ledger: goes backwards: the release file ${file} holds ${size} bytes of releases, ${why}. The ledger was deleted, or replaced by an older copy, after those releases were made; this party will not release again on a ledger that forgot them (restore the ledger)`,
    );
  }
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

/**
 * Keep a release in the release file at `offset` (after the ledger has booked it there): the
 * releases before it are kept as they are, the file is written atomically.
 */
export function writeReleasedVector(ledger: string, offset: number, r: Released): void {
  const path = releaseVectorPath(ledger);
  const before = existsSync(path) ? readFileSync(path).subarray(0, offset) : Buffer.alloc(0);
  const file = releaseFile(r);
  const out = new Uint8Array(offset + file.byteLength);
  // A shorter file lost earlier releases: their jobs find them missing; this one's offset holds.
  out.set(before);
  out.set(new Uint8Array(file.buffer), offset);
  writeFileAtomic(path, out, 0o600);
}

/**
 * The vector a ledger entry says was released, checked against its length and digest; a
 * missing or altered file leaves the release lost (undefined), which scoreRelease refuses.
 */
export function readReleasedVector(path: string, expected: { offset: number; rows: number; sha256: string }): Released | undefined {
  if (!existsSync(path)) return undefined;
  const bytes = readFileSync(path);
  const n = expected.rows;
  if (bytes.length < expected.offset + releaseBytes(n)) return undefined;
  const v = new Float64Array(2 * n);
  new Uint8Array(v.buffer).set(bytes.subarray(expected.offset, expected.offset + releaseBytes(n)));
  if (vectorDigest(v) !== expected.sha256) return undefined;
  return { rows: Uint32Array.from(v.subarray(0, n)), values: v.slice(n) };
}
