import { closeSync, fsyncSync, openSync, readSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { type Options as CsvOptions, Parser as CsvParser } from 'csv-parse';
import { BlockBuilder } from './block.js';
import { type Csr } from './csr.js';
import { type Dense } from './dense.js';
import { DataError, InternalError } from './errors.js';
import type { PackedIds } from './psi.js';

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
/** Input file formats; `auto` is CSV for a `.csv` name, LIBSVM otherwise. */
export const FILE_FORMATS = ['auto', 'libsvm', 'csv'] as const;
export type FileFormat = (typeof FILE_FORMATS)[number];

export interface ReadOptions {
  format?: FileFormat;
  ids?: IdMode;
  /** CSV: the name of the id column (default `id`). */
  idColumn?: string;
  /** Number of feature columns; an index beyond it is an error. Default: the largest index seen. */
  features?: number;
  /** Bytes read from the file at a time (default READ_CHUNK_BYTES); tests set it small. */
  chunkBytes?: number;
}

export interface FeatureTable {
  file: string;
  ids: string[];
  X: Csr;
  featureNames: string[];
  /** First token of each LIBSVM line when it is a label (`row`/`qid` id modes). */
  firstTokens?: string[];
  /** Physical line number of each row, for error messages. */
  lines: number[];
}

/**
 * A data file as a party keeps it (readFeatureBlock): its matrix dense when the file is, and its
 * ids packed as they are read: with a million short ids as strings, and packed only afterwards,
 * a party's reading peaked 45 MiB higher (docs/scaling.md).
 */
export interface BlockTable extends Pick<FeatureTable, 'file' | 'featureNames'> {
  ids: PackedIds;
  X: Csr | Dense;
}

/** What a reader of features returns; its ids went to the IdSink it was given (scanLibsvm, csvFeatures). */
interface Scanned {
  X: Csr | Dense;
  featureNames: string[];
  firstTokens: string[] | undefined;
}

export function detectFormat(path: string, format: FileFormat = 'auto'): Exclude<FileFormat, 'auto'> {
  if (format !== 'auto') return format;
  return /\.csv$/i.test(path) ? 'csv' : 'libsvm';
}

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

function cannotRead(path: string, err: unknown): DataError {
  const e = err as NodeJS.ErrnoException;
  return new DataError(path, undefined, `cannot read file (${e.code ?? e.message})`);
}

function chunkSize(n: number | undefined): number {
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
function readChunks(path: string, chunkBytes: number, each: (chunk: Buffer) => void): void {
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
function forEachLine(path: string, chunkBytes: number, each: (line: string, lineNo: number) => void): void {
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
function detach(s: string): string {
  return s.length < 13 ? s : (JSON.parse(JSON.stringify(s)) as string);
}

/**
 * Distinct labels shared rather than stored once per row: a binary label file has two, so a
 * million rows hold two strings. Regression labels are mostly distinct; past this many, new
 * ones are stored as they come.
 */
const MAX_SHARED_LABELS = 1024;

class SharedLabels {
  private readonly map = new Map<string, string>();
  /** `s`, or an equal string seen before; `s` must not be a view of a larger string (see detach). */
  get(s: string): string {
    const prev = this.map.get(s);
    if (prev !== undefined) return prev;
    if (this.map.size < MAX_SHARED_LABELS) this.map.set(s, s);
    return s;
  }
}

export function readFeatureFile(path: string, opts: ReadOptions = {}): FeatureTable {
  return detectFormat(path, opts.format) === 'csv' ? readCsvFeatures(path, opts) : readLibsvm(path, opts);
}

/**
 * readFeatureFile, with the matrix stored dense when the file is (at least DENSE_DENSITY of
 * its entries non-zero; decided on its first rows, see BlockBuilder), sparse otherwise. A dense
 * file is then never held as CSR: what a party keeps of its training file for the rounds.
 */
export function readFeatureBlock(path: string, opts: ReadOptions = {}): BlockTable {
  const ids = new PackedIdList(path);
  const t = detectFormat(path, opts.format) === 'csv' ? csvFeatures(path, opts, true, ids) : scanLibsvm(path, opts, true, true, ids);
  return { file: path, ids: ids.done(), X: t.X, featureNames: t.featureNames };
}

/** A table read with the dense form not allowed (its matrix is CSR), its ids as strings. */
function sparse(path: string, t: Scanned, ids: IdList): FeatureTable {
  if ('data' in t.X) throw new InternalError('reading a data file', 'a dense matrix where only CSR was allowed');
  return { file: path, ids: ids.ids, X: t.X, featureNames: t.featureNames, firstTokens: t.firstTokens, lines: ids.lines };
}

/** The size of a file in bytes, 0 if it cannot be read (reading it then reports the error). */
function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

const INDEX_RE = /^[0-9]+$/;

/**
 * The numbers data files may hold: decimal notation only, i.e. an optional sign, digits with
 * an optional fraction (`5`, `5.`, `5.25`, `.5`) and an optional exponent (`e-3`, `E+7`).
 * `Number()` alone is far more lenient: it reads `0x10` as 16, `0b1`, `0o7`, `Infinity`,
 * surrounding whitespace and the empty string (as 0); all of these are typos or foreign
 * formats in a data file, so they are rejected rather than guessed at.
 */
const DECIMAL_RE = /^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;

/**
 * Largest magnitude accepted for a feature value or a numeric (squared-loss) label.
 * The party squares and sums values (row norms for normalisation, the Gram matrices
 * D^T D and D D^T, squared residuals): with |v| <= 1e100 a square is at most 1e200, so a sum
 * stays below Number.MAX_VALUE (1.8e308) for up to 1e108 terms, i.e. for any N and d that
 * fit in memory. 1e308 passed the old finiteness check and overflowed to Infinity there.
 * No real feature needs more than 100 orders of magnitude; rescale the data if one does.
 */
export const MAX_ABS_VALUE = 1e100;

const SPACE = 0x20;
const TAB = 0x09;
const CR = 0x0d;
const trimBlanks = (s: string): string => s.replace(/^[ \t]+|[ \t]+$/g, '');

/**
 * A number in a data file: decimal notation (see DECIMAL_RE), finite and within
 * MAX_ABS_VALUE; otherwise a message saying what is wrong with `text`.
 */
export function parseDataNumber(text: string): number | string {
  if (!DECIMAL_RE.test(text)) return `'${text}' is not a decimal number`;
  const v = Number(text);
  if (!(Math.abs(v) <= MAX_ABS_VALUE)) return `'${text}' exceeds the largest accepted magnitude ${MAX_ABS_VALUE}`;
  return v;
}

/**
 * Largest feature index accepted. Column indices are stored as Int32, and a party's model
 * holds one coefficient (and name) per column, so an absurd index in a file is an error,
 * not a 2^31-column allocation.
 */
export const MAX_FEATURES = 1 << 24;

/**
 * Splits `line` at spaces and tabs into `out` (cleared first), ignoring one trailing '\r' (CRLF)
 * and blanks at either end. Other whitespace stays inside a token (and is rejected there).
 */
function splitBlanks(line: string, out: string[]): void {
  out.length = 0;
  let end = line.length;
  if (end > 0 && line.charCodeAt(end - 1) === CR) end--;
  let i = 0;
  while (i < end) {
    let c = line.charCodeAt(i);
    if (c === SPACE || c === TAB) {
      i++;
      continue;
    }
    const start = i;
    do c = line.charCodeAt(++i);
    while (i < end && c !== SPACE && c !== TAB);
    out.push(line.slice(start, i));
  }
}

export function readLibsvm(path: string, opts: ReadOptions = {}): FeatureTable {
  const ids = new IdList(path);
  const t = scanLibsvm(path, opts, true, false, ids);
  ids.done();
  return sparse(path, t, ids);
}

/**
 * readLibsvm (dense when allowed and the file is, see BlockBuilder); with `keepFeatures` false
 * every token is still checked, but no matrix is built (X is 0 x 0).
 */
function scanLibsvm(path: string, opts: ReadOptions, keepFeatures: boolean, dense: boolean, ids: IdSink): Scanned {
  let mode = opts.ids ?? 'auto';
  const firstTokens: string[] = [];
  const labels = new SharedLabels();
  // An entry is at least 'j:v' and a blank before it.
  const b = new BlockBuilder(opts.features, keepFeatures ? fileSize(path) : 0, 4, dense);
  const tokens: string[] = [];
  // One row's entries, reused from row to row.
  const cols: number[] = [];
  const vals: number[] = [];
  const order: number[] = [];
  let row = 0;
  forEachLine(path, chunkSize(opts.chunkBytes), (text, lineNo) => {
    splitBlanks(text, tokens);
    if (tokens.length === 0 || tokens[0].startsWith('#')) return;
    const fail = (detail: string): never => {
      throw new DataError(path, lineNo, detail);
    };
    let t = 1;
    if (mode === 'auto') mode = tokens.length > 1 && tokens[1].startsWith('qid:') ? 'qid' : 'row';
    row++;
    let id: string;
    if (mode === 'first') {
      id = tokens[0];
      if (id.includes(':')) fail(`expected a sample id as the first token, found '${id}'`);
      id = detach(id);
    } else if (mode === 'qid') {
      if (tokens.length < 2 || !tokens[1].startsWith('qid:')) fail(`expected 'qid:ID' as the second token`);
      id = detach(tokens[1].slice(4));
      if (id === '') fail(`empty qid`);
      t = 2;
      firstTokens.push(labels.get(detach(tokens[0])));
    } else {
      id = String(row);
      firstTokens.push(labels.get(detach(tokens[0])));
    }
    if (tokens[0].includes(':')) fail(`first token '${tokens[0]}' looks like index:value; a label or id must come first`);
    ids.add(id, lineNo);
    cols.length = 0;
    vals.length = 0;
    let sorted = true;
    for (; t < tokens.length; t++) {
      const tok = tokens[t];
      const colon = tok.indexOf(':');
      if (colon <= 0) fail(`token ${t + 1} '${tok}' is not index:value`);
      const idxText = tok.slice(0, colon);
      const valText = tok.slice(colon + 1);
      if (!INDEX_RE.test(idxText)) fail(`token ${t + 1} '${tok}': index '${idxText}' is not a positive integer`);
      const idx = Number(idxText);
      if (idx < 1) fail(`token ${t + 1} '${tok}': indices start at 1`);
      if (idx > MAX_FEATURES) fail(`token ${t + 1} '${tok}': index ${idx} exceeds the limit of ${MAX_FEATURES} features`);
      if (opts.features !== undefined && idx > opts.features)
        fail(`token ${t + 1} '${tok}': index ${idx} exceeds the ${opts.features} features declared`);
      const val = parseDataNumber(valText);
      if (typeof val === 'string') fail(`token ${t + 1} '${tok}': value ${val}`);
      if (cols.length > 0 && idx - 1 <= cols[cols.length - 1]) sorted = false;
      cols.push(idx - 1);
      vals.push(val as number);
    }
    // Files usually list a row's indices in increasing order; sort only when they are not.
    order.length = cols.length;
    for (let k = 0; k < cols.length; k++) order[k] = k;
    if (!sorted) order.sort((p, q) => cols[p] - cols[q]);
    for (let k = 0; k < order.length; k++) {
      const j = cols[order[k]];
      if (k > 0 && j === cols[order[k - 1]]) fail(`feature index ${j + 1} appears twice`);
      if (keepFeatures) b.push(j, vals[order[k]]);
    }
    if (keepFeatures) b.endRow(text.length + 1);
  });
  if (row === 0) throw new DataError(path, undefined, 'no data rows');
  // Row numbers are distinct by construction (the caller's done() checks the others).
  if (mode === 'row') ids.distinct();
  const X = keepFeatures ? b.build(opts.features) : { rows: 0, cols: 0, indptr: new Int32Array(1), indices: new Int32Array(0), values: new Float64Array(0) };
  const featureNames = Array.from({ length: X.cols }, (_, j) => String(j + 1));
  return { X, featureNames, firstTokens: mode === 'first' ? undefined : firstTokens };
}

/**
 * The csv-parse options: RFC 4180 quoting ('"' quotes a field, '""' is a quote inside one), and
 * a record ends at '\n' or '\r\n' (a quoted field may hold either). The rest is done here
 * rather than by csv-parse: blanks around a field are trimmed (spaces and tabs only; csv-parse's
 * trim would also take no-break spaces and form feeds, which are rejected as data), blank lines
 * are skipped, the field count is compared with the header, and readChunks drops the byte order
 * mark.
 */
const CSV_OPTIONS: CsvOptions = {
  delimiter: ',',
  quote: '"',
  escape: '"',
  record_delimiter: ['\r\n', '\n'],
  relax_column_count: true,
  skip_empty_lines: false,
  bom: false,
  encoding: 'utf8',
};

/** The part of a csv-parse Parser used here: its synchronous core (see csvParser). */
interface CsvCore {
  parse(buf: Buffer | undefined, end: boolean, push: (record: string[]) => void, close: () => void): Error | undefined;
}

/**
 * csv-parse's parsing core. Its stream (`Parser`) and callback APIs are asynchronous and its
 * sync API takes the whole file as one string; the stream's `api` object is the core they
 * all share, which parses one buffer at a time synchronously and returns (not throws) a
 * malformed-CSV error. Checked here, so an upgrade that moves it fails loudly (every CSV test
 * goes through it).
 */
function csvParser(): CsvCore {
  const api = (new CsvParser(CSV_OPTIONS) as unknown as { api?: Partial<CsvCore> }).api;
  if (typeof api?.parse !== 'function') throw new InternalError('setting up the CSV reader', 'csv-parse no longer offers Parser.api.parse');
  return api as CsvCore;
}

/** A malformed-CSV error from csv-parse as a DataError on the line where the record starts. */
function csvDataError(path: string, line: number, err: Error): DataError {
  const e = err as Error & { code?: string; column?: unknown };
  const field = typeof e.column === 'number' ? `field ${e.column + 1}: ` : '';
  switch (e.code) {
    case 'INVALID_OPENING_QUOTE':
      return new DataError(path, line, `${field}a quote inside an unquoted field (a quoted field starts with the quote, with no blanks before it, and a quote inside it is written twice: "")`);
    case 'CSV_INVALID_CLOSING_QUOTE':
      return new DataError(path, line, `${field}a closing quote followed by something other than a comma or the end of the line (a quote inside a quoted field is written twice: "")`);
    case 'CSV_QUOTE_NOT_CLOSED':
      return new DataError(path, line, `${field}a quoted field that is never closed (the file ends inside it)`);
    default:
      return new DataError(path, line, `not valid CSV: ${e.message}`);
  }
}

/**
 * Calls `each(fields, line)` for every record of a CSV file that is not blank, in file order,
 * with its fields trimmed of blanks; `line` is the physical line the record starts on (a quoted
 * field may span lines). The file is read and parsed in chunks.
 */
function forEachCsvRecord(path: string, chunkBytes: number, each: (fields: string[], line: number) => void): void {
  const parser = csvParser();
  /** Line of the record being parsed. */
  let line = 1;
  const push = (record: string[]): void => {
    const start = line;
    // The line break ending the record, and any inside quoted fields (unquoted ones cannot hold one).
    line++;
    for (let i = 0; i < record.length; i++) {
      const f = record[i];
      for (let k = f.indexOf('\n'); k >= 0; k = f.indexOf('\n', k + 1)) line++;
      record[i] = trimBlanks(f);
    }
    if (record.length === 1 && record[0] === '') return;
    each(record, start);
  };
  const close = (): void => undefined;
  readChunks(path, chunkBytes, (chunk) => {
    const err = parser.parse(chunk, false, push, close);
    if (err !== undefined) throw csvDataError(path, line, err);
  });
  const err = parser.parse(undefined, true, push, close);
  if (err !== undefined) throw csvDataError(path, line, err);
}

interface CsvHeader {
  names: string[];
  line: number;
}

/**
 * Reads a CSV file record by record: the first record is the header, which `onHeader` checks
 * and answers with the handler of the data rows; every data row has as many fields as the header.
 */
function readCsv(path: string, chunkBytes: number, onHeader: (h: CsvHeader) => (fields: string[], line: number) => void): void {
  let header: CsvHeader | undefined;
  let onRow: ((fields: string[], line: number) => void) | undefined;
  let rows = 0;
  forEachCsvRecord(path, chunkBytes, (fields, line) => {
    if (header === undefined) {
      const names = new Set<string>();
      for (const h of fields) {
        if (names.has(h)) throw new DataError(path, line, `column '${h}' appears twice in the header`);
        names.add(h);
      }
      header = { names: fields, line };
      onRow = onHeader(header);
      return;
    }
    if (fields.length !== header.names.length) throw new DataError(path, line, `${fields.length} fields, but the header has ${header.names.length}`);
    rows++;
    onRow!(fields, line);
  });
  if (header === undefined) throw new DataError(path, undefined, 'empty file: expected a header line');
  if (rows === 0) throw new DataError(path, undefined, 'no data rows after the header');
}

function columnIndex(h: CsvHeader, path: string, name: string): number {
  const i = h.names.indexOf(name);
  if (i < 0) throw new DataError(path, h.line, `no column named '${name}' in the header (columns: ${h.names.join(', ')})`);
  return i;
}

/** Where a reader puts each row's sample id, with its line. */
interface IdSink {
  /** The next row's id (a DataError if it is empty). */
  add(id: string, line: number): void;
  /** The ids are distinct by construction (row numbers): done() need not look for a repeat. */
  distinct(): void;
}

/**
 * Sample ids in file order, each non-empty, with the line of each; `done` refuses a repeated one
 * (refuseDuplicates).
 */
class IdList implements IdSink {
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
 * 35 MB as strings in arrays. `done` refuses a repeated id and gives the packed ids.
 */
class PackedIdList implements IdSink {
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
    // Exact lengths: copies of what was read, the arrays they were written into let go.
    const packed = new Uint8Array(this.used);
    packed.set(bytes.subarray(0, this.used));
    return { length: n, bytes: packed, offsets: offsets.slice(0, n + 1) };
  }
}

/** `a`'s values at the start of a new array of `length`. */
function grown<T extends Uint32Array | Int32Array>(a: T, length: number): T {
  const b = new (a.constructor as new (n: number) => T)(length);
  b.set(a);
  return b;
}

function duplicateId(path: string, id: string, line: number, firstLine: number): DataError {
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
  const repeat = firstRepeat(
    ids.length,
    (i) => {
      const id = ids[i];
      let h = 0x811c9dc5;
      for (let k = 0; k < id.length; k++) h = Math.imul(h ^ id.charCodeAt(k), 16777619);
      return h >>> 0;
    },
    (i, j) => ids[i] === ids[j],
  );
  if (repeat) throw duplicateId(path, ids[repeat.again], lines[repeat.again], lines[repeat.first]);
}

/**
 * The first of n ids (in their order) equal to an earlier one, and that earlier one, or
 * undefined: `hash(i)` is id i's 32-bit hash, `same(i, j)` whether ids i and j are equal.
 */
function firstRepeat(n: number, hash: (i: number) => number, same: (i: number, j: number) => boolean): { first: number; again: number } | undefined {
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

export function readCsvFeatures(path: string, opts: ReadOptions = {}): FeatureTable {
  const ids = new IdList(path);
  const t = csvFeatures(path, opts, false, ids);
  ids.done();
  return sparse(path, t, ids);
}

/** readCsvFeatures, dense when allowed and the file is (see BlockBuilder). */
function csvFeatures(path: string, opts: ReadOptions, dense: boolean, ids: IdSink): Scanned {
  let table: { b: BlockBuilder; featureNames: string[] } | undefined;
  readCsv(path, chunkSize(opts.chunkBytes), (h) => {
    const idCol = columnIndex(h, path, opts.idColumn ?? 'id');
    const featureCols = h.names.map((_, i) => i).filter((i) => i !== idCol);
    if (opts.features !== undefined && opts.features !== featureCols.length)
      throw new DataError(path, h.line, `header has ${featureCols.length} feature columns, ${opts.features} declared`);
    // A field is at least one character and a comma or line end.
    const b = new BlockBuilder(featureCols.length, fileSize(path), 2, dense);
    table = { b, featureNames: featureCols.map((c) => h.names[c]) };
    return (r, line) => {
      ids.add(r[idCol], line);
      // The row's characters (its fields and their separators), for the dense form's capacity.
      let chars = r[idCol].length + 1;
      for (let j = 0; j < featureCols.length; j++) {
        const c = featureCols[j];
        chars += r[c].length + 1;
        const v = parseDataNumber(r[c]);
        if (typeof v === 'string') throw new DataError(path, line, `column '${h.names[c]}': ${v}`);
        b.push(j, v);
      }
      b.endRow(chars);
    };
  });
  const { b, featureNames } = table!;
  return { X: b.build(featureNames.length), featureNames, firstTokens: undefined };
}

export interface LabelTable {
  file: string;
  ids: string[];
  raw: string[];
  lines: number[];
}

/** Labels with sample ids: CSV with id and label columns, or the first token of a LIBSVM file. */
export function readLabelFile(
  path: string,
  opts: { format?: FileFormat; ids?: IdMode; idColumn?: string; labelColumn?: string; chunkBytes?: number } = {},
): LabelTable {
  if (detectFormat(path, opts.format) === 'csv') {
    const ids = new IdList(path);
    const labels = new SharedLabels();
    const raw: string[] = [];
    readCsv(path, chunkSize(opts.chunkBytes), (h) => {
      const idCol = columnIndex(h, path, opts.idColumn ?? 'id');
      const labelCol = columnIndex(h, path, opts.labelColumn ?? 'label');
      return (r, line) => {
        ids.add(r[idCol], line);
        raw.push(labels.get(r[labelCol]));
      };
    });
    ids.done();
    return { file: path, ids: ids.ids, raw, lines: ids.lines };
  }
  if (opts.ids === 'first') throw new DataError(path, undefined, "a LIBSVM labels file needs its labels first: use ids 'row' or 'qid'");
  const ids = new IdList(path);
  const f = scanLibsvm(path, { ids: opts.ids ?? 'auto', chunkBytes: opts.chunkBytes }, false, false, ids);
  return { file: path, ids: ids.done().ids, raw: f.firstTokens!, lines: ids.lines };
}

/** The ids of a file of rows to score: a CSV's id column, or a LIBSVM file's ids (its features are ignored). */
export function readIdFile(
  path: string,
  opts: { format?: FileFormat; ids?: IdMode; idColumn?: string; chunkBytes?: number } = {},
): { file: string; ids: string[] } {
  if (detectFormat(path, opts.format) === 'csv') {
    const ids = new IdList(path);
    readCsv(path, chunkSize(opts.chunkBytes), (h) => {
      const idCol = columnIndex(h, path, opts.idColumn ?? 'id');
      return (r, line) => ids.add(r[idCol], line);
    });
    return { file: path, ids: ids.done().ids };
  }
  const ids = new IdList(path);
  scanLibsvm(path, { ids: opts.ids ?? 'auto', chunkBytes: opts.chunkBytes }, false, false, ids);
  return { file: path, ids: ids.done().ids };
}

/** A raw label as a class: decimal numbers by value ('1', '+1' and '1.0' are one class), anything else as text. */
export function labelKey(v: string): string {
  const x = DECIMAL_RE.test(v) ? Number(v) : NaN;
  return Number.isFinite(x) ? `#${x}` : v;
}

/**
 * Labels for classification: exactly two distinct values; the larger (numerically when
 * both are numbers, otherwise as strings) becomes +1, the other -1.
 */
export function binaryLabels(t: LabelTable): { y: Float64Array; negative: string; positive: string } {
  // Labels that are (decimal) numbers are compared as numbers, so '1' and '+1' are one class;
  // anything else ('0x1', 'spam') is a string, so '0x1' is not the class '1'.
  // No magnitude limit here: the labels become +-1.
  const asNumber = (v: string): number | undefined => {
    const x = DECIMAL_RE.test(v) ? Number(v) : NaN;
    return Number.isFinite(x) ? x : undefined;
  };
  const distinct: string[] = [];
  const keys: string[] = [];
  for (let i = 0; i < t.raw.length; i++) {
    const v = t.raw[i];
    if (v === '') throw new DataError(t.file, t.lines[i], 'empty label');
    const k = labelKey(v);
    if (!keys.includes(k)) {
      keys.push(k);
      distinct.push(v);
      if (distinct.length > 2)
        throw new DataError(
          t.file,
          t.lines[i],
          `a third distinct label '${v}' (after '${distinct[0]}' and '${distinct[1]}'): logistic regression needs exactly two classes`,
        );
    }
  }
  if (distinct.length < 2)
    throw new DataError(t.file, undefined, `every label is '${distinct[0]}': logistic regression needs two classes`);
  const [a, b] = distinct;
  const na = asNumber(a);
  const nb = asNumber(b);
  const aLarger = na !== undefined && nb !== undefined ? na > nb : a > b;
  const positive = aLarger ? a : b;
  const negative = aLarger ? b : a;
  const positiveKey = labelKey(positive);
  return { y: Float64Array.from(t.raw, (v) => (labelKey(v) === positiveKey ? 1 : -1)), negative, positive };
}

/** Labels for regression: every label a decimal number of magnitude at most MAX_ABS_VALUE. */
export function numericLabels(t: LabelTable): Float64Array {
  return Float64Array.from(t.raw, (v, i) => {
    const x = parseDataNumber(v);
    if (typeof x === 'string') throw new DataError(t.file, t.lines[i], `label ${x}`);
    return x;
  });
}

/** The temporary file an atomic write of `path` goes through: same directory, this process's. */
function atomicTemp(path: string): string {
  return join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
}

/**
 * Write a file so that readers see either the old content or the whole new one:
 * write a temporary file in the same directory, fsync it, rename it over the target.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644): void {
  const tmp = atomicTemp(path);
  let fd: number | undefined;
  // A temporary file left behind by a crashed process (same pid) would keep its old mode if
  // opened with 'w'; removing it and creating the file afresh makes `mode` apply (0600 secrets).
  try {
    unlinkSync(tmp);
  } catch {
    /* none left behind */
  }
  try {
    fd = openSync(tmp, 'wx', mode);
    writeSync(fd, typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, path);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    try {
      unlinkSync(tmp);
    } catch {
      /* already gone */
    }
    throw err;
  }
}

/**
 * writeFileAtomic off the caller's thread (Node's file system threads): the same steps and
 * temporary file, so at most one write of a given path may be in flight at a time.
 */
export async function writeFileAtomicAsync(path: string, data: Uint8Array, mode = 0o644): Promise<void> {
  const tmp = atomicTemp(path);
  await unlink(tmp).catch(() => undefined);
  try {
    const handle = await open(tmp, 'wx', mode);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

/** LIBSVM text with the sample id as the first token (`ids: 'first'`). */
export function formatLibsvmWithIds(ids: readonly string[], X: Csr): string {
  const out: string[] = [];
  for (let i = 0; i < X.rows; i++) {
    let line = ids[i];
    for (let k = X.indptr[i]; k < X.indptr[i + 1]; k++) line += ` ${X.indices[k] + 1}:${X.values[k]}`;
    out.push(line);
  }
  return out.join('\n') + '\n';
}

export function formatLabelsCsv(ids: readonly string[], labels: ArrayLike<number | string>): string {
  const out = ['id,label'];
  for (let i = 0; i < ids.length; i++) out.push(`${ids[i]},${labels[i]}`);
  return out.join('\n') + '\n';
}
