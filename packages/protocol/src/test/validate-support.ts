// Fixtures of the validator tests: a base message of every type valid under a full context, and
// rejects/accepts, which patch one and check it as an object and after the wire.
import assert from 'node:assert/strict';
import { CloseCodes, type CloseKind, MAX_SHARE_MAGNITUDE, decode, encode, type Message, ProtocolError, validateCoordinatorMessage, validatePartyMessage, type ValidationContext } from '../index.js';
import { NO_PRIVACY } from './support.js';

export type Obj = Record<string, unknown>;
export type Validator = (value: unknown, ctx?: ValidationContext) => Message;

export const JOB = 'job-1';
export const N = 4;
export const N_TEST = 3;
export const ROUND = 7;
export const FILE_ROWS = { train: 10, test: 5 };
export const DECLARED = { train: 3, test: 2 };
export const LABEL_IDS = { train: 4, test: 1 };

/** A context with every field set, matching the base messages below. */
export const CTX: ValidationContext = { jobId: JOB, n: N, nTest: N_TEST, round: ROUND, declaredRows: DECLARED, labelIds: LABEL_IDS, maxLabelIds: 6, fileRows: FILE_ROWS, passive: 1, lookupIds: 2 };
export const DIGEST = 'ab'.repeat(32);

/** Fresh valid messages (as plain objects), each accepted by its validator under CTX. */
export function base(): Record<string, Obj> {
  return {
    hello: { type: 'hello', protocolVersion: 1, partyId: 'party-A', jobId: JOB, features: 5, trainRows: 10, testRows: 5, proof: new Uint8Array(32).fill(1), noise: true, model: null },
    challenge: { type: 'challenge', protocolVersion: 4, nonce: new Uint8Array(32).fill(9) },
    ids: { type: 'ids', jobId: JOB, set: 'train', points: new Uint8Array(32 * DECLARED.train).fill(9), labelPoints: new Uint8Array(32 * LABEL_IDS.train).fill(7) },
    ready: { type: 'ready', jobId: JOB, privacy: NO_PRIVACY },
    exhausted: { type: 'exhausted', jobId: JOB, round: ROUND, epsilonSpent: 0.75 },
    batchScores: { type: 'batchScores', jobId: JOB, step: 7, scores: new Float64Array([0.5, -1, 2]) },
    sgd: { type: 'sgd', jobId: JOB, step: 7, epoch: 2, lr: 0.5, gradient: new Float64Array([0.1, -0.2, 0.3]), rows: new Uint32Array([3, 0, 2]), full: false },
    share: { type: 'share', jobId: JOB, round: ROUND, share: new Float64Array([1, -0, 1e-300, -1.5]), penaltySq: 2.5, epsilonSpent: 0, solver: { iterations: 7, residual: 3e-13 } },
    scores: { type: 'scores', jobId: JOB, round: ROUND, scores: new Float64Array([0.5, -2, MAX_SHARE_MAGNITUDE]) },
    welcome: { type: 'welcome', protocolVersion: 1, jobId: JOB },
    psi: { type: 'psi', jobId: JOB, set: 'train', total: 5, at: 0, points: new Uint8Array(32 * 5).fill(3) },
    setup: { type: 'setup', jobId: JOB, trainRows: new Uint32Array([9, 0, 4, 2]), testRows: new Uint32Array([4, 1, 0]), testFrom: 'test', lambda: 0.1, loss: 'logistic', rounds: 100, rho: 0.5, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 },
    round: { type: 'round', jobId: JOB, round: ROUND, rho: 1.5, c: new Float64Array([0, 1, 2, 3]) },
    resume: {
      type: 'resume',
      jobId: JOB,
      round: ROUND,
      rho: 1.5,
      c: new Float64Array([0, 1, 2, 3]),
      previousShare: new Float64Array([-1, 0.5, 1e-300, 2]),
      share: new Float64Array([-0, 1, -2.5, 1e300]),
    },
    evaluate: { type: 'evaluate', jobId: JOB, round: ROUND },
    release: { type: 'release', jobId: JOB },
    lookup: { type: 'lookup', jobId: JOB, points: new Uint8Array(32 * 3).fill(5) },
    found: { type: 'found', jobId: JOB, points: new Uint8Array(32 * 2).fill(6) },
    score: { type: 'score', jobId: JOB, rows: new Uint32Array([2, 0, 7]) },
    partial: { type: 'partial', jobId: JOB, scores: new Float64Array(N).fill(-0.5), epsilonSpent: 0.25 },
    released: { type: 'released', jobId: JOB, scores: new Float64Array([0.6, -0.6, 3.5, -1e-300]), testScores: new Float64Array([0.1, 0, -0.6]), epsilonSpent: 2 },
    fit: { type: 'fit', jobId: JOB, parties: ['party-B', 'party-C'], releases: new Float64Array(2 * N).fill(0.25), sigmas: new Float64Array([2.5, 0]) },
    fitted: { type: 'fitted', jobId: JOB, weights: new Float64Array([1.5]), objective: 0.33, localObjective: 0.35, testScores: new Float64Array([1, 2, 3]), localTestScores: new Float64Array([-1, 0, 1]) },
    done: {
      type: 'done',
      jobId: JOB,
      reason: 'converged',
      rounds: ROUND,
      objective: 12.5,
      params: { variant: 'jacobi', rho: 1.5, alpha: 1.6, lambda: 0.1, loss: 'logistic' },
      classes: { negative: '<=50K', positive: '>50K' },
    },
  };
}

export const PARTY_TYPES = ['batchScores', 'exhausted', 'hello', 'ids', 'ready', 'share', 'scores', 'released', 'fitted', 'found', 'partial'];
export const COORD_TYPES = ['welcome', 'psi', 'setup', 'resume', 'round', 'evaluate', 'done', 'lookup', 'score'];

export function validatorFor(type: string): Validator {
  return PARTY_TYPES.includes(type) ? validatePartyMessage : validateCoordinatorMessage;
}

/** Through the wire: the validators see what `decode` produces. */
export function wire(value: unknown): unknown {
  return decode(encode(value as Message));
}

/** Assert that `fn` throws a ProtocolError of `kind` (and the matching close code). */
export function throwsKind(fn: () => unknown, kind: CloseKind, label: string, message?: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  if (caught === undefined) assert.fail(`${label}: no error thrown, expected ProtocolError '${kind}'`);
  assert.ok(caught instanceof ProtocolError, `${label}: threw ${(caught as Error)?.constructor?.name}: ${(caught as Error)?.message}`);
  assert.equal(caught.kind, kind, `${label}: kind (message: ${caught.message})`);
  assert.equal(caught.closeCode, CloseCodes[kind].code, `${label}: closeCode`);
  if (message) assert.match(caught.message, message, label);
}

/**
 * The base message of `type` with `patch` applied (a value of `undefined` deletes the key),
 * checked both as a plain object and after an encode/decode round trip.
 */
export function rejects(type: string, patch: Obj, kind: CloseKind, ctx: ValidationContext = CTX, message?: RegExp): void {
  const msg = { ...base()[type], ...patch };
  for (const [k, v] of Object.entries(patch)) if (v === undefined) delete msg[k];
  const validate = validatorFor(type);
  const label = `${type} ${describePatch(patch)}`;
  throwsKind(() => validate(msg, ctx), kind, `${label} (object)`, message);
  throwsKind(() => validate(wire(msg), ctx), kind, `${label} (wire)`, message);
}

/** The same patch is accepted: boundaries right next to the rejected values. */
export function accepts(type: string, patch: Obj, ctx: ValidationContext = CTX): Message {
  const msg = { ...base()[type], ...patch };
  const validate = validatorFor(type);
  validate(msg, ctx);
  return validate(wire(msg), ctx);
}

export function describePatch(patch: Obj): string {
  return JSON.stringify(patch, (_k, v) =>
    ArrayBuffer.isView(v) ? `${v.constructor.name}(${(v as Float64Array).length})` : typeof v === 'number' && !Number.isFinite(v) ? String(v) : v,
  );
}
