// One way to read a JSON file the project itself wrote: its format is declared once as a zod
// schema beside its writer, its TypeScript type is inferred from that schema, and reading it
// returns a typed value or a DataError that names the file and the first field that is wrong.
// zod 4 (not valibot): the schemas read as the types they replace (z.object, z.enum,
// z.literal), `z.infer` gives the type, and an issue carries the path of the failing field,
// which is what the error message needs. Neither library is on a round's path.
import { readFileSync } from 'node:fs';
import * as z from 'zod';
import { DataError } from '../errors.js';

export { z };

/**
 * A schema's error message for a field: "missing" when absent, else "expected `what`, got <the
 * value as JSON, cut to 60 characters>" (`z.number({ error: expectedValue('a rate') })`).
 */
export const expectedValue =
  (what: string) =>
  (issue: { input?: unknown }): string =>
    issue.input === undefined ? 'missing' : `expected ${what}, got ${JSON.stringify(issue.input)?.slice(0, 60)}`;

/** A number that may be NaN, as JSON holds it: JSON has no NaN, so NaN is written as null and null reads back as NaN. */
export const nullAsNaN = <S extends z.ZodType<number>>(n: S) => z.union([z.null().transform(() => NaN), n]);

/** `a.b[2].c` for an issue's path; empty for the document itself. */
function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((k, i) => (typeof k === 'number' ? `[${k}]` : `${i === 0 ? '' : '.'}${String(k)}`)).join('');
}

/** The first issue of a failed parse, as `field: what was wrong`. */
export function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (issue === undefined) return 'invalid';
  const at = fieldPath(issue.path);
  return at ? `${at}: ${issue.message}` : issue.message;
}

/**
 * Check an already-parsed value against `schema`; `what` names the format in the message
 * ("job description", "privacy ledger") and `file` the place it came from.
 */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, file: string, what: string): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw new DataError(file, undefined, `${what}: ${describeIssue(r.error)}`);
  return r.data;
}

/** Parse `text` (the content of `file`) as JSON and check it against `schema`. */
export function parseJsonText<S extends z.ZodType>(schema: S, text: string, file: string, what: string): z.output<S> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new DataError(file, undefined, `${what}: not JSON (${(err as Error).message.replace(/\s+/g, ' ')})`);
  }
  return parseWith(schema, value, file, what);
}

/** The text of `path`; a missing or unreadable file is a DataError naming it. */
function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new DataError(path, undefined, `${what}: cannot read it (${e.code ?? e.message})`);
  }
}

/** Read `path` and check it against `schema`; a missing or unreadable file is a DataError too. */
export function readJsonFile<S extends z.ZodType>(schema: S, path: string, what: string): z.output<S> {
  return parseJsonText(schema, readText(path, what), path, what);
}

/** Read a JSON-lines file (a trace) and check each line against `schema`. */
export function readJsonLinesFile<S extends z.ZodType>(schema: S, path: string, what: string): z.output<S>[] {
  return parseJsonLines(schema, readText(path, what), path, what);
}

/** Each line of a JSON-lines file (a trace), checked against `schema`; the error names the line. */
export function parseJsonLines<S extends z.ZodType>(schema: S, text: string, file: string, what: string): z.output<S>[] {
  const out: z.output<S>[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new DataError(file, i + 1, `${what}: not JSON (${(err as Error).message.replace(/\s+/g, ' ')})`);
    }
    const r = schema.safeParse(value);
    if (!r.success) throw new DataError(file, i + 1, `${what}: ${describeIssue(r.error)}`);
    out.push(r.data);
  }
  return out;
}
