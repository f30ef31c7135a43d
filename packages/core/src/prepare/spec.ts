// The public values a user declares per column (a JSON file): taken as they are, with no look
// at the data, so that a private party spends nothing on them (docs/privacy.md section 13).
import { DataError } from '../errors.js';
import { readJsonFile, z } from '../io/json-file.js';
import { PREPARE_FLAGS, type RawTable } from './types.js';

const finite = z.number().refine(Number.isFinite, 'expected a finite number');

const columnSpecSchema = z
  .strictObject({
    /** Values outside are an error at training and clipped at scoring. */
    range: z.tuple([finite, finite]).refine(([lo, hi]) => lo < hi, 'expected [lo, hi] with lo < hi').optional(),
    mean: finite.optional(),
    scale: finite.refine((s) => s > 0, 'expected a positive number').optional(),
    /** The vocabulary of a categorical column; any other category is an error at training. */
    categories: z
      .array(z.string())
      .min(1, 'expected at least one category')
      .refine((c) => new Set(c).size === c.length, 'a category appears twice')
      .optional(),
  })
  .refine((c) => c.range === undefined || c.mean === undefined || (c.range[0] <= c.mean && c.mean <= c.range[1]), {
    message: 'the mean lies outside the range',
    path: ['mean'],
  })
  .refine((c) => c.categories === undefined || (c.range === undefined && c.mean === undefined && c.scale === undefined), {
    message: 'a column declares categories (categorical) and a range, mean or scale (numeric): keep one kind',
  });

export const publicSpecSchema = z.strictObject({ columns: z.record(z.string(), columnSpecSchema) });

export type ColumnSpec = z.output<typeof columnSpecSchema>;

/** The declared values, with the file they came from (for error messages). */
export interface PublicSpec extends z.output<typeof publicSpecSchema> {
  file: string;
}

/** Read a spec file: `{ "columns": { "age": { "range": [18, 100] }, "job": { "categories": ["a", "b"] } } }`. */
export function readPublicSpec(path: string): PublicSpec {
  return { file: path, ...readJsonFile(publicSpecSchema, path, 'preparation spec') };
}

/**
 * Check that every column the spec declares is a column of `t` of the kind the spec gives it:
 * a declared column that was not read, or numeric values declared for a categorical column, are
 * errors naming the data file's header line and the flag that fixes them.
 */
export function checkSpecAgainst(spec: PublicSpec, t: RawTable): void {
  for (const [name, c] of Object.entries(spec.columns)) {
    const col = t.columns.find((k) => k.name === name);
    if (col === undefined) {
      const why = t.header.includes(name)
        ? `it is in the header but not read: add it to ${PREPARE_FLAGS.columns} (or take it out of ${PREPARE_FLAGS.exclude})`
        : `it is not in the header (columns: ${t.header.join(', ')}): correct the name in the spec or remove it`;
      throw new DataError(t.file, t.headerLine, `column '${name}' is declared in ${spec.file} but ${why}`);
    }
    if (col.kind === 'numeric' && c.categories !== undefined)
      throw new DataError(spec.file, undefined, `columns.${name}.categories: '${name}' is read as numeric from ${t.file}: list it in ${PREPARE_FLAGS.categorical} to one-hot it`);
    if (col.kind === 'categorical' && c.categories === undefined)
      throw new DataError(spec.file, undefined, `columns.${name}: '${name}' is categorical (${PREPARE_FLAGS.categorical}): declare its "categories", not a range, mean or scale`);
  }
}
