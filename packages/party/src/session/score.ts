// Online scoring with a trained model (admm-party predict): a lookup of the coordinator's
// blinded ids, and this party's part of the scores of the rows it holds.
import { type Lookup, type Score, ProtocolError } from '@admm-share/protocol';
import { type Outcome, type SessionEnv, type SessionState, expectPhase, refuseNonFinite, reply } from './state.js';

function scoringEnv(env: SessionEnv, what: string): NonNullable<SessionEnv['scoring']> {
  if (!env.scoring) throw new ProtocolError('unexpected', `${what}, but this party trains (it scores only when started with admm-party predict)`);
  return env.scoring;
}

/**
 * Online scoring, one request: the coordinator's blinded ids blinded again with this party's
 * key, so that the coordinator finds which of them this party holds (it has this party's own
 * points from the first psi). The party learns how many ids were asked, nothing about them.
 */
export function onLookup(s: SessionState, env: SessionEnv, msg: Lookup): Outcome {
  expectPhase(s, 'setup');
  scoringEnv(env, 'lookup');
  if (!s.psiSets.has('train')) throw new ProtocolError('unexpected', 'lookup before psi');
  const connection = s.connection;
  const work = env.psi.blindAgain(msg.points).then((points): Outcome => (s.connection === connection ? reply({ type: 'found', jobId: s.jobId!, points }) : reply()));
  return { kind: 'later', work };
}

/** Score the rows named by their position in this party's shuffled ids: this party's part only. */
export function onScore(s: SessionState, env: SessionEnv, msg: Score): Outcome {
  expectPhase(s, 'setup');
  const { scorer, ledger } = scoringEnv(env, 'score');
  if (!s.psiSets.has('train')) throw new ProtocolError('unexpected', 'score before psi');
  const rows = env.psi.fileRows('train', msg.rows);
  const scores = scorer.score(rows, ledger, s.jobId!);
  refuseNonFinite(() => 'score: the scores overflowed', scores);
  s.scored++;
  env.log.info({ rows: rows.length, request: s.scored, epsilonSpent: scorer.privacy?.spent ?? 0 }, 'rows scored');
  return reply({ type: 'partial', jobId: s.jobId!, scores, epsilonSpent: scorer.privacy?.spent ?? 0 });
}
