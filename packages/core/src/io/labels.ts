// Label files (and files of ids to score), and labels as classes or numbers.
import { DataError } from '../errors.js';
import { columnIndex, readCsv } from './csv.js';
import { type IdMode, IdList } from './ids.js';
import { scanLibsvm } from './libsvm.js';
import { type TextEncoding, SharedLabels, chunkSize } from './lines.js';
import { DECIMAL_RE, parseDataNumber } from './numbers.js';
import { type FileFormat, detectFormat } from './table.js';

export interface LabelTable {
  file: string;
  ids: string[];
  raw: string[];
  lines: number[];
}

/** Labels with sample ids: CSV with id and label columns, or the first token of a LIBSVM file. */
export function readLabelFile(
  path: string,
  opts: { format?: FileFormat; ids?: IdMode; idColumn?: string; labelColumn?: string; chunkBytes?: number; encoding?: TextEncoding } = {},
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
    }, opts.encoding);
    ids.done();
    return { file: path, ids: ids.ids, raw, lines: ids.lines };
  }
  if (opts.ids === 'first') throw new DataError(path, undefined, "a LIBSVM labels file needs its labels first: use ids 'row' or 'qid'");
  const ids = new IdList(path);
  const f = scanLibsvm(path, { ids: opts.ids ?? 'auto', chunkBytes: opts.chunkBytes, encoding: opts.encoding }, false, false, ids);
  return { file: path, ids: ids.done().ids, raw: f.firstTokens!, lines: ids.lines };
}

/** The ids of a file of rows to score: a CSV's id column, or a LIBSVM file's ids (its features are ignored). */
export function readIdFile(
  path: string,
  opts: { format?: FileFormat; ids?: IdMode; idColumn?: string; chunkBytes?: number; encoding?: TextEncoding } = {},
): { file: string; ids: string[] } {
  if (detectFormat(path, opts.format) === 'csv') {
    const ids = new IdList(path);
    readCsv(path, chunkSize(opts.chunkBytes), (h) => {
      const idCol = columnIndex(h, path, opts.idColumn ?? 'id');
      return (r, line) => ids.add(r[idCol], line);
    }, opts.encoding);
    return { file: path, ids: ids.done().ids };
  }
  const ids = new IdList(path);
  scanLibsvm(path, { ids: opts.ids ?? 'auto', chunkBytes: opts.chunkBytes, encoding: opts.encoding }, false, false, ids);
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

export function formatLabelsCsv(ids: readonly string[], labels: ArrayLike<number | string>): string {
  const out = ['id,label'];
  for (let i = 0; i < ids.length; i++) out.push(`${ids[i]},${labels[i]}`);
  return out.join('\n') + '\n';
}
