// The checks of every message the coordinator sends, as a party receives it.
import { ProtocolError } from './errors.js';
import { type Challenge, type Classes, type ClassWeights, type CoordinatorMessage, type Done, MAX_SHARE_MAGNITUDE, NAME_RE, NONCE_BYTES, POINT_BYTES, PSI_CACHE_ID_RE, PSI_PART_POINTS } from './messages.js';
import { ALGORITHMS, LOSSES, type LossName, ROLES, SAMPLE_SETS, type SampleSet, STOP_REASONS, type StopReason } from './names.js';
import { invalid, asObject, describe, exactKeys, str, oneOf, count, finite, vector, vectorOrParts, part, bool, bytes, pointList, rowIndex, job, round, typeOf, type ValidationContext, ECHO_CHARS } from './validate-fields.js';

/** Longest raw label name `done.classes` may carry. */
const MAX_CLASS_CHARS = 256;

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
      exactKeys(o, type, 'psiCache' in o ? ['type', 'protocolVersion', 'nonce', 'psiCache'] : ['type', 'protocolVersion', 'nonce']);
      const nonce = bytes(o, type, 'nonce');
      if (nonce.length !== NONCE_BYTES) invalid(`challenge.nonce: ${nonce.length} bytes, expected ${NONCE_BYTES}`);
      const challenge: Challenge = { type, protocolVersion: count(o, type, 'protocolVersion'), nonce };
      if ('psiCache' in o) challenge.psiCache = str(o, type, 'psiCache', PSI_CACHE_ID_RE);
      return challenge;
    }
    case 'welcome': {
      exactKeys(o, type, ['type', 'protocolVersion', 'jobId']);
      return { type, protocolVersion: count(o, type, 'protocolVersion'), jobId: job(o, type, ctx) };
    }
    case 'psi': {
      exactKeys(o, type, 'cache' in o ? ['type', 'jobId', 'set', 'total', 'at', 'points', 'cache'] : ['type', 'jobId', 'set', 'total', 'at', 'points']);
      const jobId = job(o, type, ctx);
      const set: SampleSet = oneOf(o, type, 'set', SAMPLE_SETS);
      const total = count(o, type, 'total');
      const at = count(o, type, 'at');
      const points = pointList(o, type, 'points', undefined, () => '');
      const n = points.length / POINT_BYTES;
      const cache = 'cache' in o ? psiCacheUse(o.cache) : undefined;
      // A warm cache sends only the label ids the party has not blinded before: maybe none.
      if (total === 0 && !ctx.emptyPsi && !cache?.warm) invalid(`psi.points: no ${set} label ids`);
      if (ctx.maxLabelIds !== undefined && total > ctx.maxLabelIds)
        invalid(`psi.total: ${total} ${set} label ids, more than this party accepts (${ctx.maxLabelIds}, admm-party --max-label-factor)`);
      if (n > PSI_PART_POINTS) invalid(`psi.points: ${n} points in one message, more than ${PSI_PART_POINTS}`);
      if (n === 0 && total > 0) invalid(`psi.points: empty, in a set of ${total} label ids`);
      if (at + n > total) invalid(`psi.points: label ids ${at} to ${at + n - 1}, but the set has ${total}`);
      return cache ? { type, jobId, set, total, at, points, cache } : { type, jobId, set, total, at, points };
    }
    case 'setup': {
      const keys = ['type', 'jobId', 'trainRows', 'testRows', 'testFrom', 'lambda', 'loss', 'rounds', 'rho', 'parties', 'algorithm', 'role', 'labels', 'labelFlip'];
      exactKeys(o, type, 'classWeights' in o ? [...keys, 'classWeights'] : keys);
      const jobId = job(o, type, ctx);
      const trainRows = rowIndex(o, type, 'trainRows', undefined, ctx.fileRows?.train);
      if (trainRows.length === 0) invalid('setup.trainRows: no training rows');
      const testFrom: SampleSet = oneOf(o, type, 'testFrom', SAMPLE_SETS);
      const testRows = rowIndex(o, type, 'testRows', undefined, ctx.fileRows?.[testFrom]);
      if (testFrom === 'train') heldOut(trainRows, testRows);
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
        testFrom,
        lambda,
        loss,
        rounds: count(o, type, 'rounds', 1),
        rho: finite(o, type, 'rho', true),
        parties: count(o, type, 'parties', 1),
        algorithm,
        role: oneOf(o, type, 'role', ROLES),
        labels,
        labelFlip,
        ...('classWeights' in o ? { classWeights: classWeights(o.classWeights, loss) } : {}),
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

/** setup.classWeights: two positive finite weights, and only with the logistic loss (the only one weighted by class). */
function classWeights(v: unknown, loss: LossName): ClassWeights {
  const c = asObject(v);
  exactKeys(c, 'setup.classWeights', ['negative', 'positive']);
  const w = { negative: finite(c, 'setup.classWeights', 'negative', true), positive: finite(c, 'setup.classWeights', 'positive', true) };
  if (loss !== 'logistic') invalid(`setup.classWeights: class weights with the ${loss} loss (only the logistic loss is weighted by class)`);
  return w;
}

/**
 * Test rows taken from the training file are held out of training: a row both trained on and
 * scored as a test row would make the test metrics flatter the model.
 */
function heldOut(trainRows: Uint32Array, testRows: Uint32Array): void {
  // Sorted copies, merged: no array sized by an index the peer chose.
  const a = trainRows.slice().sort();
  const b = testRows.slice().sort();
  for (let i = 0, j = 0; i < a.length && j < b.length; ) {
    if (a[i] < b[j]) i++;
    else if (a[i] > b[j]) j++;
    else invalid(`setup.testRows[${testRows.indexOf(b[j])}] = ${b[j]} is also a training row (testFrom 'train': test rows are held out of training)`);
  }
}

function psiCacheUse(value: unknown): { id: string; warm: boolean } {
  const c = asObject(value);
  exactKeys(c, 'psi.cache', ['id', 'warm']);
  return { id: str(c, 'psi.cache', 'id', PSI_CACHE_ID_RE), warm: bool(c, 'psi.cache', 'warm') };
}
