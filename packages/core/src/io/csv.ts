// CSV files: a header line, then one row a record (RFC 4180 quoting), parsed by csv-parse.
import { type Options as CsvOptions, Parser as CsvParser } from 'csv-parse';
import { BlockBuilder, type SparseSink } from '../linalg/block.js';
import { DataError, InternalError } from '../errors.js';
import { IdList, type IdSink } from './ids.js';
import { type TextEncoding, chunkSize, fileSize, readChunks } from './lines.js';
import { parseDataNumber } from './numbers.js';
import { type FeatureTable, type ReadOptions, type Scanned, sparse } from './table.js';

const trimBlanks = (s: string): string => s.replace(/^[ \t]+|[ \t]+$/g, '');

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

/** A field as written to a CSV file: quoted when it must be (it holds a comma, a quote or a line break). */
export function csvField(v: string): string {
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

/**
 * Calls `each(fields, line)` for every record of a CSV file that is not blank, in file order,
 * with its fields trimmed of blanks; `line` is the physical line the record starts on (a quoted
 * field may span lines). The file is read and parsed in chunks.
 */
function forEachCsvRecord(path: string, chunkBytes: number, encoding: TextEncoding | undefined, each: (fields: string[], line: number) => void): void {
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
  }, encoding);
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
export function readCsv(
  path: string,
  chunkBytes: number | undefined,
  onHeader: (h: CsvHeader) => (fields: string[], line: number) => void,
  encoding?: TextEncoding,
): void {
  let header: CsvHeader | undefined;
  let onRow: ((fields: string[], line: number) => void) | undefined;
  let rows = 0;
  forEachCsvRecord(path, chunkSize(chunkBytes), encoding, (fields, line) => {
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

export function columnIndex(h: CsvHeader, path: string, name: string): number {
  const i = h.names.indexOf(name);
  if (i < 0) throw new DataError(path, h.line, `no column named '${name}' in the header (columns: ${h.names.join(', ')})`);
  return i;
}

export function readCsvFeatures(path: string, opts: ReadOptions = {}): FeatureTable {
  const ids = new IdList(path);
  const t = csvFeatures(path, opts, false, ids);
  ids.done();
  return sparse(path, t, ids);
}

/** readCsvFeatures, dense when allowed and the file is (see BlockBuilder; sparse rows past the first to `spill` when given). */
export function csvFeatures<S = never>(path: string, opts: ReadOptions, dense: boolean, ids: IdSink, spill?: () => SparseSink<S>): Scanned<S> {
  let table: { b: BlockBuilder<S>; featureNames: string[] } | undefined;
  readCsv(path, chunkSize(opts.chunkBytes), (h) => {
    const idCol = columnIndex(h, path, opts.idColumn ?? 'id');
    const featureCols = h.names.map((_, i) => i).filter((i) => i !== idCol);
    if (opts.features !== undefined && opts.features !== featureCols.length)
      throw new DataError(path, h.line, `header has ${featureCols.length} feature columns, ${opts.features} declared`);
    // A field is at least one character and a comma or line end.
    const b = new BlockBuilder<S>(featureCols.length, fileSize(path), 2, dense, spill);
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
  }, opts.encoding);
  const { b, featureNames } = table!;
  return { X: b.build(featureNames.length), featureNames, firstTokens: undefined };
}
