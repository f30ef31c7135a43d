// A one-shot job: the passive party's one release, and the active party's combined fit.
import { createHash } from 'node:crypto';
import { predictScores } from '@admm-share/core';
import { type Fit, ProtocolError } from '@admm-share/protocol';
import { fitInThread } from '../privacy/release.js';
import type { FinalModel } from '../scoring/model-file.js';
import { type Model, type Outcome, type SessionEnv, type SessionState, expectPhase, refuseNonFinite, reply } from './state.js';

/**
 * one-shot, passive: the one release (drawn once, then the same vector on every repeat: see
 * Privacy.scoreRelease), with the clipped test scores when the party releases them.
 */
export function onRelease(s: SessionState, env: SessionEnv): Outcome {
  expectPhase(s, 'training');
  const m = s.model;
  if (m?.kind !== 'passive') throw new ProtocolError('unexpected', 'release, but this party is not a passive party of a one-shot job');
  refuseNonFinite(() => 'release: the passive fit overflowed', m.passive.scores);
  // A repeat (after a rejoin or a restart) sends the stored vector: no new draw, no new spend.
  const again = env.privacy.releases > 0;
  const scores = env.privacy.scoreRelease(m.passive.scores, m.rows, env.ledgerPath, s.jobId!);
  const testScores = s.testX ? m.passive.scoresFor(s.testX) : new Float64Array(0);
  s.round = 1;
  s.current = true;
  env.log.info({ rows: scores.length, testRows: testScores.length, epsilonSpent: env.privacy.spent, again, cgIterations: m.passive.iterations }, 'scores released');
  return reply({ type: 'released', jobId: s.jobId!, scores, testScores, epsilonSpent: env.privacy.spent });
}

/**
 * one-shot, active: fit the combined model on the releases (and the local-only one) in a
 * worker thread, and score the test rows with both. The answer goes out on the connection
 * the request came on, or not at all (after a rejoin the coordinator asks again, and the
 * repeated request waits for the same fit).
 */
export function onFit(s: SessionState, env: SessionEnv, msg: Fit): Outcome {
  expectPhase(s, 'training');
  const m = s.model;
  if (m?.kind !== 'active') throw new ProtocolError('unexpected', 'fit, but this party is not the active party of a one-shot job');
  const n = m.D.rows;
  const releases = msg.parties.map((party, j) => ({ party, scores: msg.releases.slice(j * n, (j + 1) * n), sigma: msg.sigmas[j] }));
  const key = createHash('sha256').update(JSON.stringify([msg.parties, Array.from(msg.sigmas), n])).update(new Uint8Array(msg.releases.buffer, msg.releases.byteOffset, msg.releases.byteLength)).digest('hex');
  if (s.fitWork?.key !== key) {
    const t0 = performance.now();
    const fit = fitInThread({ D: m.D, y: m.y, releases, loss: m.loss, labelFlip: m.labelFlip, classWeights: m.classWeights, lambda: m.lambda });
    void fit.then((f) => env.log.info({ fitMs: Math.round(performance.now() - t0), denoising: f.denoising }, 'combined model fitted'), () => undefined);
    s.fitWork = { key, fit };
  }
  const connection = s.connection;
  const work = s.fitWork.fit.then((fit): Outcome => {
    if (s.connection !== connection || s.model !== m) return reply();
    m.fit = { ...fit, parties: msg.parties };
    const test = (coefficients: Float64Array, intercept: number) => (s.testX ? predictScores(s.testX, coefficients, intercept) : new Float64Array(0));
    const testScores = test(fit.coefficients, fit.intercept);
    const localTestScores = test(fit.local.coefficients, fit.local.intercept);
    refuseNonFinite(() => 'fit: the combined model overflowed', testScores, fit.objective);
    refuseNonFinite(() => 'fit: the local model overflowed', localTestScores, fit.local.objective);
    refuseNonFinite(() => 'fit: the weights overflowed', fit.weights);
    s.round = 1;
    s.current = true;
    return reply({ type: 'fitted', jobId: s.jobId!, weights: fit.weights, objective: fit.objective, localObjective: fit.local.objective, testScores, localTestScores });
  });
  return { kind: 'later', work };
}

/** What a one-shot party writes: its coefficients, and how they are applied and combined. */
export function oneShotModel(m: Extract<Model, { kind: 'passive' | 'active' }>): FinalModel {
  if (m.kind === 'passive') {
    const p = m.passive;
    return { coefficients: p.x, intercept: null, rows: p.scores.length, scoreClip: p.bounds.clip, oneShot: { role: 'passive', score: 'clip(x . row, -clip, clip), rows scaled to norm <= 1', ...p.bounds } };
  }
  const f = m.fit!;
  return {
    coefficients: f.coefficients,
    intercept: f.intercept,
    rows: m.D.rows,
    oneShot: {
      role: 'active',
      score: "x . row + intercept + sum over passive parties of weight x that party's clipped score (rows scaled to norm <= 1)",
      weights: Object.fromEntries(f.parties.map((p, j) => [p, f.weights[j]])),
      denoising: f.denoising,
      ...(m.labelFlip > 0 ? { labelFlip: m.labelFlip, loss: 'logistic corrected for labels flipped with probability labelFlip (label privacy at the coordinator)' } : {}),
      ...(m.classWeights ? { classWeights: m.classWeights } : {}),
      local: { coefficients: Array.from(f.local.coefficients), intercept: f.local.intercept, objective: f.local.objective },
    },
  };
}
