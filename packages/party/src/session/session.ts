// The job as this party sees it: the state machine driven by the coordinator's messages
// (challenge, welcome, psi, setup, resume, round, evaluate, sgd, release, fit, done; and when
// scoring new rows with a trained model, lookup and score), one small handler each.
// The state is a plain object passed to every handler; a handler returns what to send and
// what the connection should do next, so a session runs without a socket (tests feed it).
import { ConfigError, helloProof } from '@admm-share/core';
import { type Challenge, type Done, type Resume, type Round, type Sgd, type Welcome, type WholeCoordinatorMessage, PROTOCOL_VERSION, ProtocolError, assertNever, firstOutside } from '@admm-share/protocol';
import { modelRef } from '../scoring/model-file.js';
import { onPsi } from './intersect.js';
import { onFit, onRelease, oneShotModel } from './one-shot.js';
import { replayRound } from './replay.js';
import { onLookup, onScore } from './score.js';
import { onSetup } from './setup.js';
import { type Outcome, type SessionEnv, type SessionState, admmModel, checkVersion, expectPhase, maxAbs, refuseNonFinite, reply } from './state.js';

/** Apply one validated message to the session. */
export function handle(s: SessionState, env: SessionEnv, msg: WholeCoordinatorMessage): Outcome {
  switch (msg.type) {
    case 'challenge':
      return onChallenge(s, env, msg);
    case 'welcome':
      return onWelcome(s, env, msg);
    case 'psi':
      return onPsi(s, env, msg);
    case 'setup':
      return onSetup(s, env, msg);
    case 'resume':
      return onResume(s, env, msg);
    case 'round':
      return onRound(s, env, msg);
    case 'evaluate':
      return onEvaluate(s);
    case 'sgd':
      return onSgd(s, msg);
    case 'release':
      return onRelease(s, env);
    case 'fit':
      return onFit(s, env, msg);
    case 'done':
      return onDone(s, msg);
    case 'lookup':
      return onLookup(s, env, msg);
    case 'score':
      return onScore(s, env, msg);
    default:
      return assertNever(msg);
  }
}

function onChallenge(s: SessionState, env: SessionEnv, msg: Challenge): Outcome {
  expectPhase(s, 'challenge');
  checkVersion(msg.protocolVersion);
  s.phase = 'welcome';
  const jobId = s.jobId ?? env.jobId;
  const psiCache = env.psiCaches?.announce(msg.psiCache);
  s.psiCache = { name: msg.psiCache, announced: psiCache };
  // The points of the cache named are most likely wanted (a warm psi): they are begun now, while
  // the coordinator makes its label points.
  const named = env.psiCaches?.named(msg.psiCache);
  if (named) {
    env.psi.useCache(named);
    env.psi.prepare('train');
  }
  return reply({
    type: 'hello',
    protocolVersion: PROTOCOL_VERSION,
    partyId: env.partyId,
    jobId,
    features: env.features,
    trainRows: env.train.ids.length,
    testRows: env.test?.ids.length ?? 0,
    noise: env.scoring ? env.scoring.scorer.privacy !== undefined : env.privacy.enabled,
    model: env.scoring ? modelRef(env.scoring.scorer.model) : null,
    proof: env.token === undefined ? null : helloProof(env.token, msg.nonce, env.partyId, jobId),
    ...(psiCache === undefined ? {} : { psiCache }),
  });
}

function onWelcome(s: SessionState, env: SessionEnv, msg: Welcome): Outcome {
  expectPhase(s, 'welcome');
  checkVersion(msg.protocolVersion);
  if (s.jobId !== undefined && msg.jobId !== s.jobId) throw new ProtocolError('wrongJob', `rejoining job '${s.jobId}', the coordinator runs '${msg.jobId}'`);
  // --job is this party's own rule, not only the coordinator's: a coordinator that names another
  // job would otherwise get a new job's release, budget and label set from it.
  if (env.jobId !== null && msg.jobId !== env.jobId) throw new ProtocolError('wrongJob', `this party joins only job '${env.jobId}' (--job), the coordinator runs '${msg.jobId}'`);
  const rejoin = s.model !== undefined;
  // The first welcome of the process (a reconnection during the intersection is not a rejoin, but not the first either).
  const first = s.jobId === undefined;
  s.jobId = msg.jobId;
  s.phase = 'setup';
  env.log.info({ jobId: msg.jobId, rejoin }, 'joined job');
  // The party is in the job from here on: a broken connection is retried (link.markAnswered).
  if (env.scoring) return { kind: 'answered', messages: [] };
  if (env.privacy.enabled && first) env.privacy.restoreLedger(env.ledgerPath, msg.jobId);
  return { kind: 'answered', messages: [] };
}

/**
 * After a rejoin's setup: continue after round k, the last round whose share the coordinator
 * holds from this party. Round k is replayed to recompute x (see replayRound); k = 0 is x = 0.
 * With privacy on, the ledger must have paid for k releases (a lost ledger is not guessed).
 */
function onResume(s: SessionState, env: SessionEnv, msg: Resume): Outcome {
  expectPhase(s, 'training');
  const x = admmModel(s, 'resume');
  const { privacy } = env;
  if (privacy.enabled && privacy.releases < msg.round)
    throw new ConfigError(`cannot resume at round ${msg.round}: this party's privacy ledger records only ${privacy.releases} releases (was ${env.ledgerPath} lost?)`);
  if (msg.round === 0) x.reset();
  else {
    replayRound(x, msg, env.privacy, env.log);
    // Nothing is sent here, but an overflowed x would be the model, or the next round's start.
    if (!Number.isFinite(x.intercept) || firstOutside(x.x) >= 0 || firstOutside(x.share) >= 0)
      throw new ProtocolError('invalid', `resume at round ${msg.round}: the replay overflowed (rho ${msg.rho}, |c| up to ${maxAbs(msg.c)}); refusing to continue with non-finite values`);
  }
  s.round = msg.round;
  s.current = true;
  s.previous = undefined;
  env.log.info({ round: msg.round }, 'resumed');
  return reply();
}

function onRound(s: SessionState, env: SessionEnv, msg: Round): Outcome {
  expectPhase(s, 'training');
  const x = admmModel(s, 'an ADMM round');
  if (msg.round !== s.round + 1) throw new ProtocolError('unexpected', `round ${msg.round} after round ${s.round}`);
  if (!s.current) throw new ProtocolError('unexpected', `round ${msg.round} before resume`);
  const { privacy } = env;
  const allowed = privacy.check(msg.round, msg.rho);
  if (!allowed.ok) {
    env.log.warn({ round: msg.round, epsilonSpent: privacy.spent }, `privacy: refusing round: ${allowed.why}`);
    return reply({ type: 'exhausted', jobId: s.jobId!, round: msg.round, epsilonSpent: privacy.spent });
  }
  s.round = msg.round;
  // The last round's buffers are garbage now; at a large size, freed at once.
  s.garbage.round(msg.c.length);
  s.previous = { x: x.x.slice(), intercept: x.intercept };
  x.updateFromBroadcast(msg.c, msg.rho, privacy.bounds);
  // ||x_m||^2 depends on the data and is not noised, so with privacy on it is not sent
  // (the coordinator's objective then lacks the penalty; it is computed from noisy shares anyway).
  const penaltySq = privacy.enabled ? 0 : x.penaltySq();
  const overflowed = () => `round ${msg.round}: the update overflowed (rho ${msg.rho}, |c| up to ${maxAbs(msg.c)})`;
  // Checked before the release, so that the ledger pays for nothing that is not sent.
  refuseNonFinite(overflowed, x.share, penaltySq);
  privacy.release(x);
  // Without noise the release is the share itself, checked above.
  if (x.released !== x.share) refuseNonFinite(overflowed, x.released);
  if (privacy.enabled) privacy.saveLedger(env.ledgerPath, s.jobId!);
  // The solver's iterations depend on the data and are not noised either: sent without privacy only.
  const solver = x.form === 'cg' && !privacy.enabled ? { iterations: x.lastIterations, residual: x.lastResidual } : null;
  return reply({ type: 'share', jobId: s.jobId!, round: msg.round, share: x.released, penaltySq, epsilonSpent: privacy.spent, solver });
}

/** Test-set scores of the current model (the request's round is the coordinator's bookkeeping). */
function onEvaluate(s: SessionState): Outcome {
  expectPhase(s, 'training');
  if (!s.testX) throw new ProtocolError('unexpected', 'evaluate, but no test set was aligned');
  if (!s.current) throw new ProtocolError('unexpected', 'evaluate before resume');
  const m = s.model!;
  if (m.kind !== 'admm' && m.kind !== 'sgd') throw new ProtocolError('unexpected', 'evaluate in a one-shot job (its test scores come with the release and the fit)');
  const scores = m.kind === 'admm' ? m.x.scores(s.testX) : m.sgd.scores(s.testX);
  refuseNonFinite(() => `evaluate: the test scores of the model of round ${s.round} overflowed`, scores);
  return reply({ type: 'scores', jobId: s.jobId!, round: s.round, scores });
}

function onSgd(s: SessionState, msg: Sgd): Outcome {
  expectPhase(s, 'training');
  const m = s.model;
  if (m?.kind !== 'sgd') throw new ProtocolError('unexpected', 'an sgd step in an ADMM job');
  m.sgd.apply(m.rows, msg.gradient, msg.lr);
  m.step = msg.step;
  s.current = true;
  const overflowed = () => `sgd step ${msg.step}: the update overflowed (lr ${msg.lr}, |gradient| up to ${maxAbs(msg.gradient)})`;
  if (msg.full) {
    s.round = msg.epoch;
    m.rows = new Uint32Array(0);
    const share = m.sgd.share();
    const penaltySq = m.sgd.penaltySq();
    refuseNonFinite(overflowed, share, penaltySq);
    return reply({ type: 'share', jobId: s.jobId!, round: msg.epoch, share, penaltySq, epsilonSpent: 0, solver: null });
  }
  m.rows = msg.rows;
  const scores = m.sgd.scoresFor(msg.rows);
  refuseNonFinite(overflowed, scores);
  return reply({ type: 'batchScores', jobId: s.jobId!, step: msg.step, scores });
}

/**
 * The job is over after `rounds` rounds. If another party refused the last round, this
 * party's model goes back to the round before. Only a current model of exactly that round,
 * the result of at least one update (or of a replay of one), is written: a job that ended
 * after 0 rounds has no model, and x = 0 is not written as if it were one.
 */
function onDone(s: SessionState, msg: Done): Outcome {
  expectPhase(s, 'training');
  const m = s.model!;
  if (msg.rounds === 0) throw new ProtocolError('unexpected', 'the job ended after 0 rounds: no update was made, so there is no model; no model written');
  if (m.kind === 'passive' || m.kind === 'active') {
    if (!s.current || (m.kind === 'active' && !m.fit)) throw new ProtocolError('unexpected', `the job ended, but this party has not ${m.kind === 'active' ? 'fitted the combined model' : 'released its scores'}; no model written`);
    s.phase = 'done';
    return { kind: 'done', done: msg, model: oneShotModel(m) };
  }
  if (m.kind === 'admm' && msg.rounds === s.round - 1 && s.previous) {
    m.x.x.set(s.previous.x);
    m.x.intercept = s.previous.intercept;
    s.round = msg.rounds;
    s.previous = undefined;
  }
  if (!s.current || s.round !== msg.rounds)
    throw new ProtocolError(
      'unexpected',
      `the job ended after round ${msg.rounds}, but this party's model is ${
        !s.current ? 'not recomputed since it rejoined' : s.round === 0 ? 'that of round 0 (no update made yet)' : `that of round ${s.round}`
      }; no model written`,
    );
  const fit = m.kind === 'admm' ? m.x : m.sgd;
  if (!Number.isFinite(fit.intercept) || firstOutside(fit.x) >= 0)
    throw new ProtocolError('invalid', `the model of round ${s.round} has non-finite coefficients; no model written`);
  s.phase = 'done';
  if (m.kind === 'admm') void m.x.close(); // its threads: the model is final
  return { kind: 'done', done: msg, model: { coefficients: fit.x, intercept: fit.withIntercept ? fit.intercept : null, rows: fit.n } };
}
