// Reading a text file in chunks, line by line, and keeping the strings cut from it small: what
// the LIBSVM and CSV readers share.
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { DataError } from '../errors.js';

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
 * Calls `each` with the file's bytes in order, `chunkBytes` at a time (the last chunk shorter),
 * without a leading UTF-8 byte order mark (it is not data). Each chunk is a fresh buffer:
 * csv-parse keeps a view of the bytes of an unfinished record.
 */
export function readChunks(path: string, chunkBytes: number, each: (chunk: Buffer) => void): void {
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
      if (first && n >= 3 && UTF8_BOM.every((b, i) => chunk[i] === b)) chunk = chunk.subarray(UTF8_BOM.length);
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
export function forEachLine(path: string, chunkBytes: number, each: (line: string, lineNo: number) => void): void {
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
  });
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
