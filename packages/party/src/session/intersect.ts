// The private set intersection's messages: the coordinator's label points, put together from
// their parts, blinded again with this party's key (intersection/psi.ts), answered with this
// party's own points.
import { createHash } from 'node:crypto';
import { peakMemoryBytes } from '@admm-share/runtime';
import { type Psi, type SampleSet, POINT_BYTES, ProtocolError, encodeIdsSource } from '@admm-share/protocol';
import { ProbeRefused } from '../intersection/probe-budget.js';
import { collectGarbage, collectYoungGarbage } from './gc.js';
import { type Outcome, type SessionEnv, type SessionState, expectPhase, reply } from './state.js';

/**
 * The coordinator's half of the private set intersection of one set: answered with this
 * party's points and the coordinator's blinded again (intersection/psi.ts), computed off the main thread.
 * Once per set and connection: a repeat is refused; across connections, the label sets
 * answered per job and the ids per day are this party's probe budget's (chargeLabelSet).
 */
export function onPsi(s: SessionState, env: SessionEnv, msg: Psi): Outcome {
  expectPhase(s, 'setup');
  const points = psiPoints(s, msg);
  // A part's message (1 MiB) and the reads it came in are garbage now: freed while young, so
  // that a set's 32 of them (a million ids) do not pile up while the rest come.
  if (!points) {
    collectYoungGarbage();
    return reply();
  }
  // Some of the reads and messages the points came in are old enough to outlive a
  // young-generation collection.
  collectGarbage();
  const labelIds = points.points.length / POINT_BYTES;
  const t0 = performance.now();
  const connection = s.connection;
  // Not `msg` in the closure: its points (32 bytes an id) are garbage once blinded again.
  const { set, jobId } = msg;
  env.psi.useCache(psiCache(s, env, points.cache));
  const digest = createHash('sha256').update(points.points).digest('hex');
  // A new cache after this party lost its own (corrupt, rotated, too old) is a new key of its own doing: one more set for the job is allowed.
  const ownNewKey = points.cache?.warm === false && env.psiCaches?.ownCacheLost === true;
  const probe = chargeLabelSet(env, jobId, set, digest, labelIds, ownNewKey);
  const work = env.psi.answer(set, points.points, digest).then((answer): Outcome => {
    const cost = env.psi.costs.get(set);
    if (cost?.cacheFull) env.log.warn({ set }, 'psi cache: full, the new ids are not kept (--psi-rotate starts a new cache)');
    env.log.info({ set, labelIds, ids: answer.points.length / POINT_BYTES, seconds: (performance.now() - t0) / 1000, ...cost, ...(points.cache ? { cache: points.cache.id, warm: points.cache.warm } : {}), ...probe, peakMemoryBytes: peakMemoryBytes() }, 'ids intersected (ECDH PSI)');
    if (s.connection !== connection) return reply();
    // Read from their temporary files a frame at a time, as the message is sent.
    const encoded = encodeIdsSource({ jobId, set }, answer.points, answer.labelPoints);
    return { kind: 'reply', messages: [], encoded: [encoded] };
  });
  return { kind: 'later', work };
}

/**
 * The label set checked against this party's probe budget before any blinding (a set answered
 * for this job already is free): a refusal is logged and closes the connection (4004).
 */
function chargeLabelSet(env: SessionEnv, jobId: string, set: SampleSet, digest: string, labelIds: number, ownNewKey: boolean): { labelSets: number; probeIdsToday: number; probeIdsCap: number } | undefined {
  if (!env.probe || labelIds === 0) return undefined;
  try {
    const c = env.probe.labelSet(jobId, set, digest, labelIds, ownNewKey);
    return { labelSets: c.sets, probeIdsToday: c.today, probeIdsCap: c.cap };
  } catch (err) {
    if (!(err instanceof ProbeRefused)) throw err;
    env.log.warn({ ...err.fields, coordinator: env.probe.coordinator }, `membership probing: psi refused: ${err.message}`);
    throw new ProtocolError('unexpected', err.message);
  }
}

/** The cache a `psi` names (undefined: none, this process's own key). */
function psiCache(s: SessionState, env: SessionEnv, cache: Psi['cache']) {
  if (!cache) return undefined;
  if (!env.psiCaches) throw new ProtocolError('unexpected', 'psi.cache: this party keeps no PSI cache (no --psi-cache)');
  return env.psiCaches.use(s.psiCache.name, s.psiCache.announced, cache);
}

/**
 * A set's label points once its last `psi` has come (undefined before): the points of a whole
 * set in one message as they are, else its messages' points put in order into one array; and
 * the cache they name (every part must name the same).
 */
function psiPoints(s: SessionState, msg: Psi): { points: Uint8Array; cache: Psi['cache'] } | undefined {
  const n = msg.points.length / POINT_BYTES;
  let parts = s.psiParts;
  if (msg.at === 0) {
    if (parts) throw new ProtocolError('invalid', `psi for the ${msg.set} set among the parts of the ${parts.set} set's (${parts.next} of ${parts.total} label ids came)`);
    if (s.psiSets.has(msg.set)) throw new ProtocolError('unexpected', `psi for the ${msg.set} set twice on one connection`);
    if (n === msg.total) {
      s.psiSets.add(msg.set);
      return { points: msg.points, cache: msg.cache };
    }
    parts = s.psiParts = { set: msg.set, total: msg.total, next: 0, points: new Uint8Array(msg.total * POINT_BYTES), cache: msg.cache };
  } else if (!parts || parts.set !== msg.set || parts.total !== msg.total || msg.at !== parts.next)
    throw new ProtocolError('invalid', `psi.at: label ids from ${msg.at} of ${msg.total} (${msg.set}), expected ${parts ? `${parts.next} of ${parts.total} (${parts.set})` : 'a first psi, at 0'}`);
  else if (parts.cache?.id !== msg.cache?.id || parts.cache?.warm !== msg.cache?.warm) throw new ProtocolError('invalid', `psi.cache: the parts of the ${msg.set} set name different caches`);
  parts.points.set(msg.points, msg.at * POINT_BYTES);
  parts.next = msg.at + n;
  if (parts.next < parts.total) return undefined;
  s.psiParts = undefined;
  s.psiSets.add(msg.set);
  return { points: parts.points, cache: parts.cache };
}
