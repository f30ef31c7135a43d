/**
 * The PSI cache (`--psi-cache DIR`): what one side keeps, per partner, so that a later
 * intersection with that partner blinds only the ids it has not blinded before.
 *
 * A cache is one folder. Its files:
 * - `meta.json` (mode 0600): {format, id, generation, created, partner?, tables, mac}. It is
 *   written last, atomically, and names the generation, so it is the commit point: a cache is
 *   replaced by writing a new generation's files beside the old ones and then meta.json, after
 *   which the old generation's files are removed. A reader sees the old cache whole or the new
 *   one whole, never a mix. `mac` is an HMAC over the other fields, so an edited creation time
 *   (to dodge --psi-max-age) or id is refused.
 * - `<generation>.key` (mode 0600, refused otherwise, as core's key files are): the 32-byte
 *   X25519 secret, from the OS CSPRNG. Two keys are derived from it with HMAC-SHA256 and
 *   distinct labels: the MAC key of the files and the BLAKE2b key of the id digests.
 * - `<generation>.<table>.bin` (mode 0600), tables `own` (16-byte id digest -> point) and
 *   `peer` (32-byte point -> point): a 16-byte header (magic `ADMMPSIT`, format u16, key bytes
 *   u16, count u32, little-endian), then the count keys, then the count points (32 bytes each,
 *   in the keys' order), then a 32-byte HMAC-SHA256 trailer over the cache id, the table name
 *   and every byte before it. A table copied from another cache (another key) or renamed from
 *   another table fails the MAC, and so does any change of order or content: a swapped pair
 *   of entries would align the wrong rows.
 *
 * A MAC under a key kept beside the files detects corruption and files from elsewhere; it does
 * not stop someone who can read the key, who could as well read the cache (docs/privacy.md).
 * One process uses a cache folder at a time.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import sodium from 'sodium-native';
import { DataError } from '../errors.js';
import { writeFileAtomic, writeFileAtomicAsync } from '../io/atomic-write.js';
import { readJsonFile, z } from '../io/json-file.js';
import { type PackedIds, packIds } from '../io/packed-ids.js';
import { type CacheTableName, PointCache, PSI_DIGEST_BYTES, TABLE_KEY_BYTES, TABLE_KEYED, readTable, tableChunks } from './point-cache.js';
import { POINT_BYTES } from './psi.js';
import type { PsiTeam } from './psi-team.js';

/** A cache id as both sides name it: 16 random bytes in hex. */
export const PSI_CACHE_ID = /^[0-9a-f]{32}$/;
export const PSI_CACHE_META = 'meta.json';
const META_FORMAT = 'admm-share psi cache 1';
const GENERATION = /^[0-9a-f]{16}$/;
const SECRET_BYTES = 32;
const DAY_MS = 86_400_000;

/** Where a side keeps its caches, and when it starts anew (--psi-cache, --psi-rotate applied once per process, --psi-max-age). */
export interface PsiCacheSettings {
  dir: string;
  rotate: boolean;
  maxAgeDays: number;
}

/** Where a side says what it decided about its caches (its logger). */
export interface PsiCacheLog {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
}

/** Keyed BLAKE2b-128 of each id's UTF-8 bytes, PSI_DIGEST_BYTES each, in order (PsiCache.digests). */
export function digestIds(ids: readonly string[] | PackedIds, key: Uint8Array): Uint8Array {
  const p = 'offsets' in ids ? ids : packIds(ids);
  const out = new Uint8Array(p.length * PSI_DIGEST_BYTES);
  const one = new Uint8Array(PSI_DIGEST_BYTES);
  const { bytes, offsets } = p;
  for (let i = 0; i < p.length; i++) {
    sodium.crypto_generichash(one, bytes.subarray(offsets[i], offsets[i + 1]), key);
    const to = i * PSI_DIGEST_BYTES;
    for (let j = 0; j < PSI_DIGEST_BYTES; j++) out[to + j] = one[j];
  }
  return out;
}

export interface OpenedCache {
  cache?: PsiCache;
  /** Why there is no usable cache (absent, rotated, too old, corrupt: which file and what) */
  why?: string;
  /** There was none yet (not a fault: said, not warned). */
  first?: boolean;
}

const metaSchema = z.strictObject({
  format: z.literal(META_FORMAT, { error: (issue) => `unknown format ${JSON.stringify(issue.input)?.slice(0, 60)} (this program reads '${META_FORMAT}'; written by another version?)` }),
  id: z.string().regex(PSI_CACHE_ID),
  generation: z.string().regex(GENERATION),
  created: z.iso.datetime(),
  partner: z.string().optional(),
  tables: z.array(z.enum(['own', 'peer'])),
  mac: z.string().regex(/^[0-9a-f]{64}$/),
});
type Meta = z.output<typeof metaSchema>;

/** The keys derived from a cache's secret: one use each, so a digest never doubles as a MAC. */
function derive(key: Uint8Array): { mac: Buffer; digest: Buffer } {
  const sub = (label: string) => createHmac('sha256', key).update(label).digest();
  return { mac: sub('admm-share psi cache v1: file MAC key'), digest: sub('admm-share psi cache v1: id digest key') };
}

function metaMac(macKey: Uint8Array, m: Omit<Meta, 'mac'>): string {
  const fields = JSON.stringify([m.format, m.id, m.generation, m.created, m.partner ?? null, m.tables]);
  return createHmac('sha256', macKey).update('admm-share psi cache meta\0').update(fields).digest('hex');
}

/** The bytes of a file of the cache; any failure to read it is a refusal naming it. */
function readCacheFile(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new DataError(path, undefined, `${what}: ${e.code === 'ENOENT' ? 'missing' : `cannot read it (${e.code ?? e.message})`}`);
  }
}

/** The cache's secret, refused unless it is SECRET_BYTES long and readable by its owner only (as core's readKey). */
function readSecret(path: string): Uint8Array {
  const what = 'PSI cache key';
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new DataError(path, undefined, `${what}: ${e.code === 'ENOENT' ? 'missing (meta.json names it)' : `cannot read it (${e.code ?? e.message})`}`);
  }
  if ((mode & 0o077) !== 0)
    throw new DataError(path, undefined, `${what}: wrong mode ${(mode & 0o777).toString(8).padStart(4, '0')}, group or others may read it; the cache is not used (start a new one with --psi-rotate; chmod 600 only if no one else read it)`);
  const key = readCacheFile(path, what);
  if (key.length !== SECRET_BYTES) throw new DataError(path, undefined, `${what}: wrong size, ${key.length} bytes, expected ${SECRET_BYTES} (truncated or replaced)`);
  return new Uint8Array(key);
}

export class PsiCache {
  readonly dir: string;
  readonly id: string;
  /** The X25519 secret (32 bytes). */
  readonly key: Uint8Array;
  readonly created: Date;
  /** Free text the caller records (e.g. the party id), stored in meta. */
  readonly partner: string | undefined;
  /** The tables this cache holds (as meta.json lists them). */
  readonly tables: readonly CacheTableName[];
  readonly #generation: string;
  readonly #macKey: Uint8Array;
  readonly #digestKey: Uint8Array;
  readonly #loaded = new Map<CacheTableName, PointCache>();

  private constructor(dir: string, meta: Omit<Meta, 'mac' | 'format'>, key: Uint8Array) {
    this.dir = dir;
    this.id = meta.id;
    this.#generation = meta.generation;
    this.created = new Date(meta.created);
    this.partner = meta.partner;
    this.tables = meta.tables;
    this.key = key;
    const derived = derive(key);
    this.#macKey = derived.mac;
    this.#digestKey = derived.digest;
  }

  /**
   * Opens the cache in `dir`: checks the key file's mode, the meta file, every table file's
   * integrity, loads the tables. A problem is returned as `why` (never thrown), except an I/O
   * error of the folder itself. rotate: discard whatever is there (create then replaces it);
   * maxAgeDays: a cache created longer ago is discarded; partner: a cache recorded for another
   * partner is discarded.
   */
  static open(dir: string, opts: { tables: readonly CacheTableName[]; maxAgeDays: number; rotate?: boolean; now?: Date; partner?: string }): OpenedCache {
    if (opts.rotate) return { why: 'rotated (--psi-rotate)' };
    try {
      if (!statSync(dir).isDirectory()) throw new DataError(dir, undefined, 'not a folder (--psi-cache names a folder)');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { why: `${dir}: no cache yet (first use)`, first: true };
      throw err;
    }
    const metaPath = join(dir, PSI_CACHE_META);
    try {
      statSync(metaPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { why: `${metaPath}: absent, no cache yet (first use)`, first: true };
    }
    try {
      const meta = readJsonFile(metaSchema, metaPath, 'PSI cache meta');
      const key = readSecret(join(dir, `${meta.generation}.key`));
      const cache = new PsiCache(dir, meta, key);
      const { mac, ...fields } = meta;
      if (!timingSafeEqual(Buffer.from(metaMac(cache.#macKey, fields), 'hex'), Buffer.from(mac, 'hex')))
        throw new DataError(metaPath, undefined, `PSI cache meta: bad MAC: edited, or its key file ${meta.generation}.key is from another cache`);
      const lacking = opts.tables.filter((t) => !meta.tables.includes(t));
      if (lacking.length > 0) throw new DataError(metaPath, undefined, `PSI cache meta: holds tables [${meta.tables.join(', ')}], not ${lacking.join(', ')} (a cache of the other side?)`);
      if (opts.partner !== undefined && meta.partner !== opts.partner)
        throw new DataError(metaPath, undefined, `PSI cache meta: made for partner ${JSON.stringify(meta.partner)}, not ${JSON.stringify(opts.partner)}`);
      const ageDays = ((opts.now ?? new Date()).getTime() - cache.created.getTime()) / DAY_MS;
      if (ageDays > opts.maxAgeDays) return { why: `cache ${meta.id} in ${dir} is ${ageDays.toFixed(1)} days old, over --psi-max-age ${opts.maxAgeDays}` };
      if (ageDays < -1) return { why: `cache ${meta.id} in ${dir} was created ${(-ageDays).toFixed(1)} days in the future (${meta.created}): is the clock right?` };
      for (const name of opts.tables) cache.table(name);
      return { cache };
    } catch (err) {
      if (err instanceof DataError) return { why: err.message };
      throw err;
    }
  }

  /**
   * A new cache in `dir` with this id (or a new random one): new key from the OS CSPRNG, empty
   * tables; replaces what was there (atomically: the old files are gone or intact, never
   * mixed). Written at once (key mode 0600, meta, empty tables).
   */
  static create(dir: string, opts: { tables: readonly CacheTableName[]; id?: string; partner?: string; now?: Date }): PsiCache {
    const id = opts.id ?? randomBytes(16).toString('hex');
    if (!PSI_CACHE_ID.test(id)) throw new RangeError(`PSI cache id ${JSON.stringify(id.slice(0, 40))} is not 32 hex digits`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const fields: Omit<Meta, 'mac'> = {
      format: META_FORMAT,
      id,
      generation: randomBytes(8).toString('hex'),
      created: (opts.now ?? new Date()).toISOString(),
      ...(opts.partner === undefined ? {} : { partner: opts.partner }),
      tables: [...new Set(opts.tables)],
    };
    const key = new Uint8Array(randomBytes(SECRET_BYTES));
    writeFileAtomic(join(dir, `${fields.generation}.key`), key, 0o600);
    const cache = new PsiCache(dir, fields, key);
    for (const name of cache.tables) {
      const table = new PointCache(TABLE_KEY_BYTES[name], 0, TABLE_KEYED[name]);
      table.changed = true;
      cache.#loaded.set(name, table);
    }
    cache.save();
    writeFileAtomic(join(dir, PSI_CACHE_META), `${JSON.stringify({ ...fields, mac: metaMac(cache.#macKey, fields) }, null, 2)}\n`, 0o600);
    // The new generation is committed; the old one's files go (a crash here leaves them, and the next create removes them).
    for (const f of readdirSync(dir)) {
      const m = /^([0-9a-f]{16})\.(key|own\.bin|peer\.bin)$/.exec(f);
      if (m && m[1] !== fields.generation) unlinkSync(join(dir, f));
    }
    return cache;
  }

  /** The table `name`, loaded (and verified) again if it was released; a corrupt file throws its DataError. */
  table(name: CacheTableName): PointCache {
    this.#releaseWhenWritten = false;
    let t = this.#loaded.get(name);
    if (t === undefined) {
      if (!this.tables.includes(name)) throw new RangeError(`PSI cache ${this.id} holds no '${name}' table (it holds ${this.tables.join(', ')})`);
      t = readTable(this.#tablePath(name), name, this.id, this.#macKey);
      this.#loaded.set(name, t);
    }
    return t;
  }

  /**
   * Keyed digests (BLAKE2b-128 under a key derived from the cache key), 16 bytes per id, in
   * order: the `own` table's keys. Keyed, so that the file does not let anyone without the key
   * test whether it holds a given id.
   */
  digests(ids: readonly string[] | PackedIds): Uint8Array {
    return digestIds(ids, this.#digestKey);
  }

  /** The same digests, computed on the team's threads (for many ids). */
  digestsOn(team: PsiTeam, ids: readonly string[] | PackedIds): Promise<Uint8Array> {
    return team.digest(ids, this.#digestKey);
  }

  /** Writes the tables that changed since open/create/save, each atomically (mode 0600) with its MAC. Returns bytes written. */
  save(): number {
    if (this.#writing > 0) throw new Error(`internal: PsiCache ${this.id}: save while a write in the background is under way`);
    let written = 0;
    for (const { path, chunks } of this.#changedFiles()) {
      writeFileAtomic(path, chunks, 0o600);
      written += chunks.reduce((sum, c) => sum + c.length, 0);
    }
    return written;
  }

  /**
   * save() with the files written by Node's file system threads: the MACs are computed now,
   * and the tables may change meanwhile (their arrays are only appended to past what is being
   * written). Such saves of one cache go one after the other. Resolves with bytes written.
   */
  saveInBackground(): Promise<number> {
    const files = this.#changedFiles();
    this.#writing++;
    const run = this.#lastWrite.then(async () => {
      let written = 0;
      for (const { path, chunks } of files) {
        await writeFileAtomicAsync(path, chunks, 0o600);
        written += chunks.reduce((sum, c) => sum + c.length, 0);
      }
      return written;
    });
    this.#lastWrite = run.then(
      () => void this.#writing--,
      () => void this.#writing--,
    );
    return run;
  }

  /** Background writes under way (saveInBackground), and the end of the last one. */
  #writing = 0;
  #lastWrite: Promise<void> = Promise.resolve();

  /** The files of the tables that changed, each as the chunks to write; they count as written from now on. */
  #changedFiles(): { path: string; chunks: Uint8Array[] }[] {
    const files: { path: string; chunks: Uint8Array[] }[] = [];
    for (const [name, table] of this.#loaded) {
      if (!table.changed) continue;
      files.push({ path: this.#tablePath(name), chunks: tableChunks(table, name, this.id, this.#macKey) });
      table.changed = false;
    }
    return files;
  }

  /** Bytes of the cache's files on disk (meta, key, tables). */
  bytesOnDisk(): number {
    const files = [PSI_CACHE_META, `${this.#generation}.key`, ...this.tables.map((t) => `${this.#generation}.${t}.bin`)];
    return files.reduce((sum, f) => sum + statSync(join(this.dir, f)).size, 0);
  }

  /**
   * Releases the tables' memory, writing first any that changed, in the background
   * (saveInBackground); table() after this reloads them (verified again). The tables stay
   * loaded until they are written (a table() meanwhile keeps them: read again from a file not
   * yet written, the next save would lose what this one writes), then their memory goes.
   */
  release(): Promise<number> {
    const written = this.saveInBackground();
    this.#releaseWhenWritten = true;
    void written.then(
      () => this.#releaseIfStillWanted(),
      () => this.#releaseIfStillWanted(),
    );
    return written;
  }

  /** Set by release, cleared by table(): whether the tables go once the writes under way end. */
  #releaseWhenWritten = false;

  #releaseIfStillWanted(): void {
    if (this.#releaseWhenWritten && this.#writing === 0) {
      this.#loaded.clear();
      this.#releaseWhenWritten = false;
    }
  }

  #tablePath(name: CacheTableName): string {
    return join(this.dir, `${this.#generation}.${name}.bin`);
  }
}
