// Reading a text file in chunks, line by line, and keeping the strings cut from it small: what
// the LIBSVM and CSV readers share.
import { isUtf8 } from 'node:buffer';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { DataError } from '../errors.js';

/**
 * How the text of a data file is encoded (--id-encoding). UTF-8 unless told: a byte that is not
 * UTF-8 is an error, never a U+FFFD, because two ids that differ only in such bytes would become
 * one id. `latin1` (ISO-8859-1) maps every byte to a character, so it never fails.
 */
export const TEXT_ENCODINGS = ['utf8', 'latin1'] as const;
export type TextEncoding = (typeof TEXT_ENCODINGS)[number];

/** The --id-encoding flag, as every command that reads a file of ids declares it. */
export const ID_ENCODING_OPTION = {
  choices: TEXT_ENCODINGS,
  default: 'utf8' as const,
  describe: "the text encoding of the files of ids (and labels): utf8 (a byte that is not UTF-8 is an error naming its line) or latin1 (ISO-8859-1, any byte)",
};

/**
 * Bytes read from a data file at a time. Files are parsed chunk by chunk as they are read, so
 * loading never holds a whole file (as bytes or as text): memory stays close to the matrix and
 * the ids being built. Each chunk's text is a string: at 1 MiB every one was a large object,
 * which only a full collection frees, and reading a 130 MB dense file left 20-35 MB of them
 * resident; at 32 KiB they die young. Reading took 3.4 s against 6.1 s (and a 62 MB file
 * 117-119 MB of resident memory against 145-152), and 4000 reads cost a few milliseconds.
 */
export const READ_CHUNK_BYTES = 1 << 15;

const UTF8_BOM = [0xef, 0xbb, 0xbf];

export function cannotRead(path: string, err: unknown): DataError {
  const e = err as NodeJS.ErrnoException;
  return new DataError(path, undefined, `cannot read file (${e.code ?? e.message})`);
}

export function chunkSize(n: number | undefined): number {
  const size = n ?? READ_CHUNK_BYTES;
  if (!(Number.isInteger(size) && size >= 1)) throw new RangeError(`chunkBytes must be a positive integer, got ${size}`);
  return size;
}

/** Reads into `buf` until it is full or the file ends; the number of bytes read. */
function fill(fd: number, buf: Buffer): number {
  let n = 0;
  while (n < buf.length) {
    const got = readSync(fd, buf, n, buf.length - n, null);
    if (got === 0) break;
    n += got;
  }
  return n;
}

/**
 * Calls `each` with the file's bytes in order as UTF-8, `chunkBytes` at a time (the last chunk
 * shorter), without a leading UTF-8 byte order mark (it is not data). Each chunk is a fresh
 * buffer: csv-parse keeps a view of the bytes of an unfinished record. UTF-8 text is checked
 * (a DataError on the line of the first byte that is not UTF-8); Latin-1 text is converted.
 */
export function readChunks(path: string, chunkBytes: number, each: (chunk: Buffer) => void, encoding: TextEncoding = 'utf8'): void {
  if (encoding === 'latin1') {
    readRawChunks(path, chunkBytes, (chunk) => each(Buffer.from(chunk.toString('latin1'), 'utf8')), false);
    return;
  }
  const check = new Utf8Check();
  readRawChunks(path, chunkBytes, (chunk) => {
    const bad = check.next(chunk);
    if (bad >= 0) throw notUtf8(path, bad);
    each(chunk);
  });
  const bad = check.end();
  if (bad >= 0) throw notUtf8(path, bad);
}

function notUtf8(path: string, offset: number): DataError {
  return new DataError(
    path,
    lineAt(path, offset),
    `not valid UTF-8 (byte ${offset} of the file); ids are compared as UTF-8 bytes: convert the file to UTF-8 (iconv -f <its encoding> -t utf-8) or name its encoding with --id-encoding latin1`,
  );
}

/** The 1-based line of the byte at `offset` (read again: only when a file is refused). */
function lineAt(path: string, offset: number): number {
  let line = 1;
  let at = 0;
  readRawChunks(path, READ_CHUNK_BYTES, (chunk) => {
    const upto = Math.min(chunk.length, offset - at);
    for (let k = chunk.indexOf(0x0a); k >= 0 && k < upto; k = chunk.indexOf(0x0a, k + 1)) line++;
    at += chunk.length;
  });
  return line;
}

/** UTF-8 bytes a sequence with this first byte has (0: not a first byte). */
function sequenceLength(b: number): number {
  return b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
}

/**
 * UTF-8 validity of a file read in chunks, by node's isUtf8 (simdutf): about 1 ms for 23 MB,
 * and reading a9a ten times over (325,610 rows) took the same CPU time with it as without
 * (medians of 6: 627 against 617 ms, the runs of each spanning 600-645). A character split
 * between two chunks is held back, a few bytes, and checked once whole. `next` and `end` give
 * the file offset of the first bad sequence, or -1.
 */
export class Utf8Check {
  private carry: number[] = [];
  private offset = 0;

  next(chunk: Buffer): number {
    let p = 0;
    const start = this.offset;
    this.offset += chunk.length;
    if (this.carry.length > 0) {
      const carryAt = start - this.carry.length;
      const want = sequenceLength(this.carry[0]);
      while (this.carry.length < want && p < chunk.length) this.carry.push(chunk[p++]);
      if (this.carry.length < want) return -1;
      if (!isUtf8(Uint8Array.from(this.carry))) return carryAt;
      this.carry = [];
    }
    // The last sequence, if it is cut short by the end of the chunk: held back.
    let tail = chunk.length;
    for (let k = chunk.length - 1; k >= Math.max(p, chunk.length - 4); k--) {
      const b = chunk[k];
      if ((b & 0xc0) === 0x80) continue;
      if (sequenceLength(b) > chunk.length - k) tail = k;
      break;
    }
    if (!isUtf8(chunk.subarray(p, tail))) return start + p + firstBad(chunk.subarray(p, tail));
    for (let k = tail; k < chunk.length; k++) this.carry.push(chunk[k]);
    return -1;
  }

  /** The file ended: a sequence still held back was cut short. */
  end(): number {
    return this.carry.length > 0 ? this.offset - this.carry.length : -1;
  }
}

/** The offset of the first sequence that isUtf8 refuses in `b` (only once it has refused). */
function firstBad(b: Uint8Array): number {
  // Halving over prefixes that end between sequences (the longest valid one ends near the bad
  // sequence), then sequence by sequence.
  let lo = 0;
  let hi = b.length;
  while (hi - lo > 4) {
    let mid = (lo + hi) >>> 1;
    while (mid > lo && (b[mid] & 0xc0) === 0x80) mid--;
    if (mid === lo) break;
    if (isUtf8(b.subarray(0, mid))) lo = mid;
    else hi = mid;
  }
  for (let k = lo; k < b.length; ) {
    const len = sequenceLength(b[k]);
    if (len === 0 || k + len > b.length || !isUtf8(b.subarray(k, k + len))) return k;
    k += len;
  }
  return lo;
}

function readRawChunks(path: string, chunkBytes: number, each: (chunk: Buffer) => void, dropBom = true): void {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    throw cannotRead(path, err);
  }
  try {
    // The first chunk holds at least the 3 bytes of a byte order mark, so it is never split.
    let buf = Buffer.allocUnsafe(Math.max(chunkBytes, UTF8_BOM.length));
    let first = true;
    for (;;) {
      let n: number;
      try {
        n = fill(fd, buf);
      } catch (err) {
        throw cannotRead(path, err);
      }
      let chunk = buf.subarray(0, n);
      if (dropBom && first && n >= 3 && UTF8_BOM.every((b, i) => chunk[i] === b)) chunk = chunk.subarray(UTF8_BOM.length);
      first = false;
      if (chunk.length > 0) each(chunk);
      if (n < buf.length) return;
      buf = Buffer.allocUnsafe(chunkBytes);
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * Calls `each(line, lineNo)` for every line of a UTF-8 text file (split at '\n', so a CRLF
 * line keeps its '\r'; the text after the last '\n' is a last line, empty when the file ends
 * with one), reading it in chunks. The decoder holds back the bytes of a character split
 * across two chunks, and a line split across chunks is joined before it is passed on.
 */
export function forEachLine(path: string, chunkBytes: number, each: (line: string, lineNo: number) => void, encoding: TextEncoding = 'utf8'): void {
  const decoder = new StringDecoder('utf8');
  /** The start of the current line, from earlier chunks. */
  let pending: string[] = [];
  let lineNo = 0;
  readChunks(path, chunkBytes, (chunk) => {
    const text = decoder.write(chunk);
    let start = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      let line = text.slice(start, nl);
      if (pending.length > 0) {
        pending.push(line);
        line = pending.join('');
        pending = [];
      }
      each(line, ++lineNo);
      start = nl + 1;
    }
    if (start < text.length) pending.push(text.slice(start));
  }, encoding);
  pending.push(decoder.end());
  each(pending.join(''), ++lineNo);
}

/**
 * A copy of `s` that shares no memory with the string it was cut from. V8 keeps a slice of 13
 * or more characters as a view of its parent (SlicedString::kMinLength), so an id cut from a
 * line would keep that line's whole chunk of the file alive, and over a file all of them, for
 * as long as the ids live. A JSON round trip builds a new flat string (of any content); it was
 * the fastest and smallest of the copies tried (concatenating and slicing again keeps a view).
 */
export function detach(s: string): string {
  return s.length < 13 ? s : (JSON.parse(JSON.stringify(s)) as string);
}

/**
 * Distinct labels shared rather than stored once per row: a binary label file has two, so a
 * million rows hold two strings. Regression labels are mostly distinct; past this many, new
 * ones are stored as they come.
 */
const MAX_SHARED_LABELS = 1024;

export class SharedLabels {
  private readonly map = new Map<string, string>();
  /** `s`, or an equal string seen before; `s` must not be a view of a larger string (see detach). */
  get(s: string): string {
    const prev = this.map.get(s);
    if (prev !== undefined) return prev;
    if (this.map.size < MAX_SHARED_LABELS) this.map.set(s, s);
    return s;
  }
}

/** The size of a file in bytes, 0 if it cannot be read (reading it then reports the error). */
export function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}
