// Reading a party's raw table for preparation: the CSV reader of io/ with columns picked by
// name, numeric columns with missing values, categorical columns as codes into a dictionary.
import { ConfigError, DataError } from '../errors.js';
import { readCsv } from '../io/csv.js';
import { PackedIdList } from '../io/ids.js';
import { type TextEncoding, chunkSize } from '../io/lines.js';
import { parseDataNumber } from '../io/numbers.js';
import { packIds } from '../io/packed-ids.js';
import type { FeatureTable } from '../io/table.js';
import { DEFAULT_MISSING_TOKENS, MISSING_CODE, PREPARE_FLAGS, type PrepareOptions, type RawColumn, type RawTable } from './types.js';

/** A typed array that grows by doubling; `done` gives its filled part. */
class Growing<T extends Float64Array | Uint32Array | Int32Array> {
  private n = 0;
  constructor(private a: T) {}
  push(v: number): void {
    if (this.n === this.a.length) {
      const b = new (this.a.constructor as new (n: number) => T)(2 * this.a.length);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.n++] = v;
  }
  done(): T {
    return this.a.slice(0, this.n) as T;
  }
}

/** Every name of `names` (a flag's list) must be in the header; otherwise a DataError naming the flag. */
function checkNames(path: string, header: { names: string[]; line: number }, names: readonly string[] | undefined, flag: string): void {
  for (const n of names ?? [])
    if (!header.names.includes(n)) throw new DataError(path, header.line, `${flag} names '${n}', which is not a column of the header (columns: ${header.names.join(', ')})`);
}

/** The columns kept from a header, in its order: the picked ones (or all), less the excluded ones and the id. */
export function keptColumns(path: string, header: { names: string[]; line: number }, opts: ReadRawOptions): number[] {
  const idCol = header.names.indexOf(opts.idColumn);
  if (idCol < 0) throw new DataError(path, header.line, `no column named '${opts.idColumn}' in the header (columns: ${header.names.join(', ')}): name the id column with ${PREPARE_FLAGS.idColumn}`);
  if (opts.model !== undefined)
    for (const n of opts.columns ?? [])
      if (!header.names.includes(n)) throw new DataError(path, header.line, `no column '${n}' in the header (columns: ${header.names.join(', ')}), and the model ${opts.model} was trained with it`);
  checkNames(path, header, opts.columns, PREPARE_FLAGS.columns);
  checkNames(path, header, opts.exclude, PREPARE_FLAGS.exclude);
  checkNames(path, header, opts.categorical, PREPARE_FLAGS.categorical);
  checkNames(path, header, opts.indicators, PREPARE_FLAGS.indicators);
  for (const [list, flag] of [[opts.columns, PREPARE_FLAGS.columns], [opts.exclude, PREPARE_FLAGS.exclude], [opts.categorical, PREPARE_FLAGS.categorical], [opts.indicators, PREPARE_FLAGS.indicators]] as const)
    if (list?.includes(opts.idColumn)) throw new ConfigError(`${flag} names the id column '${opts.idColumn}' (${PREPARE_FLAGS.idColumn}): the id is never a feature`);
  const kept = header.names
    .map((_, i) => i)
    .filter((i) => i !== idCol && (opts.columns === undefined || opts.columns.includes(header.names[i])) && !(opts.exclude ?? []).includes(header.names[i]));
  const keptNames = new Set(kept.map((i) => header.names[i]));
  for (const [list, flag] of [[opts.categorical, PREPARE_FLAGS.categorical], [opts.indicators, PREPARE_FLAGS.indicators]] as const)
    for (const n of list ?? [])
      if (!keptNames.has(n)) throw new ConfigError(`${flag} names '${n}', which ${PREPARE_FLAGS.columns} or ${PREPARE_FLAGS.exclude} leave out of ${path}: keep it or take it out of ${flag}`);
  if (kept.length === 0) throw new DataError(path, header.line, `no feature column is left besides the id (check ${PREPARE_FLAGS.columns} and ${PREPARE_FLAGS.exclude})`);
  return kept;
}

/** How a numeric field that is neither a number nor a missing token is reported, with what fixes it. */
function notNumeric(path: string, line: number, column: string, detail: string): DataError {
  return new DataError(
    path,
    line,
    `column '${column}': ${detail}; if the column holds categories, list it in ${PREPARE_FLAGS.categorical} (one-hot); if it is not a feature (a label, a name), in ${PREPARE_FLAGS.exclude}; if the value marks a missing one, add it to ${PREPARE_FLAGS.missingTokens}`,
  );
}

/**
 * Read a CSV file for preparation. Ids as the other readers take them (non-empty, never
 * repeated); a missing token (opts.missingTokens) is NaN in a numeric column and MISSING_CODE
 * in a categorical one; whether a missing value is allowed is decided by the fit and the
 * apply, which know the line of each row.
 */
export interface ReadRawOptions extends PrepareOptions {
  /** Bytes read at a time (tests set it small). */
  chunkBytes?: number;
  /** The file's text encoding (--id-encoding, default utf8). */
  encoding?: TextEncoding;
  /** At scoring: the model file whose preparation chose the columns (readOptionsOf), named when one is absent. */
  model?: string;
}

export function readRawTable(path: string, opts: ReadRawOptions): RawTable {
  const missing = new Set(opts.missingTokens ?? DEFAULT_MISSING_TOKENS);
  const ids = new PackedIdList(path);
  const lines = new Growing(new Int32Array(1024));
  let header: { names: string[]; line: number } | undefined;
  let build: (() => RawColumn[]) | undefined;
  let rows = 0;
  readCsv(path, chunkSize(opts.chunkBytes), (h) => {
    header = h;
    const idCol = h.names.indexOf(opts.idColumn);
    const kept = keptColumns(path, h, opts);
    const categorical = new Set(opts.categorical ?? []);
    const readers = kept.map((c) => {
      const name = h.names[c];
      if (categorical.has(name)) {
        const codes = new Growing(new Uint32Array(1024));
        const dictionary: string[] = [];
        const index = new Map<string, number>();
        return {
          read: (field: string) => {
            if (missing.has(field)) return codes.push(MISSING_CODE);
            let k = index.get(field);
            if (k === undefined) {
              k = dictionary.length;
              dictionary.push(field);
              index.set(field, k);
            }
            codes.push(k);
          },
          done: (): RawColumn => ({ name, kind: 'categorical', codes: codes.done(), dictionary }),
        };
      }
      const values = new Growing(new Float64Array(1024));
      return {
        read: (field: string, line: number) => {
          if (missing.has(field)) return values.push(NaN);
          const v = parseDataNumber(field);
          if (typeof v === 'string') throw notNumeric(path, line, name, v);
          values.push(v);
        },
        done: (): RawColumn => ({ name, kind: 'numeric', values: values.done() }),
      };
    });
    build = () => readers.map((r) => r.done());
    return (fields, line) => {
      ids.add(fields[idCol], line);
      lines.push(line);
      for (let j = 0; j < kept.length; j++) readers[j].read(fields[kept[j]], line);
      rows++;
    };
  }, opts.encoding);
  return { file: path, headerLine: header!.line, header: header!.names, rows, ids: ids.done(), lines: lines.done(), columns: build!() };
}

/**
 * A table read by the feature readers (LIBSVM with --prepare) as a raw table: every column
 * numeric, named as the reader names them, with no missing value (absent entries are zeros).
 */
export function rawTableFromFeatures(t: FeatureTable): RawTable {
  const { X } = t;
  const columns: RawColumn[] = t.featureNames.map((name) => ({ name, kind: 'numeric', values: new Float64Array(X.rows) }));
  for (let i = 0; i < X.rows; i++)
    for (let p = X.indptr[i]; p < X.indptr[i + 1]; p++) {
      const col = columns[X.indices[p]];
      if (col.kind === 'numeric') col.values[i] = X.values[p];
    }
  return { file: t.file, headerLine: undefined, header: t.featureNames, rows: X.rows, ids: packIds(t.ids), lines: Int32Array.from(t.lines), columns };
}
