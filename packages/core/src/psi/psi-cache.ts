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
import { writeFileAtomic } from '../io/atomic-write.js';
import { readJsonFile, z } from '../io/json-file.js';
import { type PackedIds, packIds } from '../io/packed-ids.js';
import { ByteTable } from './byte-table.js';
import { POINT_BYTES } from './psi.js';
import type { PsiTeam } from './psi-team.js';

/** A cache id as both sides name it: 16 random bytes in hex. */
export const PSI_CACHE_ID = /^[0-9a-f]{32}$/;
/** Bytes of an id's keyed digest (BLAKE2b-128): collisions need about 2^64 ids. */
export const PSI_DIGEST_BYTES = 16;
export const PSI_CACHE_META = 'meta.json';
const META_FORMAT = 'admm-share psi cache 1';
const GENERATION = /^[0-9a-f]{16}$/;
const TABLE_MAGIC = 'ADMMPSIT';
const TABLE_FORMAT = 1;
const HEADER_BYTES = 16;
const MAC_BYTES = 32;
const SECRET_BYTES = 32;
const DAY_MS = 86_400_000;

export type CacheTableName = 'own' | 'peer';
/** Key width of each table: an id's digest, or the point the partner sent. */
const TABLE_KEY_BYTES: Readonly<Record<CacheTableName, 16 | 32>> = { own: PSI_DIGEST_BYTES, peer: POINT_BYTES };
/** Whether a table's keys are keyed outputs (ByteTable's `keyed`): the digests are, the peer's points are not. */
const TABLE_KEYED: Readonly<Record<CacheTableName, boolean>> = { own: true, peer: false };

/**
 * The most entries a table keeps: 2^23, below what ByteTable's hash spreads (2^24 keys), about
 * 400 MB of a party's table on disk and 540 MB in memory. Every job adds the ids it has not seen;
 * rotation (--psi-rotate, --psi-max-age) starts anew.
 */
export const PSI_CACHE_MAX_ENTRIES = 1 << 23;

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

/** One table of points: keyBytes-wide keys -> 32-byte points (POINT_BYTES); `keyed` as ByteTable's. */
export class PointCache {
  readonly keyBytes: 16 | 32;
  #index: ByteTable;
  /** Point of entry e at e*32; room for #capacity entries. */
  #points: Uint8Array;
  #capacity: number;
  /** Added to since it was loaded or last written (PsiCache.save clears it). */
  changed = false;

  constructor(keyBytes: 16 | 32, expected = 0, keyed = false) {
    this.keyBytes = keyBytes;
    this.#index = new ByteTable(keyBytes, expected, keyed);
    this.#capacity = Math.max(8, Math.ceil(expected));
    this.#points = new Uint8Array(this.#capacity * POINT_BYTES);
  }

  /** A table of key e -> point e over these arrays, adopted rather than copied (see ByteTable.adopt); a repeated key is refused. */
  static adopt(keyBytes: 16 | 32, keys: Uint8Array, points: Uint8Array, keyed = false): PointCache {
    const table = new PointCache(keyBytes, 0, keyed);
    table.#index = ByteTable.adopt(keyBytes, keys, keyed);
    if (points.length !== table.size * POINT_BYTES) throw new RangeError(`PointCache.adopt: ${points.length} bytes of points for ${table.size} keys`);
    table.#points = points;
    table.#capacity = table.size;
    return table;
  }

  get size(): number {
    return this.#index.size;
  }

  /** For each of the keys.length/keyBytes keys, writes its point into out at i*32 when cached; returns the indices i of the keys that have none (ascending). */
  lookup(keys: Uint8Array, out: Uint8Array): Uint32Array {
    const n = this.#count(keys);
    if (out.length < n * POINT_BYTES) throw new RangeError(`PointCache.lookup: ${out.length} bytes of output for ${n} points`);
    const kb = this.keyBytes;
    const points = this.#points;
    const misses = new Uint32Array(n);
    let m = 0;
    for (let i = 0; i < n; i++) {
      const e = this.#index.get(keys, i * kb);
      if (e < 0) {
        misses[m++] = i;
        continue;
      }
      const from = e * POINT_BYTES;
      const to = i * POINT_BYTES;
      for (let j = 0; j < POINT_BYTES; j++) out[to + j] = points[from + j];
    }
    return misses.slice(0, m);
  }

  /**
   * Adds (or replaces) points: key i of `keys` gets points[j*32..] for the j-th index of `which`
   * (all keys in order when `which` is absent). Marks the table changed. Returns false, adding
   * nothing, when the table would hold more than PSI_CACHE_MAX_ENTRIES (a full cache is used
   * as it is until it is rotated).
   */
  add(keys: Uint8Array, points: Uint8Array, which?: Uint32Array): boolean {
    const n = this.#count(keys);
    const m = which === undefined ? n : which.length;
    if (points.length !== m * POINT_BYTES) throw new RangeError(`PointCache.add: ${points.length} bytes of points for ${m} keys`);
    const index = this.#index;
    if (index.size + m > PSI_CACHE_MAX_ENTRIES) return false;
    index.reserve(index.size + m);
    if (index.size + m > this.#capacity) this.#grow(Math.max(index.size + m, Math.ceil(this.#capacity * 1.125)));
    const kb = this.keyBytes;
    const own = this.#points;
    for (let j = 0; j < m; j++) {
      const i = which === undefined ? j : which[j];
      if (i >= n) throw new RangeError(`PointCache.add: key index ${i} of ${n} keys`);
      let e = index.get(keys, i * kb);
      if (e < 0) {
        e = index.size;
        index.set(keys, i * kb, e);
      }
      const to = e * POINT_BYTES;
      const from = j * POINT_BYTES;
      for (let b = 0; b < POINT_BYTES; b++) own[to + b] = points[from + b];
    }
    if (m > 0) this.changed = true;
    return true;
  }

  /** The keys and their points in the order first added (views, valid until the next add). */
  entries(): { keys: Uint8Array; points: Uint8Array } {
    return { keys: this.#index.keys(), points: this.#points.subarray(0, this.size * POINT_BYTES) };
  }

  #count(keys: Uint8Array): number {
    if (keys.length % this.keyBytes !== 0) throw new RangeError(`PointCache: ${keys.length} bytes of keys is not a whole number of ${this.keyBytes}-byte keys`);
    return keys.length / this.keyBytes;
  }

  #grow(capacity: number): void {
    const points = new Uint8Array(capacity * POINT_BYTES);
    points.set(this.#points.subarray(0, this.size * POINT_BYTES));
    this.#points = points;
    this.#capacity = capacity;
  }
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

/** The MAC of a table's file: its bytes (`parts`, one after the other) bound to the cache id and the table's name. */
function tableMac(macKey: Uint8Array, id: string, name: CacheTableName, ...parts: Uint8Array[]): Buffer {
  const h = createHmac('sha256', macKey).update(`admm-share psi cache table\0${id}\0${name}\0`);
  for (const p of parts) h.update(p);
  return h.digest();
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

function readTable(path: string, name: CacheTableName, id: string, macKey: Uint8Array): PointCache {
  const what = `PSI cache table '${name}'`;
  const buf = readCacheFile(path, what);
  const refuse = (detail: string) => new DataError(path, undefined, `${what}: ${detail}`);
  if (buf.length < HEADER_BYTES + MAC_BYTES) throw refuse(`truncated: ${buf.length} bytes, less than a header and its MAC (${HEADER_BYTES + MAC_BYTES})`);
  if (buf.toString('latin1', 0, 8) !== TABLE_MAGIC) throw refuse(`not a PSI cache table (it does not start with ${TABLE_MAGIC})`);
  const format = buf.readUInt16LE(8);
  if (format !== TABLE_FORMAT) throw refuse(`unknown format ${format} (this program reads format ${TABLE_FORMAT}; written by another version?)`);
  const kb = TABLE_KEY_BYTES[name];
  if (buf.readUInt16LE(10) !== kb) throw refuse(`keys of ${buf.readUInt16LE(10)} bytes, the '${name}' table's are ${kb}`);
  const count = buf.readUInt32LE(12);
  const expected = HEADER_BYTES + count * (kb + POINT_BYTES) + MAC_BYTES;
  if (buf.length !== expected)
    throw refuse(`wrong size: ${buf.length} bytes, its header's ${count} entries make ${expected} (${buf.length < expected ? 'truncated' : 'bytes appended'})`);
  const body = buf.subarray(0, expected - MAC_BYTES);
  if (!timingSafeEqual(tableMac(macKey, id, name, body), buf.subarray(expected - MAC_BYTES)))
    throw refuse(`bad MAC: edited, or from another cache or another table (the MAC binds its content and order to cache ${id} and table '${name}')`);
  const keysEnd = HEADER_BYTES + count * kb;
  try {
    return PointCache.adopt(kb, buf.subarray(HEADER_BYTES, keysEnd), buf.subarray(keysEnd, expected - MAC_BYTES), TABLE_KEYED[name]);
  } catch (err) {
    throw refuse(`${(err as Error).message} (a file this program did not write)`);
  }
}

/** The file of a table, in chunks (header, keys, points, MAC): its arrays are written as they are, not copied into one. */
function tableChunks(table: PointCache, name: CacheTableName, id: string, macKey: Uint8Array): Uint8Array[] {
  const { keys, points } = table.entries();
  const header = Buffer.alloc(HEADER_BYTES);
  header.write(TABLE_MAGIC, 0, 'latin1');
  header.writeUInt16LE(TABLE_FORMAT, 8);
  header.writeUInt16LE(table.keyBytes, 10);
  header.writeUInt32LE(table.size, 12);
  return [header, keys, points, tableMac(macKey, id, name, header, keys, points)];
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
    let written = 0;
    for (const [name, table] of this.#loaded) {
      if (!table.changed) continue;
      const chunks = tableChunks(table, name, this.id, this.#macKey);
      writeFileAtomic(this.#tablePath(name), chunks, 0o600);
      table.changed = false;
      written += chunks.reduce((sum, c) => sum + c.length, 0);
    }
    return written;
  }

  /** Bytes of the cache's files on disk (meta, key, tables). */
  bytesOnDisk(): number {
    const files = [PSI_CACHE_META, `${this.#generation}.key`, ...this.tables.map((t) => `${this.#generation}.${t}.bin`)];
    return files.reduce((sum, f) => sum + statSync(join(this.dir, f)).size, 0);
  }

  /** Releases the tables' memory, writing first any that changed (as save); table() after this reloads them (verified again). */
  release(): void {
    this.save();
    this.#loaded.clear();
  }

  #tablePath(name: CacheTableName): string {
    return join(this.dir, `${this.#generation}.${name}.bin`);
  }
}
