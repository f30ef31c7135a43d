// The checks of every message a party sends, as the coordinator receives it.
import { ProtocolError } from './errors.js';
import { DIGEST_RE, type Hello, MAX_PENALTY_SQ, MAX_REFUSAL_CHARS, MAX_SHARE_MAGNITUDE, type ModelRef, NAME_RE, type PartyMessage, PROOF_BYTES, PSI_CACHE_ID_RE, type PrivacyInfo, type SolverStats } from './messages.js';
import { ACCOUNTANT_NAMES, MECHANISMS, SAMPLE_SETS, type SampleSet } from './names.js';
import { invalid, asObject, exactKeys, str, oneOf, count, finite, vector, vectorOrParts, part, bool, bytes, pointList, job, round, typeOf, type ValidationContext, ECHO_CHARS } from './validate-fields.js';

/** share.solver: null, or a conjugate gradient solve's iterations and final relative residual. */
function solverStats(v: unknown): SolverStats | null {
  if (v === null) return null;
  const o = asObject(v);
  exactKeys(o, 'share.solver', ['iterations', 'residual']);
  const residual = finite(o, 'share.solver', 'residual');
  if (residual < 0) invalid(`share.solver.residual: ${residual} is negative`);
  return { iterations: count(o, 'share.solver', 'iterations'), residual };
}

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
      const keys = ['type', 'protocolVersion', 'partyId', 'jobId', 'features', 'trainRows', 'testRows', 'proof', 'noise', 'model'];
      exactKeys(o, type, 'psiCache' in o ? [...keys, 'psiCache'] : keys);
      const jobId = o.jobId === null ? null : str(o, type, 'jobId', NAME_RE);
      const proof = o.proof === null ? null : bytes(o, type, 'proof');
      if (proof && proof.length !== PROOF_BYTES) invalid(`hello.proof: ${proof.length} bytes, expected ${PROOF_BYTES}`);
      const hello: Hello = {
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
      if ('psiCache' in o) hello.psiCache = o.psiCache === null ? null : str(o, type, 'psiCache', PSI_CACHE_ID_RE);
      return hello;
    }
    case 'found': {
      const refusal = 'refused' in o;
      exactKeys(o, type, ['type', 'jobId', 'points', ...(refusal ? ['refused'] : [])]);
      const jobId = job(o, type, ctx);
      if (refusal) {
        const refused = str(o, type, 'refused');
        if (refused === '' || refused.length > MAX_REFUSAL_CHARS) invalid(`found.refused: expected a reason of 1 to ${MAX_REFUSAL_CHARS} characters, got ${refused.length}`);
        return { type, jobId, points: pointList(o, type, 'points', 0, (n) => `${n} points with a refusal, expected none`), refused };
      }
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
      const prepared = 'preparation' in p;
      exactKeys(p, t, ['mechanism', 'epsilon', 'delta', 'rounds', 'sigma', 'sensitivity', 'accountant', 'seeded', ...(prepared ? ['preparation'] : [])]);
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
      if (prepared) {
        const q = asObject(p.preparation);
        const tq = `${t}.preparation`;
        exactKeys(q, tq, ['mu', 'deltaThreshold']);
        privacy.preparation = { mu: finite(q, tq, 'mu', true), deltaThreshold: finite(q, tq, 'deltaThreshold') };
        if (privacy.preparation.deltaThreshold < 0 || privacy.preparation.deltaThreshold >= 1) invalid(`${tq}.deltaThreshold: expected a number in [0, 1)`);
        if (mechanism === 'none') invalid(`${tq}: a preparation spend without a mechanism`);
      }
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
