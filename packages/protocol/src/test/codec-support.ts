// Helpers of the codec tests: messages of every type with awkward values, and a round trip that compares them bit for bit.
import assert from 'node:assert/strict';
import { decode, encode, MAX_SHARE_MAGNITUDE, type Message, validateCoordinatorMessage, validatePartyMessage, type ValidationContext } from '../index.js';
import { NO_PRIVACY, seeded } from './support.js';

export const randInt = (rnd: () => number, n: number): number => Math.floor(rnd() * n);

export const PARTY_TYPES = new Set(['hello', 'ids', 'ready', 'share', 'scores', 'exhausted', 'batchScores', 'released', 'fitted', 'found', 'partial']);

/** Awkward but finite values every vector cycles through. */
export const AWKWARD = [-0, 1e-300, 1e300, -1.5, 0, 5e-324, -5e-324, Number.MAX_VALUE, -Number.MAX_VALUE, 1 / 3, -1e-300, -1e300, 2 ** 53 + 2, Math.PI];

/** With `limit`, values beyond it become +-limit (a party's shares and scores are bounded: MAX_SHARE_MAGNITUDE). */
export function awkwardVector(length: number, seed = 1, limit = Infinity): Float64Array {
  const rnd = seeded(seed);
  const v = new Float64Array(length);
  for (let i = 0; i < length; i++) {
    // First the fixed awkward values, then a mix of awkward and random ones.
    v[i] = i < AWKWARD.length || i % 3 === 0 ? AWKWARD[i % AWKWARD.length] : (rnd() - 0.5) * 10 ** (randInt(rnd, 600) - 300);
    if (Math.abs(v[i]) > limit) v[i] = Math.sign(v[i]) * limit;
  }
  if (length === 1) v[0] = -0;
  return v;
}

export function bytesOf(a: ArrayBufferView): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

/** Same constructor, same length, bit-identical elements (so -0 stays -0). */
export function assertSameTyped(actual: unknown, expected: Float64Array | Uint32Array | Uint8Array, label: string): void {
  assert.ok(actual !== null && typeof actual === 'object', `${label}: not an object`);
  assert.equal((actual as object).constructor, expected.constructor, `${label}: constructor ${(actual as object).constructor?.name}`);
  const a = actual as typeof expected;
  assert.equal(a.length, expected.length, `${label}: length`);
  for (let i = 0; i < expected.length; i++) {
    if (!Object.is(a[i], expected[i])) assert.fail(`${label}[${i}]: got ${a[i]}, expected ${Object.is(expected[i], -0) ? '-0' : expected[i]}`);
  }
  assert.ok(bytesOf(a).equals(bytesOf(expected)), `${label}: bytes differ`);
}

/** Compare a validated message with the one that was encoded: typed arrays element-wise, the rest deeply. */
export function assertSameMessage(actual: Message, expected: Message): void {
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${expected.type}: keys`);
  for (const [k, v] of Object.entries(expected)) {
    const got = (actual as unknown as Record<string, unknown>)[k];
    if (ArrayBuffer.isView(v)) assertSameTyped(got, v as Float64Array, `${expected.type}.${k}`);
    else assert.deepEqual(got, v, `${expected.type}.${k}`);
  }
}

export function roundTrip(msg: Message, ctx: ValidationContext): Message {
  const bytes = encode(msg);
  assert.ok(bytes instanceof Uint8Array && bytes.length > 0, 'encode returns non-empty bytes');
  const decoded = decode(bytes);
  const validated = PARTY_TYPES.has(msg.type) ? validatePartyMessage(decoded, ctx) : validateCoordinatorMessage(decoded, ctx);
  assert.equal(validated.type, msg.type);
  assertSameMessage(validated, msg);
  return validated;
}

/** `rows` random byte strings of `width` bytes (16: a proof's half; 32: a PSI point), concatenated. */
export function hashes(rows: number, seed: number, width = 16): Uint8Array {
  const rnd = seeded(seed);
  const h = new Uint8Array(rows * width);
  for (let i = 0; i < h.length; i++) h[i] = randInt(rnd, 256);
  return h;
}

export function rowPermutation(length: number, fileRows: number, seed: number): Uint32Array {
  // `length` distinct rows out of `fileRows`, in shuffled order, always including the last row.
  const rnd = seeded(seed);
  const all = new Uint32Array(fileRows);
  for (let i = 0; i < fileRows; i++) all[i] = i;
  for (let i = fileRows - 1; i > 0; i--) {
    const j = randInt(rnd, i + 1);
    const t = all[i];
    all[i] = all[j];
    all[j] = t;
  }
  const out = all.slice(0, length);
  if (length > 0 && !out.includes(fileRows - 1)) out[0] = fileRows - 1;
  return out;
}

export const JOB = 'job-2024.01_a';
export const LENGTHS = [0, 1, 70000];

export function sampleMessages(): Message[] {
  return [
    { type: 'hello', protocolVersion: 1, partyId: 'p1', jobId: null, features: 3, trainRows: 10, testRows: 4, proof: null, noise: false, model: null },
    { type: 'ids', jobId: JOB, set: 'train', points: hashes(3, 1, 32), labelPoints: hashes(2, 5, 32) },
    { type: 'ready', jobId: JOB, privacy: NO_PRIVACY },
    { type: 'share', jobId: JOB, round: 4, share: awkwardVector(5, 1, MAX_SHARE_MAGNITUDE), penaltySq: 0.25, epsilonSpent: 0, solver: { iterations: 23, residual: 4.5e-13 } },
    { type: 'scores', jobId: JOB, round: 4, scores: awkwardVector(2, 1, MAX_SHARE_MAGNITUDE) },
    { type: 'welcome', protocolVersion: 1, jobId: JOB },
    { type: 'psi', jobId: JOB, set: 'train', total: 9, at: 5, points: hashes(4, 2, 32) },
    { type: 'setup', jobId: JOB, trainRows: new Uint32Array([4, 0, 2]), testRows: new Uint32Array([1]), testFrom: 'test', lambda: 0.1, loss: 'logistic', rounds: 100, rho: 0.5, parties: 2, algorithm: 'admm', role: 'passive', labels: new Float64Array(0), labelFlip: 0 },
    { type: 'round', jobId: JOB, round: 4, rho: 2, c: awkwardVector(5, 9) },
    { type: 'resume', jobId: JOB, round: 3, rho: 2, c: awkwardVector(5, 10), previousShare: awkwardVector(5, 11), share: awkwardVector(5, 12) },
    { type: 'resume', jobId: JOB, round: 0, rho: 2, c: new Float64Array(0), previousShare: new Float64Array(0), share: new Float64Array(0) },
    { type: 'evaluate', jobId: JOB, round: 4 },
    { type: 'done', jobId: JOB, reason: 'converged', rounds: 4, objective: 0.5, params: { variant: 'v', rho: 2, alpha: 1, lambda: 0.1, loss: 'squared' }, classes: null },
  ];
}
