// A PSI cache's table (keys -> points) and its file. The file (psi-cache.ts describes the
// cache's folder): a 16-byte header (magic `ADMMPSIT`, format u16, key bytes u16, count u32,
// little-endian), the count keys, the count points (32 bytes each, in the keys' order), and a
// 32-byte HMAC-SHA256 trailer over the cache id, the table name and every byte before it.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { DataError } from '../errors.js';
import { ByteTable } from './byte-table.js';
import { POINT_BYTES } from './psi.js';

/** Bytes of an id's keyed digest (BLAKE2b-128): collisions need about 2^64 ids. */
export const PSI_DIGEST_BYTES = 16;
const TABLE_MAGIC = 'ADMMPSIT';
const TABLE_FORMAT = 1;
const HEADER_BYTES = 16;
const MAC_BYTES = 32;
/** Room a table read from its file keeps for entries added later (an eighth more, at least this many), so that adding them copies nothing. */
const ROOM_ENTRIES = 1 << 16;

export type CacheTableName = 'own' | 'peer';
/** Key width of each table: an id's digest, or the point the partner sent. */
export const TABLE_KEY_BYTES: Readonly<Record<CacheTableName, 16 | 32>> = { own: PSI_DIGEST_BYTES, peer: POINT_BYTES };
/** Whether a table's keys are keyed outputs (ByteTable's `keyed`): the digests are, the peer's points are not. */
export const TABLE_KEYED: Readonly<Record<CacheTableName, boolean>> = { own: true, peer: false };

/**
 * The most entries a table keeps: 2^23, below what ByteTable's hash spreads (2^24 keys), about
 * 400 MB of a party's table on disk and 540 MB in memory. Every job adds the ids it has not seen;
 * rotation (--psi-rotate, --psi-max-age) starts anew.
 */
export const PSI_CACHE_MAX_ENTRIES = 1 << 23;

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

  /**
   * A table of key e -> point e for the first `count` keys and points of these arrays, adopted
   * rather than copied (see ByteTable.adopt); the arrays' room beyond `count` entries is used
   * by later adds before anything is copied. A repeated key is refused.
   */
  static adopt(keyBytes: 16 | 32, keys: Uint8Array, points: Uint8Array, keyed = false, count = keys.length / keyBytes): PointCache {
    const table = new PointCache(keyBytes, 0, keyed);
    table.#index = ByteTable.adopt(keyBytes, keys, keyed, count);
    if (points.length < count * POINT_BYTES || points.length % POINT_BYTES !== 0) throw new RangeError(`PointCache.adopt: ${points.length} bytes of points for ${count} keys`);
    table.#points = points;
    table.#capacity = points.length / POINT_BYTES;
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

/** The MAC of a table's file: its bytes (`parts`, one after the other) bound to the cache id and the table's name. */
function tableMac(macKey: Uint8Array, id: string, name: CacheTableName, ...parts: Uint8Array[]): Buffer {
  const h = createHmac('sha256', macKey).update(`admm-share psi cache table\0${id}\0${name}\0`);
  for (const p of parts) h.update(p);
  return h.digest();
}

/**
 * A table's file, verified, read straight into the arrays the table keeps (with room to grow:
 * ROOM_ENTRIES); any failure to read it, and any file this program did not write, is a
 * DataError naming it.
 */
export function readTable(path: string, name: CacheTableName, id: string, macKey: Uint8Array): PointCache {
  const what = `PSI cache table '${name}'`;
  const refuse = (detail: string) => new DataError(path, undefined, `${what}: ${detail}`);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw refuse(e.code === 'ENOENT' ? 'missing' : `cannot read it (${e.code ?? e.message})`);
  }
  try {
    const size = fstatSync(fd).size;
    const readAt = (into: Uint8Array, at: number) => {
      for (let done = 0; done < into.length; ) {
        const n = readSync(fd, into, done, into.length - done, at + done);
        if (n === 0) throw refuse(`truncated while it was read`);
        done += n;
      }
    };
    if (size < HEADER_BYTES + MAC_BYTES) throw refuse(`truncated: ${size} bytes, less than a header and its MAC (${HEADER_BYTES + MAC_BYTES})`);
    const header = Buffer.alloc(HEADER_BYTES);
    readAt(header, 0);
    if (header.toString('latin1', 0, 8) !== TABLE_MAGIC) throw refuse(`not a PSI cache table (it does not start with ${TABLE_MAGIC})`);
    const format = header.readUInt16LE(8);
    if (format !== TABLE_FORMAT) throw refuse(`unknown format ${format} (this program reads format ${TABLE_FORMAT}; written by another version?)`);
    const kb = TABLE_KEY_BYTES[name];
    if (header.readUInt16LE(10) !== kb) throw refuse(`keys of ${header.readUInt16LE(10)} bytes, the '${name}' table's are ${kb}`);
    const count = header.readUInt32LE(12);
    const expected = HEADER_BYTES + count * (kb + POINT_BYTES) + MAC_BYTES;
    if (size !== expected) throw refuse(`wrong size: ${size} bytes, its header's ${count} entries make ${expected} (${size < expected ? 'truncated' : 'bytes appended'})`);
    const room = count + Math.max(ROOM_ENTRIES, Math.ceil(count / 8));
    const keys = new Uint8Array(room * kb);
    const points = new Uint8Array(room * POINT_BYTES);
    const mac = Buffer.alloc(MAC_BYTES);
    readAt(keys.subarray(0, count * kb), HEADER_BYTES);
    readAt(points.subarray(0, count * POINT_BYTES), HEADER_BYTES + count * kb);
    readAt(mac, expected - MAC_BYTES);
    if (!timingSafeEqual(tableMac(macKey, id, name, header, keys.subarray(0, count * kb), points.subarray(0, count * POINT_BYTES)), mac))
      throw refuse(`bad MAC: edited, or from another cache or another table (the MAC binds its content and order to cache ${id} and table '${name}')`);
    try {
      return PointCache.adopt(kb, keys, points, TABLE_KEYED[name], count);
    } catch (err) {
      throw refuse(`${(err as Error).message} (a file this program did not write)`);
    }
  } catch (err) {
    if (err instanceof DataError) throw err;
    const e = err as NodeJS.ErrnoException;
    throw refuse(`cannot read it (${e.code ?? e.message})`);
  } finally {
    closeSync(fd);
  }
}

/** The file of a table, in chunks (header, keys, points, MAC): its arrays are written as they are, not copied into one. */
export function tableChunks(table: PointCache, name: CacheTableName, id: string, macKey: Uint8Array): Uint8Array[] {
  const { keys, points } = table.entries();
  const header = Buffer.alloc(HEADER_BYTES);
  header.write(TABLE_MAGIC, 0, 'latin1');
  header.writeUInt16LE(TABLE_FORMAT, 8);
  header.writeUInt16LE(table.keyBytes, 10);
  header.writeUInt32LE(table.size, 12);
  return [header, keys, points, tableMac(macKey, id, name, header, keys, points)];
}
