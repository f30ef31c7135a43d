import { ProtocolError } from './errors.js';
import {
  type Classes,
  type CoordinatorMessage,
  DIGEST_RE,
  type Done,
  type ModelRef,
  MAX_PENALTY_SQ,
  MAX_SHARE_MAGNITUDE,
  NAME_RE,
  NONCE_BYTES,
  type Part,
  PART_VALUES,
  type PartyMessage,
  POINT_BYTES,
  PSI_PART_POINTS,
  PROOF_BYTES,
  type PrivacyInfo,
  type SolverStats,
} from './messages.js';
import {
  ACCOUNTANT_NAMES,
  ALGORITHMS,
  LOSSES,
  type LossName,
  MECHANISMS,
  ROLES,
  SAMPLE_SETS,
  type SampleSet,
  STOP_REASONS,
  type StopReason,
} from './names.js';

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

type Obj = Record<string, unknown>;

/**
 * Characters of a peer's string quoted back in an error: enough to recognise it, few enough
 * that the message still fits a close reason (MAX_CLOSE_REASON_BYTES) with its context.
 */
const ECHO_CHARS = 40;

function invalid(detail: string): never {
  throw new ProtocolError('invalid', detail);
}

function asObject(v: unknown): Obj {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || ArrayBuffer.isView(v))
    invalid(`expected a map, got ${describe(v)}`);
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) invalid(`expected a map, got ${describe(v)}`);
  return v as Obj;
}

function describe(v: unknown): string {
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

function exactKeys(o: Obj, type: string, keys: readonly string[]): void {
  for (const k of Object.keys(o)) if (!keys.includes(k)) invalid(`${type}: unexpected field '${k}'`);
  for (const k of keys) if (!(k in o)) invalid(`${type}: missing field '${k}'`);
}

function str(o: Obj, type: string, key: string, re?: RegExp): string {
  const v = o[key];
  if (typeof v !== 'string') invalid(`${type}.${key}: expected a string, got ${describe(v)}`);
  if (re && !re.test(v)) invalid(`${type}.${key}: '${v.slice(0, ECHO_CHARS)}' is not a valid name`);
  return v;
}

function oneOf<T extends string>(o: Obj, type: string, key: string, allowed: readonly T[]): T {
  const v = str(o, type, key);
  if (!(allowed as readonly string[]).includes(v)) invalid(`${type}.${key}: '${v.slice(0, ECHO_CHARS)}' is not one of ${allowed.join(', ')}`);
  return v as T;
}

function count(o: Obj, type: string, key: string, min = 0): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    invalid(`${type}.${key}: expected an integer >= ${min}, got ${typeof v === 'number' ? v : describe(v)}`);
  return v;
}

/** share.solver: null, or a conjugate gradient solve's iterations and final relative residual. */
function solverStats(v: unknown): SolverStats | null {
  if (v === null) return null;
  const o = asObject(v);
  exactKeys(o, 'share.solver', ['iterations', 'residual']);
  const residual = finite(o, 'share.solver', 'residual');
  if (residual < 0) invalid(`share.solver.residual: ${residual} is negative`);
  return { iterations: count(o, 'share.solver', 'iterations'), residual };
}

function finite(o: Obj, type: string, key: string, positive = false): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) invalid(`${type}.${key}: expected a finite number, got ${typeof v === 'number' ? v : describe(v)}`);
  if (positive && !(v > 0)) invalid(`${type}.${key}: expected a positive number, got ${v}`);
  return v;
}

/** A vector of finite doubles; with `bound`, each of magnitude at most `bound`. */
function vector(o: Obj, type: string, key: string, length: number | undefined, bound = Infinity): Float64Array {
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
function vectorOrParts(o: Obj, type: string, key: string, length: number | undefined, bound = Infinity): Float64Array {
  const v = o[key];
  return v instanceof Float64Array && v.length === 0 ? v : vector(o, type, key, length, bound);
}

/** A `part`: its place a multiple of PART_VALUES inside the N values, PART_VALUES values (fewer in the last part). */
function part(o: Obj, ctx: ValidationContext, bound = Infinity): Part {
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

function bool(o: Obj, type: string, key: string): boolean {
  const v = o[key];
  if (typeof v !== 'boolean') invalid(`${type}.${key}: expected true or false, got ${describe(v)}`);
  return v;
}

function bytes(o: Obj, type: string, key: string): Uint8Array {
  const v = o[key];
  if (!(v instanceof Uint8Array)) invalid(`${type}.${key}: expected bytes, got ${describe(v)}`);
  return v;
}

/**
 * A list of points: whole POINT_BYTES each, and `count` of them when known. Whether each is a
 * point of the curve is checked where it is used (core's checkPoints), off the main thread.
 */
function pointList(o: Obj, type: string, key: string, count: number | undefined, mismatch: (n: number) => string): Uint8Array {
  const v = bytes(o, type, key);
  if (v.length % POINT_BYTES !== 0) invalid(`${type}.${key}: ${v.length} bytes is not a whole number of ${POINT_BYTES}-byte points`);
  if (count !== undefined && v.length !== count * POINT_BYTES) invalid(`${type}.${key}: ${mismatch(v.length / POINT_BYTES)}`);
  return v;
}

function rowIndex(o: Obj, type: string, key: string, length: number | undefined, bound: number | undefined): Uint32Array {
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

function job(o: Obj, type: string, ctx: ValidationContext): string {
  const id = str(o, type, 'jobId', NAME_RE);
  if (ctx.jobId !== undefined && id !== ctx.jobId)
    throw new ProtocolError('wrongJob', `${type} for job '${id}', this session is job '${ctx.jobId}'`);
  return id;
}

function round(o: Obj, type: string, ctx: ValidationContext): number {
  const r = count(o, type, 'round', 1);
  if (ctx.round !== undefined && r !== ctx.round)
    throw new ProtocolError('unexpected', `${type} for round ${r}, expected round ${ctx.round} (${r < ctx.round ? 'stale' : 'early'})`);
  return r;
}

function typeOf(o: Obj): string {
  const t = o.type;
  if (typeof t !== 'string') invalid(`field 'type': expected a string, got ${describe(t)}`);
  return t;
}

/** Longest raw label name `done.classes` may carry. */
const MAX_CLASS_CHARS = 256;

function modelRef(v: unknown): ModelRef {
  const t = 'hello.model';
  const m = asObject(v);
  exactKeys(m, t, ['jobId', 'digest', 'rowScaling', 'intercept']);
  return { jobId: str(m, t, 'jobId', NAME_RE), digest: str(m, t, 'digest', DIGEST_RE), rowScaling: bool(m, t, 'rowScaling'), intercept: bool(m, t, 'intercept') };
}

/** Validate a decoded value as a message a party may send. */
export function validatePartyMessage(value: unknown, ctx: ValidationContext = {}): PartyMessage {
  const o = asObject(value);
  const type = typeOf(o);
  switch (type) {
    case 'hello': {
      exactKeys(o, type, ['type', 'protocolVersion', 'partyId', 'jobId', 'features', 'trainRows', 'testRows', 'proof', 'noise', 'model']);
      const jobId = o.jobId === null ? null : str(o, type, 'jobId', NAME_RE);
      const proof = o.proof === null ? null : bytes(o, type, 'proof');
      if (proof && proof.length !== PROOF_BYTES) invalid(`hello.proof: ${proof.length} bytes, expected ${PROOF_BYTES}`);
      return {
        type,
        proof,
        protocolVersion: count(o, type, 'protocolVersion'),
        partyId: str(o, type, 'partyId', NAME_RE),
        jobId,
        features: count(o, type, 'features', 1),
        trainRows: count(o, type, 'trainRows', 1),
        testRows: count(o, type, 'testRows'),
        noise: bool(o, type, 'noise'),
        model: o.model === null ? null : modelRef(o.model),
      };
    }
    case 'found': {
      exactKeys(o, type, ['type', 'jobId', 'points']);
      const jobId = job(o, type, ctx);
      return { type, jobId, points: pointList(o, type, 'points', ctx.lookupIds, (n) => `${n} points, the lookup sent ${ctx.lookupIds}`) };
    }
    case 'partial': {
      exactKeys(o, type, ['type', 'jobId', 'scores', 'epsilonSpent']);
      const jobId = job(o, type, ctx);
      const epsilonSpent = finite(o, type, 'epsilonSpent');
      if (epsilonSpent < 0) invalid(`partial.epsilonSpent: ${epsilonSpent} is negative`);
      return { type, jobId, scores: vector(o, type, 'scores', ctx.n, MAX_SHARE_MAGNITUDE), epsilonSpent };
    }
    case 'ids': {
      exactKeys(o, type, ['type', 'jobId', 'set', 'points', 'labelPoints']);
      const jobId = job(o, type, ctx);
      const set: SampleSet = oneOf(o, type, 'set', SAMPLE_SETS);
      const rows = ctx.declaredRows?.[set];
      const points = pointList(o, type, 'points', rows, (n) => `${n} ${set} ids, the hello declared ${rows}`);
      const labelIds = ctx.labelIds?.[set];
      const labelPoints = pointList(o, type, 'labelPoints', labelIds, (n) => `${n} points, the coordinator sent ${labelIds}`);
      return { type, jobId, set, points, labelPoints };
    }
    case 'ready': {
      exactKeys(o, type, ['type', 'jobId', 'privacy']);
      const jobId = job(o, type, ctx);
      const p = asObject(o.privacy);
      const t = 'ready.privacy';
      exactKeys(p, t, ['mechanism', 'epsilon', 'delta', 'rounds', 'sigma', 'sensitivity', 'accountant', 'seeded']);
      const mechanism = oneOf(p, t, 'mechanism', MECHANISMS);
      const privacy: PrivacyInfo = {
        mechanism,
        epsilon: p.epsilon === null ? null : finite(p, t, 'epsilon', true),
        delta: p.delta === null ? null : finite(p, t, 'delta', true),
        rounds: count(p, t, 'rounds', 1),
        sigma: finite(p, t, 'sigma'),
        sensitivity: finite(p, t, 'sensitivity'),
        accountant: p.accountant === null ? null : oneOf(p, t, 'accountant', ACCOUNTANT_NAMES),
        seeded: bool(p, t, 'seeded'),
      };
      if (privacy.sigma < 0 || privacy.sensitivity < 0) invalid(`${t}: sigma and sensitivity must be >= 0`);
      if (mechanism !== 'none' && (privacy.epsilon === null || privacy.delta === null || privacy.accountant === null || !(privacy.sigma > 0)))
        invalid(`${t}: mechanism '${mechanism}' needs epsilon, delta, an accountant and sigma > 0`);
      return { type, jobId, privacy };
    }
    case 'share': {
      exactKeys(o, type, ['type', 'jobId', 'round', 'share', 'penaltySq', 'epsilonSpent', 'solver']);
      const jobId = job(o, type, ctx);
      const r = round(o, type, ctx);
      const penaltySq = finite(o, type, 'penaltySq');
      if (penaltySq < 0) invalid(`share.penaltySq: ${penaltySq} is negative`);
      if (penaltySq > MAX_PENALTY_SQ) invalid(`share.penaltySq: ${penaltySq} exceeds the bound ${MAX_PENALTY_SQ}`);
      const epsilonSpent = finite(o, type, 'epsilonSpent');
      if (epsilonSpent < 0) invalid(`share.epsilonSpent: ${epsilonSpent} is negative`);
      return { type, jobId, round: r, share: vectorOrParts(o, type, 'share', ctx.n, MAX_SHARE_MAGNITUDE), penaltySq, epsilonSpent, solver: solverStats(o.solver) };
    }
    case 'part':
      return part(o, ctx, MAX_SHARE_MAGNITUDE);
    case 'batchScores': {
      exactKeys(o, type, ['type', 'jobId', 'step', 'scores']);
      const jobId = job(o, type, ctx);
      const step = count(o, type, 'step', 1);
      if (ctx.step !== undefined && step !== ctx.step) throw new ProtocolError('unexpected', `batchScores for step ${step}, expected step ${ctx.step}`);
      return { type, jobId, step, scores: vector(o, type, 'scores', ctx.batchRows, MAX_SHARE_MAGNITUDE) };
    }
    case 'exhausted': {
      exactKeys(o, type, ['type', 'jobId', 'round', 'epsilonSpent']);
      const jobId = job(o, type, ctx);
      const r = round(o, type, ctx);
      const epsilonSpent = finite(o, type, 'epsilonSpent');
      if (epsilonSpent < 0) invalid(`exhausted.epsilonSpent: ${epsilonSpent} is negative`);
      return { type, jobId, round: r, epsilonSpent };
    }
    case 'scores': {
      exactKeys(o, type, ['type', 'jobId', 'round', 'scores']);
      const jobId = job(o, type, ctx);
      const r = round(o, type, ctx);
      return { type, jobId, round: r, scores: vector(o, type, 'scores', ctx.nTest, MAX_SHARE_MAGNITUDE) };
    }
    case 'released': {
      exactKeys(o, type, ['type', 'jobId', 'scores', 'testScores', 'epsilonSpent']);
      const jobId = job(o, type, ctx);
      const epsilonSpent = finite(o, type, 'epsilonSpent');
      if (epsilonSpent < 0) invalid(`released.epsilonSpent: ${epsilonSpent} is negative`);
      const testScores = vector(o, type, 'testScores', undefined, MAX_SHARE_MAGNITUDE);
      if (testScores.length !== 0 && ctx.nTest !== undefined && testScores.length !== ctx.nTest)
        invalid(`released.testScores: length ${testScores.length}, expected ${ctx.nTest} or none`);
      return { type, jobId, scores: vector(o, type, 'scores', ctx.n, MAX_SHARE_MAGNITUDE), testScores, epsilonSpent };
    }
    case 'fitted': {
      exactKeys(o, type, ['type', 'jobId', 'weights', 'objective', 'localObjective', 'testScores', 'localTestScores']);
      const jobId = job(o, type, ctx);
      const test = ctx.nTest ?? undefined;
      const testScores = vector(o, type, 'testScores', test, MAX_SHARE_MAGNITUDE);
      const localTestScores = vector(o, type, 'localTestScores', test, MAX_SHARE_MAGNITUDE);
      return {
        type,
        jobId,
        weights: vector(o, type, 'weights', ctx.passive, MAX_SHARE_MAGNITUDE),
        objective: finite(o, type, 'objective'),
        localObjective: finite(o, type, 'localObjective'),
        testScores,
        localTestScores,
      };
    }
    default:
      invalid(`'${type.slice(0, ECHO_CHARS)}' is not a message a party sends`);
  }
}

/** Validate a decoded value as a message the coordinator may send. */
export function validateCoordinatorMessage(value: unknown, ctx: ValidationContext = {}): CoordinatorMessage {
  const o = asObject(value);
  const type = typeOf(o);
  switch (type) {
    case 'resume': {
      exactKeys(o, type, ['type', 'jobId', 'round', 'rho', 'c', 'previousShare', 'share']);
      const jobId = job(o, type, ctx);
      const r = count(o, type, 'round');
      const rho = finite(o, type, 'rho', true);
      // Round 0 has nothing to replay: no vectors. Otherwise each is one number per aligned row.
      const length = r === 0 ? 0 : ctx.n;
      const c = vector(o, type, 'c', length);
      const previousShare = vector(o, type, 'previousShare', length ?? c.length);
      const share = vector(o, type, 'share', length ?? c.length);
      if (r > 0 && c.length === 0) invalid(`resume.c: empty, but round ${r} is to be replayed`);
      return { type, jobId, round: r, rho, c, previousShare, share };
    }
    case 'challenge': {
      exactKeys(o, type, ['type', 'protocolVersion', 'nonce']);
      const nonce = bytes(o, type, 'nonce');
      if (nonce.length !== NONCE_BYTES) invalid(`challenge.nonce: ${nonce.length} bytes, expected ${NONCE_BYTES}`);
      return { type, protocolVersion: count(o, type, 'protocolVersion'), nonce };
    }
    case 'welcome': {
      exactKeys(o, type, ['type', 'protocolVersion', 'jobId']);
      return { type, protocolVersion: count(o, type, 'protocolVersion'), jobId: job(o, type, ctx) };
    }
    case 'psi': {
      exactKeys(o, type, ['type', 'jobId', 'set', 'total', 'at', 'points']);
      const jobId = job(o, type, ctx);
      const set: SampleSet = oneOf(o, type, 'set', SAMPLE_SETS);
      const total = count(o, type, 'total');
      const at = count(o, type, 'at');
      const points = pointList(o, type, 'points', undefined, () => '');
      const n = points.length / POINT_BYTES;
      if (total === 0 && !ctx.emptyPsi) invalid(`psi.points: no ${set} label ids`);
      if (ctx.maxLabelIds !== undefined && total > ctx.maxLabelIds)
        invalid(`psi.total: ${total} ${set} label ids, more than this party accepts (${ctx.maxLabelIds}, admm-party --max-label-factor)`);
      if (n > PSI_PART_POINTS) invalid(`psi.points: ${n} points in one message, more than ${PSI_PART_POINTS}`);
      if (n === 0 && total > 0) invalid(`psi.points: empty, in a set of ${total} label ids`);
      if (at + n > total) invalid(`psi.points: label ids ${at} to ${at + n - 1}, but the set has ${total}`);
      return { type, jobId, set, total, at, points };
    }
    case 'setup': {
      exactKeys(o, type, ['type', 'jobId', 'trainRows', 'testRows', 'lambda', 'loss', 'rounds', 'rho', 'parties', 'algorithm', 'role', 'labels', 'labelFlip']);
      const jobId = job(o, type, ctx);
      const trainRows = rowIndex(o, type, 'trainRows', undefined, ctx.fileRows?.train);
      if (trainRows.length === 0) invalid('setup.trainRows: no training rows');
      const testRows = rowIndex(o, type, 'testRows', undefined, ctx.fileRows?.test);
      const lambda = finite(o, type, 'lambda');
      if (lambda < 0) invalid(`setup.lambda: ${lambda} is negative`);
      const loss: LossName = oneOf(o, type, 'loss', LOSSES);
      const algorithm = oneOf(o, type, 'algorithm', ALGORITHMS);
      const labels = vector(o, type, 'labels', algorithm === 'one-shot' ? trainRows.length : 0);
      for (let i = 0; i < labels.length; i++) if (labels[i] !== 1 && labels[i] !== -1) invalid(`setup.labels[${i}] = ${labels[i]}, expected +1 or -1`);
      const labelFlip = finite(o, type, 'labelFlip');
      // Randomized response flips with p = 1/(1 + e^epsilon) < 1/2; at 1/2 the labels carry nothing and the correction p/(1-2p) is infinite.
      if (!(labelFlip >= 0 && labelFlip < 0.5)) invalid(`setup.labelFlip: ${labelFlip} is not a flip probability in [0, 0.5)`);
      if (labelFlip > 0 && loss !== 'logistic') invalid(`setup.labelFlip: flipped labels with the ${loss} loss (only the logistic loss has the correction)`);
      if (labelFlip > 0 && lambda === 0) invalid('setup.labelFlip: flipped labels with lambda 0 (the corrected loss is unbounded below without the ridge term)');
      return {
        type,
        jobId,
        trainRows,
        testRows,
        lambda,
        loss,
        rounds: count(o, type, 'rounds', 1),
        rho: finite(o, type, 'rho', true),
        parties: count(o, type, 'parties', 1),
        algorithm,
        role: oneOf(o, type, 'role', ROLES),
        labels,
        labelFlip,
      };
    }
    case 'round': {
      exactKeys(o, type, ['type', 'jobId', 'round', 'rho', 'c']);
      const jobId = job(o, type, ctx);
      const r = round(o, type, ctx);
      return { type, jobId, round: r, rho: finite(o, type, 'rho', true), c: vectorOrParts(o, type, 'c', ctx.n) };
    }
    case 'part':
      return part(o, ctx);
    case 'sgd': {
      exactKeys(o, type, ['type', 'jobId', 'step', 'epoch', 'lr', 'gradient', 'rows', 'full']);
      const jobId = job(o, type, ctx);
      const step = count(o, type, 'step', 1);
      if (ctx.step !== undefined && step !== ctx.step) throw new ProtocolError('unexpected', `sgd step ${step}, expected step ${ctx.step}`);
      return {
        type,
        jobId,
        step,
        epoch: count(o, type, 'epoch', 1),
        lr: finite(o, type, 'lr', true),
        gradient: vector(o, type, 'gradient', ctx.batchRows),
        rows: rowIndex(o, type, 'rows', undefined, ctx.n),
        full: bool(o, type, 'full'),
      };
    }
    case 'evaluate': {
      exactKeys(o, type, ['type', 'jobId', 'round']);
      const jobId = job(o, type, ctx);
      return { type, jobId, round: count(o, type, 'round') };
    }
    case 'release': {
      exactKeys(o, type, ['type', 'jobId']);
      return { type, jobId: job(o, type, ctx) };
    }
    case 'fit': {
      exactKeys(o, type, ['type', 'jobId', 'parties', 'releases', 'sigmas']);
      const jobId = job(o, type, ctx);
      const parties = o.parties;
      if (!Array.isArray(parties) || parties.length === 0) invalid(`fit.parties: expected a non-empty array, got ${describe(parties)}`);
      const names = parties.map((p, i) => {
        if (typeof p !== 'string' || !NAME_RE.test(p)) invalid(`fit.parties[${i}]: not a party id`);
        return p;
      });
      const sigmas = vector(o, type, 'sigmas', names.length);
      for (let i = 0; i < sigmas.length; i++) if (sigmas[i] < 0) invalid(`fit.sigmas[${i}] = ${sigmas[i]} is negative`);
      const releases = vector(o, type, 'releases', ctx.n === undefined ? undefined : ctx.n * names.length, MAX_SHARE_MAGNITUDE);
      if (releases.length % names.length !== 0) invalid(`fit.releases: ${releases.length} values for ${names.length} parties`);
      return { type, jobId, parties: names, releases, sigmas };
    }
    case 'lookup': {
      exactKeys(o, type, ['type', 'jobId', 'points']);
      const jobId = job(o, type, ctx);
      const points = pointList(o, type, 'points', undefined, () => '');
      const n = points.length / POINT_BYTES;
      if (n === 0) invalid('lookup.points: no ids');
      if (ctx.maxLabelIds !== undefined && n > ctx.maxLabelIds) invalid(`lookup.points: ${n} ids, more than this party accepts per request (${ctx.maxLabelIds})`);
      return { type, jobId, points };
    }
    case 'score': {
      exactKeys(o, type, ['type', 'jobId', 'rows']);
      const jobId = job(o, type, ctx);
      return { type, jobId, rows: rowIndex(o, type, 'rows', undefined, ctx.fileRows?.train) };
    }
    case 'done': {
      exactKeys(o, type, ['type', 'jobId', 'reason', 'rounds', 'objective', 'params', 'classes']);
      const jobId = job(o, type, ctx);
      const reason: StopReason = oneOf(o, type, 'reason', STOP_REASONS);
      const p = asObject(o.params);
      exactKeys(p, 'done.params', ['variant', 'rho', 'alpha', 'lambda', 'loss']);
      const params: Done['params'] = {
        variant: str(p, 'done.params', 'variant'),
        rho: finite(p, 'done.params', 'rho'), // 0 for sgd
        alpha: finite(p, 'done.params', 'alpha', true),
        lambda: finite(p, 'done.params', 'lambda'),
        loss: oneOf(p, 'done.params', 'loss', LOSSES),
      };
      if (params.rho < 0) invalid(`done.params.rho: ${params.rho} is negative`);
      let classes: Classes | null = null;
      if (o.classes !== null) {
        const c = asObject(o.classes);
        exactKeys(c, 'done.classes', ['negative', 'positive']);
        classes = { negative: str(c, 'done.classes', 'negative'), positive: str(c, 'done.classes', 'positive') };
        if (classes.negative.length > MAX_CLASS_CHARS || classes.positive.length > MAX_CLASS_CHARS) invalid(`done.classes: a label name longer than ${MAX_CLASS_CHARS} characters`);
      }
      return { type, jobId, reason, rounds: count(o, type, 'rounds'), objective: finite(o, type, 'objective'), params, classes };
    }
    default:
      invalid(`'${type.slice(0, ECHO_CHARS)}' is not a message the coordinator sends`);
  }
}
