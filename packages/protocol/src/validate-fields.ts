// The field checks every wire validator shares (validate-party.ts, validate-coordinator.ts): an
// exact set of keys, strings by pattern, counts, finite numbers, vectors of an exact length and
// bound, point lists, row indices, and the session's job and round. Hand-written rather than a
// schema library: a round's vectors are typed arrays of up to millions of values, checked in
// one pass with no copy.
import { ProtocolError } from './errors.js';
import { NAME_RE, type Part, PART_VALUES, POINT_BYTES } from './messages.js';

/**
 * What the receiver knows about its session; each field, when present, is checked
 * against the message. Before alignment N is unknown, afterwards every vector must
 * have exactly the session's length.
 */
export interface ValidationContext {
  jobId?: string;
  /** Aligned training rows N. */
  n?: number;
  /** Aligned test rows. */
  nTest?: number;
  /** The round the receiver expects: a share or round message for another round is stale or early. */
  round?: number;
  /** Rows the party declared in its hello (coordinator side, for `ids`). */
  declaredRows?: { train: number; test: number };
  /** Label ids of each set the coordinator sent in `psi` (coordinator side, for `ids`). */
  labelIds?: { train: number; test: number };
  /** The most label ids a `psi` may carry (party side). */
  maxLabelIds?: number;
  /** Rows in the party's own files (party side, for `setup`). */
  fileRows?: { train: number; test: number };
  /** The SGD step the receiver expects. */
  step?: number;
  /** Rows of the batch the receiver asked scores for (coordinator) or last computed (party). */
  batchRows?: number;
  /** one-shot: passive parties whose releases the active party was sent (the weights it returns). */
  passive?: number;
  /** Party side, scoring online: a `psi` may carry no points (the party then only sends its own). */
  emptyPsi?: boolean;
  /** Ids of the `lookup` the coordinator sent (coordinator side, for `found`). */
  lookupIds?: number;
}

export type Obj = Record<string, unknown>;

/**
 * Characters of a peer's string quoted back in an error: enough to recognise it, few enough
 * that the message still fits a close reason (MAX_CLOSE_REASON_BYTES) with its context.
 */
export const ECHO_CHARS = 40;

export function invalid(detail: string): never {
  throw new ProtocolError('invalid', detail);
}

export function asObject(v: unknown): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || ArrayBuffer.isView(v))
    invalid(`expected a map, got ${describe(v)}`);
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) invalid(`expected a map, got ${describe(v)}`);
  return v as Obj;
}

export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (ArrayBuffer.isView(v)) return v.constructor.name;
  if (typeof v === 'object') {
    // A decoded map may carry its own `constructor` key: never trust what it holds.
    const name: unknown = Object.getPrototypeOf(v) === Object.prototype ? undefined : (v as object).constructor?.name;
    return typeof name === 'string' ? name : 'a map';
  }
  return typeof v;
}

export function exactKeys(o: Obj, type: string, keys: readonly string[]): void {
  for (const k of Object.keys(o)) if (!keys.includes(k)) invalid(`${type}: unexpected field '${k}'`);
  for (const k of keys) if (!(k in o)) invalid(`${type}: missing field '${k}'`);
}

export function str(o: Obj, type: string, key: string, re?: RegExp): string {
  const v = o[key];
  if (typeof v !== 'string') invalid(`${type}.${key}: expected a string, got ${describe(v)}`);
  if (re && !re.test(v)) invalid(`${type}.${key}: '${v.slice(0, ECHO_CHARS)}' is not a valid name`);
  return v;
}

export function oneOf<T extends string>(o: Obj, type: string, key: string, allowed: readonly T[]): T {
  const v = str(o, type, key);
  if (!(allowed as readonly string[]).includes(v)) invalid(`${type}.${key}: '${v.slice(0, ECHO_CHARS)}' is not one of ${allowed.join(', ')}`);
  return v as T;
}

export function count(o: Obj, type: string, key: string, min = 0): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    invalid(`${type}.${key}: expected an integer >= ${min}, got ${typeof v === 'number' ? v : describe(v)}`);
  return v;
}

export function finite(o: Obj, type: string, key: string, positive = false): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) invalid(`${type}.${key}: expected a finite number, got ${typeof v === 'number' ? v : describe(v)}`);
  if (positive && !(v > 0)) invalid(`${type}.${key}: expected a positive number, got ${v}`);
  return v;
}

/** A vector of finite doubles; with `bound`, each of magnitude at most `bound`. */
export function vector(o: Obj, type: string, key: string, length: number | undefined, bound = Infinity): Float64Array {
  const v = o[key];
  if (!(v instanceof Float64Array)) invalid(`${type}.${key}: expected a Float64Array, got ${describe(v)}`);
  if (length !== undefined && v.length !== length) invalid(`${type}.${key}: length ${v.length}, expected ${length}`);
  const i = firstOutside(v, bound);
  if (i >= 0) invalid(Number.isFinite(v[i]) ? `${type}.${key}[${i}] = ${v[i]} exceeds the bound ${bound}` : `${type}.${key}[${i}] is ${v[i]}`);
  return v;
}

/**
 * The index of the first value of v that is not finite or whose magnitude exceeds `bound`, or
 * -1 when there is none. Every vector received, and every share a party sends, goes through
 * here: 8 MB a party a round at a million rows. The usual answer, none, comes from one pass of
 * four running maxima of |v_i| that do not wait on each other (a NaN carries through Math.max);
 * only a vector that fails is scanned again for the index. Timed at 4.2M values against the
 * loop it replaced (each value tested twice): 3.1 ms against 6.0-9.6 (docs/scaling.md).
 */
export function firstOutside(v: Float64Array, bound = Infinity): number {
  const n = v.length;
  let m0 = 0;
  let m1 = 0;
  let m2 = 0;
  let m3 = 0;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    m0 = Math.max(m0, Math.abs(v[i]));
    m1 = Math.max(m1, Math.abs(v[i + 1]));
    m2 = Math.max(m2, Math.abs(v[i + 2]));
    m3 = Math.max(m3, Math.abs(v[i + 3]));
  }
  for (; i < n; i++) m0 = Math.max(m0, Math.abs(v[i]));
  const m = Math.max(m0, m1, m2, m3);
  if (m <= bound && m < Infinity) return -1;
  for (i = 0; i < n; i++) if (!(Math.abs(v[i]) <= bound && Number.isFinite(v[i]))) return i;
  return -1;
}

/**
 * The vector of a message that may come in parts (parts.ts): of length N, or empty (then its
 * parts came before it, which the receiver's PartAssembler checks).
 */
export function vectorOrParts(o: Obj, type: string, key: string, length: number | undefined, bound = Infinity): Float64Array {
  const v = o[key];
  return v instanceof Float64Array && v.length === 0 ? v : vector(o, type, key, length, bound);
}

/** A `part`: its place a multiple of PART_VALUES inside the N values, PART_VALUES values (fewer in the last part). */
export function part(o: Obj, ctx: ValidationContext, bound = Infinity): Part {
  const type = 'part';
  exactKeys(o, type, ['type', 'jobId', 'round', 'at', 'values']);
  const jobId = job(o, type, ctx);
  const r = round(o, type, ctx);
  const at = count(o, type, 'at');
  if (at % PART_VALUES !== 0) invalid(`part.at: ${at} is not a multiple of ${PART_VALUES}`);
  if (ctx.n !== undefined && at >= ctx.n) invalid(`part.at: ${at}, but the vector has ${ctx.n} values`);
  const length = ctx.n === undefined ? undefined : Math.min(PART_VALUES, ctx.n - at);
  return { type, jobId, round: r, at, values: vector(o, type, 'values', length, bound) };
}

export function bool(o: Obj, type: string, key: string): boolean {
  const v = o[key];
  if (typeof v !== 'boolean') invalid(`${type}.${key}: expected true or false, got ${describe(v)}`);
  return v;
}

export function bytes(o: Obj, type: string, key: string): Uint8Array {
  const v = o[key];
  if (!(v instanceof Uint8Array)) invalid(`${type}.${key}: expected bytes, got ${describe(v)}`);
  return v;
}

/**
 * A list of points: whole POINT_BYTES each, and `count` of them when known. Whether each is a
 * point of the curve is checked where it is used (core's checkPoints), off the main thread.
 */
export function pointList(o: Obj, type: string, key: string, count: number | undefined, mismatch: (n: number) => string): Uint8Array {
  const v = bytes(o, type, key);
  if (v.length % POINT_BYTES !== 0) invalid(`${type}.${key}: ${v.length} bytes is not a whole number of ${POINT_BYTES}-byte points`);
  if (count !== undefined && v.length !== count * POINT_BYTES) invalid(`${type}.${key}: ${mismatch(v.length / POINT_BYTES)}`);
  return v;
}

export function rowIndex(o: Obj, type: string, key: string, length: number | undefined, bound: number | undefined): Uint32Array {
  const v = o[key];
  if (!(v instanceof Uint32Array)) invalid(`${type}.${key}: expected a Uint32Array, got ${describe(v)}`);
  if (length !== undefined && v.length !== length) invalid(`${type}.${key}: length ${v.length}, expected ${length}`);
  if (bound !== undefined) {
    const seen = new Uint8Array(bound);
    for (let i = 0; i < v.length; i++) {
      if (v[i] >= bound) invalid(`${type}.${key}[${i}] = ${v[i]} is not a row of a file with ${bound} rows`);
      if (seen[v[i]]) invalid(`${type}.${key}: row ${v[i]} appears twice`);
      seen[v[i]] = 1;
    }
  }
  return v;
}

export function job(o: Obj, type: string, ctx: ValidationContext): string {
  const id = str(o, type, 'jobId', NAME_RE);
  if (ctx.jobId !== undefined && id !== ctx.jobId)
    throw new ProtocolError('wrongJob', `${type} for job '${id}', this session is job '${ctx.jobId}'`);
  return id;
}

export function round(o: Obj, type: string, ctx: ValidationContext): number {
  const r = count(o, type, 'round', 1);
  if (ctx.round !== undefined && r !== ctx.round)
    throw new ProtocolError('unexpected', `${type} for round ${r}, expected round ${ctx.round} (${r < ctx.round ? 'stale' : 'early'})`);
  return r;
}

export function typeOf(o: Obj): string {
  const t = o.type;
  if (typeof t !== 'string') invalid(`field 'type': expected a string, got ${describe(t)}`);
  return t;
}
