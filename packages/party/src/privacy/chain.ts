// The hash chain both ledgers keep (training's and scoring's): entries are only ever
// appended; each carries `prev`, the MAC of the entry before it, and `mac`, the HMAC-SHA256
// with the party's key of its canonical JSON (prev included). An entry edited, removed from
// the middle or reordered, and a MAC recomputed without the key, all fail verifyChain.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { DataError, z } from '@admm-share/core';
import { DIGEST_RE } from '@admm-share/protocol';
import { existingPartyKey, partyKey, partyKeyPath } from './party-key.js';

/** The `prev` of the first entry. */
export const CHAIN_START = '0'.repeat(64);

/** The fields every chained entry has, for the ledgers' schemas. */
export const chainFields = {
  seq: z.int().min(0),
  prev: z.string().regex(DIGEST_RE, 'expected 64 hex characters'),
  mac: z.string().regex(DIGEST_RE, 'expected 64 hex characters'),
};

export interface Chained {
  seq: number;
  prev: string;
  mac: string;
}

/** JSON with every object's keys sorted: the bytes a MAC covers, whatever order a reader kept. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object')
    return `{${Object.keys(value)
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(value);
}

function macOf(key: Buffer, body: object): string {
  return createHmac('sha256', key).update(canonical(body)).digest('hex');
}

/** `body` as the next entry after `entries`: its seq, prev and MAC. */
export function seal<T extends object>(key: Buffer, entries: readonly Chained[], body: T): T & Chained {
  const last = entries.at(-1);
  const unsealed = { ...body, seq: entries.length, prev: last ? last.mac : CHAIN_START };
  return { ...unsealed, mac: macOf(key, unsealed) };
}

/**
 * The key a ledger at `path` is checked and sealed with: the party's key beside it, created
 * with the first ledger. A ledger that exists without its key is refused: it cannot be
 * checked, and a new key would accept anything written with it.
 */
export function ledgerKey(path: string, ledgerExists: boolean, what: string): Buffer {
  const dir = dirname(path);
  if (!ledgerExists) return partyKey(dir);
  const key = existingPartyKey(dir);
  if (!key)
    throw new DataError(path, undefined, `${what}: its entries are sealed with the party's key ${partyKeyPath(dir)}, which is missing; restore that file (a ledger that cannot be checked is not trusted)`);
  return key;
}

/**
 * A ledger of an old, unsigned format is converted only where no signed ledger can have been
 * written yet (no party key in its folder): written over a signed one, it would set any state
 * without the key (a second draw, a budget reset).
 */
export function refuseUnsignedOverSigned(path: string, what: string, format: string): void {
  const dir = dirname(path);
  if (existsSync(partyKeyPath(dir)))
    throw new DataError(path, undefined, `${what}: format ${format} (unsigned) in a folder whose files are signed with ${partyKeyPath(dir)}: an old ledger is converted only before the first signed one; restore the signed ledger`);
}

/**
 * A ledger's entries in memory, as both ledgers keep them: the latest state of a job, and a
 * job's new state sealed at the end of the chain (the key made with the first entry of a new
 * ledger). A job's count of releases never goes back.
 */
export class Chain<S extends { jobId: string; releases: number }> {
  constructor(
    private readonly path: string,
    private readonly what: string,
    private key: Buffer | undefined,
    readonly entries: (S & Chained)[] = [],
  ) {}

  /** The latest state of job `jobId`, if the ledger has any. */
  latest(jobId: string): Omit<S & Chained, keyof Chained> | undefined {
    for (let i = this.entries.length - 1; i >= 0; i--)
      if (this.entries[i].jobId === jobId) {
        const { seq: _s, prev: _p, mac: _m, ...state } = this.entries[i];
        return state;
      }
    return undefined;
  }

  /** `state` sealed as the next entry (the caller writes the file). */
  push(state: S): void {
    const was = this.latest(state.jobId);
    if (was && state.releases < was.releases) throw new Error(`internal: job ${state.jobId}'s ${this.what} would go from ${was.releases} releases back to ${state.releases}`);
    this.key ??= ledgerKey(this.path, false, this.what);
    this.entries.push(seal(this.key, this.entries, state));
  }
}

/** Check the chain of a ledger read from `path`: order, links and MACs. */
export function verifyChain(path: string, what: string, key: Buffer, entries: readonly (Chained & object)[]): void {
  let prev = CHAIN_START;
  entries.forEach((e, i) => {
    const at = `${what}: entries[${i}]`;
    if (e.seq !== i) throw new DataError(path, undefined, `${at}: seq ${e.seq}, expected ${i} (an entry was removed or moved)`);
    if (e.prev !== prev) throw new DataError(path, undefined, `${at}: prev does not match the MAC of the entry before it (an entry was removed, moved or edited)`);
    const { mac, ...body } = e;
    const want = Buffer.from(macOf(key, body), 'hex');
    if (!timingSafeEqual(want, Buffer.from(mac, 'hex')))
      throw new DataError(path, undefined, `${at}: its MAC does not match (job ${(e as { jobId?: string }).jobId ?? '?'}): the entry was edited without the party's key ${partyKeyPath(dirname(path))}, or the key was replaced`);
    prev = mac;
  });
}
