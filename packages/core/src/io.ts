import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { type Csr, CsrBuilder } from './csr.js';
import { DataError } from './errors.js';

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

export function detectFormat(path: string, format: FileFormat = 'auto'): Exclude<FileFormat, 'auto'> {
  if (format !== 'auto') return format;
  return /\.csv$/i.test(path) ? 'csv' : 'libsvm';
}

function readText(path: string): string {
  try {
    const text = readFileSync(path, 'utf8');
    // A UTF-8 byte order mark is not data (and is no longer trimmed as whitespace below).
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new DataError(path, undefined, `cannot read file (${e.code ?? e.message})`);
  }
}

export function readFeatureFile(path: string, opts: ReadOptions = {}): FeatureTable {
  return detectFormat(path, opts.format) === 'csv' ? readCsvFeatures(path, opts) : readLibsvm(path, opts);
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

/** Separators within a line: spaces and tabs only (other whitespace ends up in a token, and is rejected). */
const BLANKS_RE = /[ \t]+/;
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

export function readLibsvm(path: string, opts: ReadOptions = {}): FeatureTable {
  const text = readText(path);
  const lines = text.split('\n');
  let mode = opts.ids ?? 'auto';
  const ids: string[] = [];
  const firstTokens: string[] = [];
  const lineNos: number[] = [];
  const b = new CsrBuilder(opts.features ?? 0);
  const seen = new Map<string, number>();
  let row = 0;
  for (let ln = 0; ln < lines.length; ln++) {
    const line = trimBlanks(lines[ln].replace(/\r$/, ''));
    if (line === '' || line.startsWith('#')) continue;
    const lineNo = ln + 1;
    const fail = (detail: string): never => {
      throw new DataError(path, lineNo, detail);
    };
    const tokens = line.split(BLANKS_RE);
    let t = 1;
    if (mode === 'auto') mode = tokens.length > 1 && tokens[1].startsWith('qid:') ? 'qid' : 'row';
    row++;
    let id: string;
    if (mode === 'first') {
      id = tokens[0];
      if (id.includes(':')) fail(`expected a sample id as the first token, found '${id}'`);
    } else if (mode === 'qid') {
      if (tokens.length < 2 || !tokens[1].startsWith('qid:')) fail(`expected 'qid:ID' as the second token`);
      id = tokens[1].slice(4);
      if (id === '') fail(`empty qid`);
      t = 2;
      firstTokens.push(tokens[0]);
    } else {
      id = String(row);
      firstTokens.push(tokens[0]);
    }
    if (tokens[0].includes(':')) fail(`first token '${tokens[0]}' looks like index:value; a label or id must come first`);
    const prev = seen.get(id);
    if (prev !== undefined) fail(`duplicate sample id '${id}' (first seen on line ${prev})`);
    seen.set(id, lineNo);
    ids.push(id);
    lineNos.push(lineNo);
    const entries: [number, number][] = [];
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
      else entries.push([idx - 1, val]);
    }
    entries.sort((a, c) => a[0] - c[0]);
    for (let k = 0; k < entries.length; k++) {
      if (k > 0 && entries[k][0] === entries[k - 1][0]) fail(`feature index ${entries[k][0] + 1} appears twice`);
      b.push(entries[k][0], entries[k][1]);
    }
    b.endRow();
  }
  if (row === 0) throw new DataError(path, undefined, 'no data rows');
  const X = b.build(opts.features);
  const featureNames = Array.from({ length: X.cols }, (_, j) => String(j + 1));
  return { file: path, ids, X, featureNames, firstTokens: mode === 'first' ? undefined : firstTokens, lines: lineNos };
}

function splitCsvLine(line: string, path: string, lineNo: number): string[] {
  if (line.includes('"')) throw new DataError(path, lineNo, 'quoted CSV fields are not supported');
  return line.split(',').map(trimBlanks);
}

interface CsvTable {
  header: string[];
  headerLine: number;
  rows: string[][];
  lines: number[];
}

function readCsv(path: string): CsvTable {
  const text = readText(path);
  const lines = text.split('\n');
  let header: string[] | undefined;
  let headerLine = 0;
  const rows: string[][] = [];
  const lineNos: number[] = [];
  for (let ln = 0; ln < lines.length; ln++) {
    const line = lines[ln].replace(/\r$/, '');
    if (trimBlanks(line) === '') continue;
    const fields = splitCsvLine(line, path, ln + 1);
    if (header === undefined) {
      header = fields;
      headerLine = ln + 1;
      const dup = header.find((h, i) => header!.indexOf(h) !== i);
      if (dup !== undefined) throw new DataError(path, ln + 1, `column '${dup}' appears twice in the header`);
      continue;
    }
    if (fields.length !== header.length)
      throw new DataError(path, ln + 1, `${fields.length} fields, but the header has ${header.length}`);
    rows.push(fields);
    lineNos.push(ln + 1);
  }
  if (header === undefined) throw new DataError(path, undefined, 'empty file: expected a header line');
  if (rows.length === 0) throw new DataError(path, undefined, 'no data rows after the header');
  return { header, headerLine, rows, lines: lineNos };
}

function columnIndex(t: CsvTable, path: string, name: string): number {
  const i = t.header.indexOf(name);
  if (i < 0) throw new DataError(path, t.headerLine, `no column named '${name}' in the header (columns: ${t.header.join(', ')})`);
  return i;
}

function uniqueIds(raw: string[], lines: number[], path: string): void {
  const seen = new Map<string, number>();
  raw.forEach((id, i) => {
    if (id === '') throw new DataError(path, lines[i], 'empty sample id');
    const prev = seen.get(id);
    if (prev !== undefined) throw new DataError(path, lines[i], `duplicate sample id '${id}' (first seen on line ${prev})`);
    seen.set(id, lines[i]);
  });
}

export function readCsvFeatures(path: string, opts: ReadOptions = {}): FeatureTable {
  const t = readCsv(path);
  const idCol = columnIndex(t, path, opts.idColumn ?? 'id');
  const featureCols = t.header.map((_, i) => i).filter((i) => i !== idCol);
  if (opts.features !== undefined && opts.features !== featureCols.length)
    throw new DataError(path, t.headerLine, `header has ${featureCols.length} feature columns, ${opts.features} declared`);
  const b = new CsrBuilder(featureCols.length);
  const ids = t.rows.map((r) => r[idCol]);
  uniqueIds(ids, t.lines, path);
  t.rows.forEach((r, i) => {
    featureCols.forEach((c, j) => {
      const v = parseDataNumber(r[c]);
      if (typeof v === 'string') throw new DataError(path, t.lines[i], `column '${t.header[c]}': ${v}`);
      b.push(j, v);
    });
    b.endRow();
  });
  return { file: path, ids, X: b.build(featureCols.length), featureNames: featureCols.map((c) => t.header[c]), lines: t.lines };
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
  opts: { format?: FileFormat; ids?: IdMode; idColumn?: string; labelColumn?: string } = {},
): LabelTable {
  if (detectFormat(path, opts.format) === 'csv') {
    const t = readCsv(path);
    const idCol = columnIndex(t, path, opts.idColumn ?? 'id');
    const labelCol = columnIndex(t, path, opts.labelColumn ?? 'label');
    const ids = t.rows.map((r) => r[idCol]);
    uniqueIds(ids, t.lines, path);
    return { file: path, ids, raw: t.rows.map((r) => r[labelCol]), lines: t.lines };
  }
  if (opts.ids === 'first') throw new DataError(path, undefined, "a LIBSVM labels file needs its labels first: use ids 'row' or 'qid'");
  const f = readLibsvm(path, { ids: opts.ids ?? 'auto' });
  return { file: path, ids: f.ids, raw: f.firstTokens!, lines: f.lines };
}

/** The ids of a file of rows to score: a CSV's id column, or a LIBSVM file's ids (its features are ignored). */
export function readIdFile(path: string, opts: { format?: FileFormat; ids?: IdMode; idColumn?: string } = {}): { file: string; ids: string[] } {
  if (detectFormat(path, opts.format) === 'csv') {
    const t = readCsv(path);
    const idCol = columnIndex(t, path, opts.idColumn ?? 'id');
    const ids = t.rows.map((r) => r[idCol]);
    uniqueIds(ids, t.lines, path);
    return { file: path, ids };
  }
  return { file: path, ids: readLibsvm(path, { ids: opts.ids ?? 'auto' }).ids };
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

/**
 * Write a file so that readers see either the old content or the whole new one:
 * write a temporary file in the same directory, fsync it, rename it over the target.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644): void {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
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
