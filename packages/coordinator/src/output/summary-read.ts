/**
 * Reading back what summary.ts writes (summary.json, trace.jsonl): parsed and rebuilt like wire
 * data, every field checked for type, finiteness and range, names against the protocol's
 * tables, unknown keys refused, so nothing unchecked survives. A failure is a DataError that
 * names the file, the line of a trace line, and the field.
 */
import { readFileSync } from 'node:fs';
import { DataError } from '@admm-share/core';
import { ACCOUNTANT_NAMES, ALGORITHMS, LOSSES, MECHANISMS, NAME_RE, STOP_REASONS, VARIANTS } from '@admm-share/protocol';
import type { LocalBaseline } from '../config.js';
import { ALIGNMENT_METHOD, type Summary, type TestMetrics, type TraceLine } from './summary.js';

type Obj = Record<string, unknown>;

const OBJECTIVE_FROM = ['shares', 'noisy shares'] as const;
const METRICS = ['logLoss', 'accuracy', 'auc', 'rmse'] as const;

const show = (v: unknown): string =>
  v === undefined ? 'missing' : v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : typeof v === 'string' ? `'${v.slice(0, 40)}'` : String(v);

/** The field checkers for one value read from `path` (at `line`); each names the field it rejects. */
function checkers(path: string, line: number | undefined, what: string) {
  const bad = (field: string, detail: string): never => {
    throw new DataError(path, line, `not a valid ${what}: ${field} ${detail}`);
  };
  const at = (field: string, key: string) => (field ? `${field}.${key}` : key);
  /** An object with exactly the `required` keys and any of the `optional` ones ('any': any keys). */
  const obj = (v: unknown, field: string, required: readonly string[], optional: readonly string[] | 'any' = []): Obj => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad(field || (line === undefined ? 'the file' : 'the line'), `is ${show(v)}, expected an object`);
    const o = v as Obj;
    if (optional !== 'any') for (const k of Object.keys(o)) if (!required.includes(k) && !optional.includes(k)) bad(at(field, k), 'is not expected');
    for (const k of required) if (o[k] === undefined) bad(at(field, k), 'is missing');
    return o;
  };
  const num = (v: unknown, field: string, min?: number, max?: number): number =>
    typeof v === 'number' && Number.isFinite(v) && (min === undefined || v >= min) && (max === undefined || v <= max)
      ? v
      : bad(field, `is ${show(v)}, expected a finite number${min === undefined ? '' : ` >= ${min}`}${max === undefined ? '' : ` <= ${max}`}`);
  const positive = (v: unknown, field: string): number => (num(v, field) > 0 ? (v as number) : bad(field, `is ${show(v)}, expected a positive number`));
  const int = (v: unknown, field: string, min = 0): number => (Number.isSafeInteger(v) && (v as number) >= min ? (v as number) : bad(field, `is ${show(v)}, expected an integer >= ${min}`));
  const str = (v: unknown, field: string): string => (typeof v === 'string' ? v : bad(field, `is ${show(v)}, expected a string`));
  const name = (v: unknown, field: string): string => (NAME_RE.test(str(v, field)) ? (v as string) : bad(field, `is ${show(v)}, not a valid name`));
  const bool = (v: unknown, field: string): boolean => (typeof v === 'boolean' ? v : bad(field, `is ${show(v)}, expected true or false`));
  const oneOf = <T extends string>(v: unknown, field: string, options: readonly T[]): T => options.find((o) => o === v) ?? bad(field, `is ${show(v)}, expected one of ${options.join(', ')}`);
  const bytes = (v: unknown, field: string) => {
    const o = obj(v, field, ['toCoordinator', 'fromCoordinator']);
    return { toCoordinator: int(o.toCoordinator, `${field}.toCoordinator`), fromCoordinator: int(o.fromCoordinator, `${field}.fromCoordinator`) };
  };
  /** Test metrics; null is JSON's NaN (AUC of a test set with one class), read back as NaN. */
  const metrics = (v: unknown, field: string): TestMetrics => {
    const o = obj(v, field, [], METRICS);
    const metric = (k: (typeof METRICS)[number], max?: number) => (o[k] === undefined ? undefined : o[k] === null ? NaN : num(o[k], `${field}.${k}`, 0, max));
    return defined({ logLoss: metric('logLoss'), accuracy: metric('accuracy', 1), auc: metric('auc', 1), rmse: metric('rmse') });
  };
  /** A map from party id to a value, each checked by `each` (as `field.id`). */
  const byParty = <T>(v: unknown, field: string, each: (x: unknown, field: string) => T): Record<string, T> => {
    const o = obj(v, field, [], 'any');
    return Object.fromEntries(Object.keys(o).map((party) => [name(party, `${field} key`), each(o[party], `${field}.${party}`)]));
  };
  return { bad, obj, num, positive, int, str, name, bool, oneOf, bytes, metrics, byParty };
}

/** `x` without its undefined entries: optional fields that were absent stay absent. */
function defined<T extends object>(x: T): T {
  return Object.fromEntries(Object.entries(x).filter(([, v]) => v !== undefined)) as T;
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new DataError(path, undefined, `cannot read the ${what} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

function parseJson(text: string, path: string, line?: number): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new DataError(path, line, `not JSON (${(err as Error).message})`);
  }
}

/**
 * --local-baseline: {"party": ID, "objective": number, "test": {"logLoss", "accuracy", "auc",
 * "rmse" (any of them)} or null}, the figures of a model on the label holder's own features.
 */
export function readLocalBaseline(path: string): LocalBaseline {
  const c = checkers(path, undefined, 'local baseline');
  const o = c.obj(parseJson(readText(path, 'local baseline'), path), '', ['party', 'objective'], ['test']);
  return { party: c.name(o.party, 'party'), objective: c.num(o.objective, 'objective'), test: o.test == null ? null : c.metrics(o.test, 'test') };
}

export function readSummary(path: string): Summary {
  return parseSummary(parseJson(readText(path, 'summary'), path), path);
}

/** Rebuild a summary (as buildSummary makes it) from a parsed value, checking every field. */
export function parseSummary(value: unknown, path: string): Summary {
  const c = checkers(path, undefined, 'summary');
  const o = c.obj(
    value,
    '',
    ['jobId', 'algorithm', 'variant', 'loss', 'lambda', 'rho', 'alpha', 'rounds', 'reason', 'converged', 'objective', 'objectiveFrom', 'residuals', 'seconds', 'bytes', 'parties', 'rows', 'droppedRows', 'droppedTestRows', 'alignment', 'classes', 'privacy', 'labelPrivacy', 'peakMemoryBytes'],
    ['sgd', 'acceleration', 'test', 'evaluation', 'oneShot', 'research'],
  );
  const acc = o.acceleration === undefined ? undefined : c.obj(o.acceleration, 'acceleration', ['method', 'memory', 'extrapolated', 'rejected']);
  const algorithm = c.oneOf(o.algorithm, 'algorithm', ALGORITHMS);
  if ((o.sgd !== undefined) !== (algorithm === 'sgd')) c.bad('sgd', algorithm === 'sgd' ? 'is missing' : `is not expected with algorithm '${algorithm}'`);
  const rho = c.obj(o.rho, 'rho', ['initial', 'final']);
  const sgd = o.sgd === undefined ? undefined : c.obj(o.sgd, 'sgd', ['batchSize', 'lr', 'lrDecay']);
  const residuals = o.residuals === null ? null : c.obj(o.residuals, 'residuals', ['primal', 'dual']);
  const seconds = c.obj(o.seconds, 'seconds', ['total', 'setup', 'training', 'perRound']);
  const rows = c.obj(o.rows, 'rows', ['train', 'test']);
  const list = (v: unknown, field: string): unknown[] => (Array.isArray(v) ? v : c.bad(field, `is ${show(v)}, expected a list`));
  const reason = c.oneOf(o.reason, 'reason', STOP_REASONS);
  if ((o.oneShot !== undefined) !== (algorithm === 'one-shot')) c.bad('oneShot', algorithm === 'one-shot' ? 'is missing' : `is not expected with algorithm '${algorithm}'`);
  const oneShot = o.oneShot === undefined ? undefined : c.obj(o.oneShot, 'oneShot', ['activeParty', 'weights', 'intercept', 'local', 'warnings'], ['baseline']);
  const classes = o.classes === null ? null : c.obj(o.classes, 'classes', ['negative', 'positive']);
  const local = oneShot?.local ? c.obj(oneShot.local, 'oneShot.local', ['party', 'objective'], ['test']) : null;
  const lp = o.labelPrivacy === null ? null : c.obj(o.labelPrivacy, 'labelPrivacy', ['epsilon', 'flipProbability', 'flipped', 'seeded']);
  const rowsTrain = c.int(rows.train, 'rows.train');
  const labelPrivacy = lp && {
    epsilon: c.positive(lp.epsilon, 'labelPrivacy.epsilon'),
    // 1 / (1 + e^epsilon) is below 1/2 for every epsilon > 0.
    flipProbability: c.num(lp.flipProbability, 'labelPrivacy.flipProbability', 0) < 0.5 ? (lp.flipProbability as number) : c.bad('labelPrivacy.flipProbability', `is ${show(lp.flipProbability)}, expected a number below 0.5`),
    flipped: c.int(lp.flipped, 'labelPrivacy.flipped') <= rowsTrain ? (lp.flipped as number) : c.bad('labelPrivacy.flipped', `is ${show(lp.flipped)}, more than the ${rowsTrain} training rows`),
    seeded: c.bool(lp.seeded, 'labelPrivacy.seeded'),
  };
  if (labelPrivacy && o.loss !== 'logistic') c.bad('labelPrivacy', `is not expected with loss ${show(o.loss)}`);
  const converged = c.bool(o.converged, 'converged');
  if (converged !== (reason === 'converged')) c.bad('converged', `is ${converged} with reason '${reason}'`);
  return defined({
    jobId: c.name(o.jobId, 'jobId'),
    algorithm,
    variant: c.oneOf(o.variant, 'variant', VARIANTS),
    loss: c.oneOf(o.loss, 'loss', LOSSES),
    lambda: c.num(o.lambda, 'lambda', 0),
    rho: { initial: c.num(rho.initial, 'rho.initial', 0), final: c.num(rho.final, 'rho.final', 0) },
    alpha: c.positive(o.alpha, 'alpha') < 2 ? (o.alpha as number) : c.bad('alpha', `is ${show(o.alpha)}, expected a number in (0, 2)`),
    acceleration: acc && {
      method: c.oneOf(acc.method, 'acceleration.method', ['anderson'] as const),
      memory: c.int(acc.memory, 'acceleration.memory', 1),
      extrapolated: c.int(acc.extrapolated, 'acceleration.extrapolated'),
      rejected: c.int(acc.rejected, 'acceleration.rejected'),
    },
    sgd: sgd && { batchSize: c.int(sgd.batchSize, 'sgd.batchSize', 1), lr: c.positive(sgd.lr, 'sgd.lr'), lrDecay: c.num(sgd.lrDecay, 'sgd.lrDecay', 0) },
    rounds: c.int(o.rounds, 'rounds'),
    reason,
    converged,
    objective: c.num(o.objective, 'objective'),
    objectiveFrom: c.oneOf(o.objectiveFrom, 'objectiveFrom', OBJECTIVE_FROM),
    residuals: residuals && { primal: c.num(residuals.primal, 'residuals.primal', 0), dual: c.num(residuals.dual, 'residuals.dual', 0) },
    test: o.test === undefined ? undefined : c.metrics(o.test, 'test'),
    evaluation: o.evaluation === undefined ? undefined : { skipped: c.str(c.obj(o.evaluation, 'evaluation', ['skipped']).skipped, 'evaluation.skipped') },
    seconds: {
      total: c.num(seconds.total, 'seconds.total', 0),
      setup: c.num(seconds.setup, 'seconds.setup', 0),
      training: c.num(seconds.training, 'seconds.training', 0),
      perRound: c.num(seconds.perRound, 'seconds.perRound', 0),
    },
    bytes: c.bytes(o.bytes, 'bytes'),
    parties: list(o.parties, 'parties').map((v, m) => {
      const f = `parties[${m}]`;
      const p = c.obj(v, f, ['id', 'features', 'rows', 'testRows']);
      return { id: c.name(p.id, `${f}.id`), features: c.int(p.features, `${f}.features`, 1), rows: c.int(p.rows, `${f}.rows`), testRows: c.int(p.testRows, `${f}.testRows`) };
    }),
    rows: { train: rowsTrain, test: c.int(rows.test, 'rows.test') },
    droppedRows: c.int(o.droppedRows, 'droppedRows'),
    droppedTestRows: c.int(o.droppedTestRows, 'droppedTestRows'),
    alignment: (() => {
      const a = c.obj(o.alignment, 'alignment', ['method', 'group', 'hashToCurve', 'labelIds', 'seconds']);
      if (a.method !== ALIGNMENT_METHOD.method) c.bad('alignment.method', `is ${show(a.method)}, expected '${ALIGNMENT_METHOD.method}'`);
      const ids = c.obj(a.labelIds, 'alignment.labelIds', ['train', 'test']);
      return {
        method: ALIGNMENT_METHOD.method,
        group: c.str(a.group, 'alignment.group'),
        hashToCurve: c.str(a.hashToCurve, 'alignment.hashToCurve'),
        labelIds: { train: c.int(ids.train, 'alignment.labelIds.train'), test: c.int(ids.test, 'alignment.labelIds.test') },
        seconds: a.seconds === null ? null : c.num(a.seconds, 'alignment.seconds', 0),
      };
    })(),
    classes: classes && { negative: c.str(classes.negative, 'classes.negative'), positive: c.str(classes.positive, 'classes.positive') },
    oneShot: oneShot && {
      activeParty: oneShot.activeParty === null ? null : c.name(oneShot.activeParty, 'oneShot.activeParty'),
      weights: Object.fromEntries(Object.entries(c.obj(oneShot.weights, 'oneShot.weights', [], 'any')).map(([k, v]) => [c.name(k, 'oneShot.weights key'), c.num(v, `oneShot.weights.${k}`)])),
      intercept: oneShot.intercept === null ? null : c.num(oneShot.intercept, 'oneShot.intercept'),
      local: local && {
        party: c.name(local.party, 'oneShot.local.party'),
        objective: c.num(local.objective, 'oneShot.local.objective'),
        ...(local.test === undefined ? {} : { test: c.metrics(local.test, 'oneShot.local.test') }),
      },
      ...(oneShot.baseline === undefined ? {} : { baseline: c.metrics(oneShot.baseline, 'oneShot.baseline') }),
      warnings: list(oneShot.warnings, 'oneShot.warnings').map((w, k) => c.str(w, `oneShot.warnings[${k}]`)),
    },
    research: o.research === undefined ? undefined : c.str(o.research, 'research'),
    peakMemoryBytes: c.num(o.peakMemoryBytes, 'peakMemoryBytes', 0),
    labelPrivacy,
    privacy: list(o.privacy, 'privacy').map((v, m) => {
      const f = `privacy[${m}]`;
      const q = c.obj(v, f, ['party', 'mechanism', 'epsilon', 'delta', 'rounds', 'sigma', 'sensitivity', 'accountant', 'seeded', 'epsilonSpent']);
      return {
        party: c.name(q.party, `${f}.party`),
        mechanism: c.oneOf(q.mechanism, `${f}.mechanism`, MECHANISMS),
        epsilon: q.epsilon === null ? null : c.positive(q.epsilon, `${f}.epsilon`),
        delta: q.delta === null ? null : c.positive(q.delta, `${f}.delta`),
        rounds: c.int(q.rounds, `${f}.rounds`, 1),
        sigma: c.num(q.sigma, `${f}.sigma`, 0),
        sensitivity: c.num(q.sensitivity, `${f}.sensitivity`, 0),
        accountant: q.accountant === null ? null : c.oneOf(q.accountant, `${f}.accountant`, ACCOUNTANT_NAMES),
        seeded: c.bool(q.seeded, `${f}.seeded`),
        epsilonSpent: c.num(q.epsilonSpent, `${f}.epsilonSpent`, 0),
      };
    }),
  });
}

/** The lines of a trace.jsonl (blank lines skipped), each rebuilt by parseTraceLine. */
export function readTrace(path: string): TraceLine[] {
  const out: TraceLine[] = [];
  readText(path, 'trace')
    .split('\n')
    .forEach((text, i) => {
      if (text.trim() !== '') out.push(parseTraceLine(parseJson(text, path, i + 1), path, i + 1));
    });
  return out;
}

/** Rebuild one trace line (as either training loop writes it) from a parsed value, checking every field. */
export function parseTraceLine(value: unknown, path: string, line: number): TraceLine {
  const c = checkers(path, line, 'trace line');
  const o = c.obj(value, '', ['round', 'objective', 'seconds', 'roundSeconds', 'bytes'], ['primal', 'dual', 'rho', 'epoch', 'lr', 'steps', 'epsilonSpent', 'solver', 'test']);
  const opt = <T>(k: string, f: (v: unknown, field: string) => T): T | undefined => (o[k] === undefined ? undefined : f(o[k], k));
  return defined({
    round: c.int(o.round, 'round', 1),
    objective: c.num(o.objective, 'objective'),
    seconds: c.num(o.seconds, 'seconds', 0),
    roundSeconds: c.num(o.roundSeconds, 'roundSeconds', 0),
    bytes: c.bytes(o.bytes, 'bytes'),
    primal: opt('primal', (v, f) => c.num(v, f, 0)),
    dual: opt('dual', (v, f) => c.num(v, f, 0)),
    rho: opt('rho', c.positive),
    epoch: opt('epoch', (v, f) => c.int(v, f, 1)),
    lr: opt('lr', c.positive),
    steps: opt('steps', (v, f) => c.int(v, f)),
    epsilonSpent: opt('epsilonSpent', (v, f) => c.byParty(v, f, (x, g) => c.num(x, g, 0))),
    solver: opt('solver', (v, f) =>
      c.byParty(v, f, (x, g) => {
        const s = c.obj(x, g, ['iterations', 'residual']);
        return { iterations: c.int(s.iterations, `${g}.iterations`), residual: c.num(s.residual, `${g}.residual`, 0) };
      }),
    ),
    test: opt('test', c.metrics),
  });
}
