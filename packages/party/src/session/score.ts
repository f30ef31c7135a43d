// Online scoring with a trained model (admm-party predict): a lookup of the coordinator's
// blinded ids, and this party's part of the scores of the rows it holds.
import { type Lookup, type Score, POINT_BYTES, ProtocolError } from '@admm-share/protocol';
import { ProbeRefused } from '../intersection/probe-budget.js';
import { type Outcome, type SessionEnv, type SessionState, expectPhase, refuseNonFinite, reply } from './state.js';

function scoringEnv(env: SessionEnv, what: string): NonNullable<SessionEnv['scoring']> {
  if (!env.scoring) throw new ProtocolError('unexpected', `${what}, but this party trains (it scores only when started with admm-party predict)`);
  return env.scoring;
}

/**
 * Online scoring, one request: the coordinator's blinded ids blinded again with this party's
 * key, so that the coordinator finds which of them this party holds (it has this party's own
 * points from the first psi). The party learns how many ids were asked, nothing about them;
 * it logs that number with its running totals and refuses a lookup over its caps
 * (intersection/probe-budget.ts) with a `found` that says why and carries no points.
 */
export function onLookup(s: SessionState, env: SessionEnv, msg: Lookup): Outcome {
  expectPhase(s, 'setup');
  scoringEnv(env, 'lookup');
  if (!s.psiSets.has('train')) throw new ProtocolError('unexpected', 'lookup before psi');
  const ids = msg.points.length / POINT_BYTES;
  s.lookups++;
  if (env.probe) {
    // Refused before any blinding: this request fails at the coordinator, the connection stays.
    try {
      const c = env.probe.lookup(ids, s.connection);
      env.log.info({ ids, lookup: s.lookups, connectionIds: c.connectionIds, idsToday: c.today, cap: c.cap }, 'ids looked up');
    } catch (err) {
      if (!(err instanceof ProbeRefused)) throw err;
      env.log.warn({ ...err.fields, lookup: s.lookups, coordinator: env.probe.coordinator }, `membership probing: ${err.message}`);
      return reply({ type: 'found', jobId: s.jobId!, points: new Uint8Array(0), refused: err.message });
    }
  } else env.log.info({ ids, lookup: s.lookups }, 'ids looked up');
  const connection = s.connection;
  const work = env.psi.blindAgain(msg.points).then((points): Outcome => (s.connection === connection ? reply({ type: 'found', jobId: s.jobId!, points }) : reply()));
  return { kind: 'later', work };
}

/** Score the rows named by their position in this party's shuffled ids: this party's part only. */
export function onScore(s: SessionState, env: SessionEnv, msg: Score): Outcome {
  expectPhase(s, 'setup');
  const { scorer, ledger } = scoringEnv(env, 'score');
  if (!s.psiSets.has('train')) throw new ProtocolError('unexpected', 'score before psi');
  env.psi.settle();
  const rows = env.psi.fileRows('train', msg.rows);
  const scores = scorer.score(rows, ledger, s.jobId!);
  refuseNonFinite(() => 'score: the scores overflowed', scores);
  s.scored++;
  env.log.info({ rows: rows.length, request: s.scored, epsilonSpent: scorer.privacy?.spent ?? 0 }, 'rows scored');
  return reply({ type: 'partial', jobId: s.jobId!, scores, epsilonSpent: scorer.privacy?.spent ?? 0 });
}
