// Sample ids as the readers collect them: where an id comes from (the id modes), non-empty, and
// never repeated (refuseDuplicates).
import { DataError } from '../errors.js';
import type { PackedIds } from './packed-ids.js';

/**
 * Where a row's sample id comes from.
 * - `row`: the 1-based number of the data row (blank and `#` lines are not counted);
 *   the first token of a LIBSVM line is then a label (ignored by parties).
 * - `first`: the first token of each LIBSVM line is the sample id (no label).
 * - `qid`: a `qid:ID` token after the first token is the sample id.
 * - `auto`: `qid` if the first data line has a `qid:` token, otherwise `row`.
 */
export const ID_MODES = ['auto', 'row', 'first', 'qid'] as const;
export type IdMode = (typeof ID_MODES)[number];
/** The id modes of a labels file: in LIBSVM labels the first token is the label, not an id. */
export const LABEL_ID_MODES = ['auto', 'row', 'qid'] as const satisfies readonly IdMode[];

/** Where a reader puts each row's sample id, with its line. */
export interface IdSink {
  /** The next row's id (a DataError if it is empty). */
  add(id: string, line: number): void;
  /** The ids are distinct by construction (row numbers): done() need not look for a repeat. */
  distinct(): void;
}

/**
 * Sample ids in file order, each non-empty, with the line of each; `done` refuses a repeated one
 * (refuseDuplicates).
 */
export class IdList implements IdSink {
  readonly ids: string[] = [];
  readonly lines: number[] = [];
  private checked = false;
  constructor(private readonly path: string) {}

  add(id: string, line: number): void {
    if (id === '') throw new DataError(this.path, line, 'empty sample id');
    this.ids.push(id);
    this.lines.push(line);
  }

  distinct(): void {
    this.checked = true;
  }

  done(): this {
    if (!this.checked) refuseDuplicates(this.path, this.ids, this.lines);
    return this;
  }
}

/**
 * IdList with the ids packed as they come (UTF-8 bytes and offsets, as packIds makes them) and
 * the lines in an array of 32-bit integers: about 11 MB for a million short ids, against about
 * 35 MB as strings in arrays. `done` refuses a repeated id and gives the packed ids (views of
 * the arrays they were written into).
 */
export class PackedIdList implements IdSink {
  private bytes = Buffer.allocUnsafeSlow(1 << 16);
  private used = 0;
  private offsets = new Uint32Array(1 << 12);
  private lines = new Int32Array(1 << 12);
  private n = 0;
  private checked = false;
  constructor(private readonly path: string) {}

  add(id: string, line: number): void {
    if (id === '') throw new DataError(this.path, line, 'empty sample id');
    if (this.n + 1 === this.offsets.length) {
      this.offsets = grown(this.offsets, 2 * this.offsets.length);
      this.lines = grown(this.lines, 2 * this.lines.length);
    }
    // A UTF-16 code unit is at most 3 bytes of UTF-8.
    const most = 3 * id.length;
    if (this.used + most > this.bytes.length) {
      const bytes = Buffer.allocUnsafeSlow(Math.max(2 * this.bytes.length, this.used + most));
      this.bytes.copy(bytes, 0, 0, this.used);
      this.bytes = bytes;
    }
    this.used += this.bytes.write(id, this.used, 'utf8');
    this.lines[this.n] = line;
    this.offsets[++this.n] = this.used;
  }

  distinct(): void {
    this.checked = true;
  }

  done(): PackedIds {
    const { n, bytes, offsets, lines } = this;
    if (!this.checked) {
      const end = (i: number) => offsets[i + 1];
      const repeat = firstRepeat(
        n,
        (i) => {
          let h = 0x811c9dc5;
          for (let k = offsets[i]; k < end(i); k++) h = Math.imul(h ^ bytes[k], 16777619);
          return h >>> 0;
        },
        (i, j) => bytes.compare(bytes, offsets[i], end(i), offsets[j], end(j)) === 0,
      );
      if (repeat) throw duplicateId(this.path, bytes.toString('utf8', offsets[repeat.again], end(repeat.again)), lines[repeat.again], lines[repeat.first]);
    }
    // Views of the arrays they were written into, not copies: a copy of a million ids' 11 MB
    // came on top of the hashes just sorted, at the reading's peak. The arrays' room beyond
    // (under half) was never written, so it takes address space but no memory.
    return { length: n, bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, this.used), offsets: offsets.subarray(0, n + 1) };
  }
}

/** `a`'s values at the start of a new array of `length`. */
export function grown<T extends Uint32Array | Int32Array>(a: T, length: number): T {
  const b = new (a.constructor as new (n: number) => T)(length);
  b.set(a);
  return b;
}

export function duplicateId(path: string, id: string, line: number, firstLine: number): DataError {
  return new DataError(path, line, `duplicate sample id '${id}' (first seen on line ${firstLine})`);
}

/**
 * Throws a DataError for the first id (in file order) that repeats an earlier one, naming both
 * lines. Checked once the ids are read, rather than with a map of every id to its line while
 * reading (28 MB more at the peak for a million short ids): each id's 32-bit hash and its
 * position, packed into one number (the hash above the position's bits), are sorted, and only
 * ids of equal hash are compared.
 */
export function refuseDuplicates(path: string, ids: readonly string[], lines: readonly number[]): void {
  /** Ids with a UTF-16 surrogate, to be checked for a lone one (rare: found while hashing). */
  const surrogates: number[] = [];
  const repeat = firstRepeat(
    ids.length,
    (i) => {
      const id = ids[i];
      let h = 0x811c9dc5;
      let surrogate = false;
      for (let k = 0; k < id.length; k++) {
        const c = id.charCodeAt(k);
        if ((c & 0xf800) === 0xd800) surrogate = true;
        h = Math.imul(h ^ c, 16777619);
      }
      if (surrogate) surrogates.push(i);
      return h >>> 0;
    },
    (i, j) => ids[i] === ids[j],
  );
  for (const i of surrogates) if (LONE_SURROGATE.test(ids[i])) throw new DataError(path, lines[i], loneSurrogate(ids[i]));
  if (repeat) throw duplicateId(path, ids[repeat.again], lines[repeat.again], lines[repeat.first]);
}

/**
 * A UTF-16 surrogate not in a pair (with the u flag a pair is one code point, never matched).
 * An id is hashed and sent as UTF-8, where a lone surrogate becomes U+FFFD: "a\uD800" and
 * "a\uFFFD" would be two ids here and one there, the same row twice.
 */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function loneSurrogate(id: string): string {
  const at = id.search(LONE_SURROGATE);
  const unit = id.charCodeAt(at).toString(16).toUpperCase();
  return `sample id has a lone UTF-16 surrogate (\\u${unit} at character ${at + 1}): not Unicode text, and as the UTF-8 it is sent in it would be U+FFFD, the bytes of another id`;
}

/**
 * What is wrong with a request's ids (online scoring), or undefined: a lone surrogate, or an id
 * sent twice. Both are compared as the UTF-8 bytes they are sent as: for ids without a lone
 * surrogate, equal strings are equal bytes. Positions are 0-based, as in the JSON array.
 */
export function requestIdsProblem(ids: readonly string[]): string | undefined {
  for (let i = 0; i < ids.length; i++) if (LONE_SURROGATE.test(ids[i])) return `ids[${i}]: ${loneSurrogate(ids[i]).replace(/^sample id has/, 'has')}`;
  const seen = new Map<string, number>();
  for (let i = 0; i < ids.length; i++) {
    const first = seen.get(ids[i]);
    if (first !== undefined) return `ids[${i}] repeats ids[${first}]: each id once`;
    seen.set(ids[i], i);
  }
  return undefined;
}

/**
 * The first of n ids (in their order) equal to an earlier one, and that earlier one, or
 * undefined: `hash(i)` is id i's 32-bit hash, `same(i, j)` whether ids i and j are equal.
 */
export function firstRepeat(n: number, hash: (i: number) => number, same: (i: number, j: number) => boolean): { first: number; again: number } | undefined {
  // Hash bits and position bits within a double's 53: exact up to 2^21 ids with all 32 hash
  // bits, fewer hash bits (more ids to compare) beyond.
  const posBits = Math.max(1, Math.ceil(Math.log2(n + 1)));
  const hashBits = Math.min(32, 53 - posBits);
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) keys[i] = (hash(i) >>> (32 - hashBits)) * 2 ** posBits + i;
  keys.sort();
  const posOf = (k: number) => k % 2 ** posBits;
  const hashOf = (k: number) => Math.floor(k / 2 ** posBits);
  let again = -1;
  let first = -1;
  for (let a = 0; a < n; ) {
    let b = a + 1;
    while (b < n && hashOf(keys[b]) === hashOf(keys[a])) b++;
    // A run of equal hashes, by position: an id equal to an earlier one in the run repeats it.
    for (let j = a + 1; j < b; j++)
      for (let i = a; i < j; i++)
        if (same(posOf(keys[i]), posOf(keys[j]))) {
          if (again < 0 || posOf(keys[j]) < again) [first, again] = [posOf(keys[i]), posOf(keys[j])];
          break;
        }
    a = b;
  }
  return again >= 0 ? { first, again } : undefined;
}
