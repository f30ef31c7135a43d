// The job as this party sees it: the state machine driven by the coordinator's messages
// (challenge, welcome, psi, setup, resume, round, evaluate, sgd, release, fit, done; and when
// scoring new rows with a trained model, lookup and score), one small handler each.
// The state is a plain object passed to every handler; a handler returns what to send and
// what the connection should do next, so a session runs without a socket (tests feed it).
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { type Csr, type Dense, type FeatureTable, type LossName, type PackedIds, ConfigError, DenseRows, SpilledCsr, WasmCsr, csrSelectRows, csrSelectRowsDense, helloProof, preferDense, predictScores } from '@admm-share/core';
import {
  type ByteSource,
  type Challenge,
  type WholeCoordinatorMessage,
  type Done,
  type Fit,
  type Lookup,
  type Role,
  type Score,
  type PartyMessage,
  type Psi,
  type Resume,
  type SampleSet,
  type Round,
  type Setup,
  type Sgd,
  type ValidationContext,
  type Welcome,
  POINT_BYTES,
  PROTOCOL_VERSION,
  ProtocolError,
  assertNever,
  encodeIdsSource,
  firstOutside,
} from '@admm-share/protocol';
import { RoundGarbage, collectGarbage, collectYoungGarbage } from './gc.js';
import { modelRef } from '../scoring/model-file.js';
import { type Privacy, normaliseRows } from '../privacy/privacy.js';
import type { Scorer } from '../scoring/scoring.js';
import type { PartyPsi } from '../intersection/psi.js';
import { type ActiveFit, PassiveModel, fitInThread, releaseTarget } from '../privacy/release.js';
import { replayRound } from './replay.js';
import { SgdModel } from '../xupdate/sgd.js';
import { CHOLESKY_LIMIT } from '../xupdate/cholesky.js';
import { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';

export type Phase = 'connecting' | 'challenge' | 'welcome' | 'setup' | 'training' | 'done';

/**
 * The party's model: ADMM (the x-update and its share), SGD (with the batch being scored), or
 * one-shot: a passive party's score model, or the active party's rows and labels (and, once
 * fitted, the combined model).
 */
export type Model =
  | { kind: 'admm'; x: RidgeXUpdate }
  | { kind: 'sgd'; sgd: SgdModel; step: number; rows: Uint32Array }
  | { kind: 'passive'; passive: PassiveModel; rows: Uint32Array }
  | { kind: 'active'; D: Csr; y: Float64Array; lambda: number; loss: LossName; labelFlip: number; fit: (ActiveFit & { parties: string[] }) | undefined };

export interface SessionState {
  phase: Phase;
  /** The job joined: set by the first welcome, which a rejoin must match. */
  jobId: string | undefined;
  /** Built by setup (again on every rejoin). */
  model: Model | undefined;
  testX: Csr | Dense | undefined;
  /** The last round (ADMM) or epoch (SGD) the model went through. */
  round: number;
  /**
   * The model is that of round `round`: the result of its update or of its replay, or x = 0
   * at round 0 (which is never written as a model). False after a rejoin's setup until
   * `resume` recomputes it.
   */
  current: boolean;
  /** The model before the last round, restored if the job ends one round earlier (budget). */
  previous: { x: Float64Array; intercept: number } | undefined;
  /** Connections opened so far: an answer computed for a request of an earlier one is not sent. */
  connection: number;
  /**
   * one-shot, active: the fit under way or done, by the digest of its inputs. A repeated
   * request (after a rejoin, which rebuilds the model) waits for it instead of fitting again.
   */
  fitWork: { key: string; fit: Promise<ActiveFit> } | undefined;
  /** The sets whose `psi` this connection has answered: a second one for a set is refused. */
  psiSets: Set<SampleSet>;
  /** The label points of a set whose `psi` messages are still coming (psiPoints). */
  psiParts: { set: SampleSet; total: number; next: number; points: Uint8Array } | undefined;
  /** Scoring: `score` requests answered so far. */
  scored: number;
  /** A set-up's factorisation under way (stopped if the connection is lost). */
  factoring: RidgeXUpdate | undefined;
  /** The collections at each round of a large size. */
  garbage: RoundGarbage;
}

export function newSession(): SessionState {
  return { phase: 'connecting', jobId: undefined, model: undefined, testX: undefined, round: 0, current: false, previous: undefined, connection: 0, fitWork: undefined, psiSets: new Set(), psiParts: undefined, scored: 0, factoring: undefined, garbage: new RoundGarbage() };
}

/**
 * What a session keeps of a loaded file, for as long as the process lives: the reader's line
 * numbers (for its error messages) and a LIBSVM file's first tokens (labels, which a party
 * ignores) are let go once the file is loaded.
 */
export interface SessionRows extends Pick<FeatureTable, 'featureNames'> {
  /** The rows' sample ids, packed (for the intersection; a few bytes each). */
  ids: PackedIds;
  /**
   * A dense file's rows are selected in place (no copy of the aligned rows); a sparse training
   * file's wait in a temporary file until selected (SpilledCsr).
   */
  X: Csr | DenseRows | SpilledCsr;
}

/** Rows `order` of a session's file as CSR (a copy). */
function selectCsr(X: SessionRows['X'], order: ArrayLike<number>): Csr {
  return X instanceof DenseRows || X instanceof SpilledCsr ? X.selectCsr(order) : csrSelectRows(X, order);
}

/**
 * Rows `order` of a sparse file as the x-update's block: straight into the kernels'
 * WebAssembly memory (one copy, not two), or as CSR where that memory cannot hold them.
 */
function selectSparseBlock(X: Csr | SpilledCsr, order: ArrayLike<number>): WasmCsr | Csr {
  if (!(X instanceof SpilledCsr)) return WasmCsr.fromRows(X, order) ?? csrSelectRows(X, order);
  const w = WasmCsr.empty(order.length, X.cols, X.selectedEntries(order));
  if (!w) return X.selectCsr(order);
  X.selectInto(w.csr, order);
  return w;
}

/** What the session reads and never changes: this party's configuration, data and privacy. */
export interface SessionEnv {
  partyId: string;
  /** Join only this job (null: whatever job the coordinator runs). */
  jobId: string | null;
  intercept: boolean;
  /** The party's secret for the hello proof (never sent). */
  token: string | undefined;
  /** active: the label holder's own organisation (gets the labels, sends no noise); passive otherwise. */
  role: Role;
  train: SessionRows;
  test: SessionRows | undefined;
  /** d_m, fixed by the training file. */
  features: number;
  privacy: Privacy;
  /** Where the privacy ledger is kept between restarts. */
  ledgerPath: string;
  /** This party's side of the private set intersection (its key and order last as long as the process). */
  psi: Pick<PartyPsi, 'answer' | 'fileRows' | 'blindAgain'>;
  /**
   * Scoring new rows with a trained model (admm-party predict) instead of training: the model
   * and the new rows (`train` is then the file of new rows), and the scoring ledger's path.
   */
  scoring?: { scorer: Scorer; ledger: string };
  /** The most label ids a `psi` may carry (admm-party --max-label-factor). */
  maxLabelIds: number;
  /** Threads beside the party's own for a large dense block's products and set-up (admm-party --threads; threadsFor). */
  threads: number | 'auto';
  log: Logger;
}

/** The model the job ended with, for the model file. */
export interface FinalModel {
  coefficients: Float64Array;
  /** null: this party's part has no intercept. */
  intercept: number | null;
  /** Aligned training rows it was fitted on. */
  rows: number;
  /** one-shot: how this party's part is applied to new rows and combined (recorded in the model file). */
  oneShot?: object;
  /** one-shot, passive: the clip of its scores, applied to new rows' scores too. */
  scoreClip?: number;
}

/** What a handled message asks of the connection. */
export type Outcome =
  /** `encoded`: messages already encoded, or made a piece at a time (the intersection's answer, encodeIdsSource), sent after `messages`. */
  | { kind: 'reply'; messages: PartyMessage[]; encoded?: ByteSource[] }
  /** welcome: the coordinator answered; the connect timeout no longer applies. */
  | { kind: 'answered'; messages: PartyMessage[] }
  /** setup: the party is in the job; from now on a broken connection is retried. */
  | { kind: 'joined'; messages: PartyMessage[] }
  /** done: write this model, then close. */
  | { kind: 'done'; done: Done; model: FinalModel }
  /** The answer takes a while (a worker thread, or work done in pieces); act on the outcome when it comes. */
  | { kind: 'later'; work: Promise<Outcome> };

/** A new connection opened: the coordinator's challenge comes first. */
export function connectionOpened(s: SessionState): void {
  s.phase = 'challenge';
  s.connection++;
  s.psiSets.clear();
  s.psiParts = undefined;
}

/** The connection broke: nothing is expected until a new one opens. */
export function connectionLost(s: SessionState): void {
  s.phase = 'connecting';
  // A set-up abandoned: its factorisation and threads stop (a rejoin sets up again).
  void s.factoring?.close();
  s.factoring = undefined;
}

/** What the next message from the coordinator is checked against, from the session's state only. */
export function validationContext(s: SessionState, env: SessionEnv): ValidationContext {
  const m = s.model;
  const n = m === undefined ? undefined : m.kind === 'admm' ? m.x.n : m.kind === 'sgd' ? m.sgd.n : m.kind === 'passive' ? m.passive.scores.length : m.D.rows;
  return {
    jobId: s.jobId,
    n,
    nTest: s.testX?.rows,
    // Rounds are checked by the handlers (round must follow the last one; evaluate and resume name any).
    round: undefined,
    step: m?.kind === 'sgd' ? m.step + 1 : undefined,
    batchRows: m?.kind === 'sgd' ? m.rows.length : 0,
    fileRows: { train: env.train.ids.length, test: env.test?.ids.length ?? 0 },
    maxLabelIds: env.maxLabelIds,
    // Online scoring begins with an empty psi: the party sends its own points only.
    emptyPsi: env.scoring !== undefined,
  };
}

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

function expectPhase(s: SessionState, phase: Phase): void {
  if (s.phase !== phase) throw new ProtocolError('unexpected', `message not expected in state '${s.phase}'`);
}

function checkVersion(version: number): void {
  if (version !== PROTOCOL_VERSION) throw new ProtocolError('versionMismatch', `party speaks version ${PROTOCOL_VERSION}, coordinator sent version ${version}`);
}

function reply(...messages: PartyMessage[]): Outcome {
  return { kind: 'reply', messages };
}

/** The ADMM model, or a protocol error naming what came in the wrong kind of job. */
function admmModel(s: SessionState, what: string): RidgeXUpdate {
  if (s.model?.kind !== 'admm') throw new ProtocolError('unexpected', `${what} in an SGD job`);
  return s.model.x;
}

function onChallenge(s: SessionState, env: SessionEnv, msg: Challenge): Outcome {
  expectPhase(s, 'challenge');
  checkVersion(msg.protocolVersion);
  s.phase = 'welcome';
  const jobId = s.jobId ?? env.jobId;
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
  });
}

function onWelcome(s: SessionState, env: SessionEnv, msg: Welcome): Outcome {
  expectPhase(s, 'welcome');
  checkVersion(msg.protocolVersion);
  if (s.jobId !== undefined && msg.jobId !== s.jobId) throw new ProtocolError('wrongJob', `rejoining job '${s.jobId}', the coordinator runs '${msg.jobId}'`);
  const rejoin = s.model !== undefined;
  s.jobId = msg.jobId;
  s.phase = 'setup';
  env.log.info({ jobId: msg.jobId, rejoin }, 'joined job');
  // Scoring: the party is in the job from here on (a broken connection is retried).
  if (env.scoring) return { kind: 'joined', messages: [] };
  if (env.privacy.enabled && !rejoin) env.privacy.restoreLedger(env.ledgerPath, msg.jobId);
  return { kind: 'answered', messages: [] };
}

function scoringEnv(env: SessionEnv, what: string): NonNullable<SessionEnv['scoring']> {
  if (!env.scoring) throw new ProtocolError('unexpected', `${what}, but this party trains (it scores only when started with admm-party predict)`);
  return env.scoring;
}

/**
 * Online scoring, one request: the coordinator's blinded ids blinded again with this party's
 * key, so that the coordinator finds which of them this party holds (it has this party's own
 * points from the first psi). The party learns how many ids were asked, nothing about them.
 */
function onLookup(s: SessionState, env: SessionEnv, msg: Lookup): Outcome {
  expectPhase(s, 'setup');
  scoringEnv(env, 'lookup');
  if (!s.psiSets.has('train')) throw new ProtocolError('unexpected', 'lookup before psi');
  const connection = s.connection;
  const work = env.psi.blindAgain(msg.points).then((points): Outcome => (s.connection === connection ? reply({ type: 'found', jobId: s.jobId!, points }) : reply()));
  return { kind: 'later', work };
}

/** Score the rows named by their position in this party's shuffled ids: this party's part only. */
function onScore(s: SessionState, env: SessionEnv, msg: Score): Outcome {
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

/**
 * The coordinator's half of the private set intersection of one set: answered with this
 * party's points and the coordinator's blinded again (psi.ts), computed off the main thread.
 * Once per set and connection: a repeat is refused.
 */
function onPsi(s: SessionState, env: SessionEnv, msg: Psi): Outcome {
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
  const labelIds = points.length / POINT_BYTES;
  const t0 = performance.now();
  const connection = s.connection;
  // Not `msg` in the closure: its points (32 bytes an id) are garbage once blinded again.
  const { set, jobId } = msg;
  const work = env.psi.answer(set, points).then((answer): Outcome => {
    env.log.info({ set, labelIds, ids: answer.points.length / POINT_BYTES, seconds: (performance.now() - t0) / 1000 }, 'ids intersected (ECDH PSI)');
    if (s.connection !== connection) return reply();
    // Read from their temporary files a frame at a time, as the message is sent.
    const encoded = encodeIdsSource({ jobId, set }, answer.points, answer.labelPoints);
    return { kind: 'reply', messages: [], encoded: [encoded] };
  });
  return { kind: 'later', work };
}

/**
 * A set's label points once its last `psi` has come (undefined before): the points of a whole
 * set in one message as they are, else its messages' points put in order into one array.
 */
function psiPoints(s: SessionState, msg: Psi): Uint8Array | undefined {
  const n = msg.points.length / POINT_BYTES;
  let parts = s.psiParts;
  if (msg.at === 0) {
    if (parts) throw new ProtocolError('invalid', `psi for the ${msg.set} set among the parts of the ${parts.set} set's (${parts.next} of ${parts.total} label ids came)`);
    if (s.psiSets.has(msg.set)) throw new ProtocolError('unexpected', `psi for the ${msg.set} set twice on one connection`);
    if (n === msg.total) {
      s.psiSets.add(msg.set);
      return msg.points;
    }
    parts = s.psiParts = { set: msg.set, total: msg.total, next: 0, points: new Uint8Array(msg.total * POINT_BYTES) };
  } else if (!parts || parts.set !== msg.set || parts.total !== msg.total || msg.at !== parts.next)
    throw new ProtocolError('invalid', `psi.at: label ids from ${msg.at} of ${msg.total} (${msg.set}), expected ${parts ? `${parts.next} of ${parts.total} (${parts.set})` : 'a first psi, at 0'}`);
  parts.points.set(msg.points, msg.at * POINT_BYTES);
  parts.next = msg.at + n;
  if (parts.next < parts.total) return undefined;
  s.psiParts = undefined;
  s.psiSets.add(msg.set);
  return parts.points;
}

function onSetup(s: SessionState, env: SessionEnv, msg: Setup): Outcome {
  expectPhase(s, 'setup');
  // The intersection's messages and points are garbage by now; the rows selected come next.
  collectGarbage();
  const { privacy } = env;
  const t0 = performance.now();
  if (msg.role !== env.role)
    throw new ConfigError(
      msg.role === 'active'
        ? "the coordinator names this party its active party (the label holder's organisation: it gets the labels and sends no noise), but it was started as passive; only a party of that organisation should agree, with --role active"
        : `this party was started with --role active, but the coordinator does not name it its active party (admm-coordinator --active-party ${env.partyId})`,
    );
  // The coordinator names rows by their position in the order this party sent its ids.
  const trainRows = env.psi.fileRows('train', msg.trainRows);
  const testRows = env.psi.fileRows('test', msg.testRows);
  const n = trainRows.length;
  const test = env.test && testRows.length > 0 ? env.test.X : undefined;
  let testX: Csr | Dense | undefined;
  let model: Model;
  let bw: number | undefined;
  if (msg.algorithm === 'sgd') {
    model = { kind: 'sgd', sgd: new SgdModel(selectCsr(env.train.X, trainRows), msg.lambda, env.intercept), step: 0, rows: new Uint32Array(0) };
    testX = test && selectCsr(test, testRows);
  } else if (msg.algorithm === 'one-shot') {
    // The bounds of the one-shot models are for rows of norm <= 1 (docs/privacy.md, section 9).
    const D = normaliseRows(selectCsr(env.train.X, trainRows)).X;
    testX = test && normaliseRows(selectCsr(test, testRows)).X;
    // With label privacy the labels are the coordinator's flipped ones: the active party fits
    // with the loss corrected for their flip probability; the passive target is the flipped
    // labels as they are (in expectation they, and so its ridge fit, are 1 - 2p times the true
    // ones; the active party's weight on its scores absorbs the scale).
    if (env.role === 'active') model = { kind: 'active', D, y: msg.labels, lambda: msg.lambda, loss: msg.loss, labelFlip: msg.labelFlip, fit: undefined };
    else {
      if (env.intercept) throw new ConfigError('--intercept at a passive party of a one-shot job: the intercept lives at the active party (or, without one, at the coordinator)');
      const target = releaseTarget(msg.labels);
      bw = target.bw;
      const passive = new PassiveModel(D, target.target, privacy.releaseBounds);
      model = { kind: 'passive', passive, rows: trainRows };
    }
  } else {
    const X = env.train.X;
    // A dense file's aligned rows are moved to its top and used there (no copy; a rejoin moves
    // them again). A sparse block's rows go straight into the x-update kernels' memory.
    const block = X instanceof DenseRows ? X.front(trainRows) : !(X instanceof SpilledCsr) && preferDense(X) ? csrSelectRowsDense(X, trainRows) : selectSparseBlock(X, trainRows);
    testX = test && (test instanceof DenseRows ? test.front(testRows) : selectCsr(test, testRows));
    const x = new RidgeXUpdate(block, msg.lambda, env.intercept, { noiseFree: !privacy.enabled, threads: env.threads });
    if (privacy.enabled && x.form === 'cg') {
      void x.close();
      throw new ConfigError(
        msg.lambda > 0
          ? `privacy needs a factorised x-update, and this block (${n} rows x ${X.cols} features) is too large for one (limit ${CHOLESKY_LIMIT} on the smaller side)`
          : `privacy needs a factorised x-update, and this block (${n} rows x ${X.cols} features) is factorised only with lambda > 0`,
      );
    }
    if (x.form === 'cholesky') {
      // Seconds of work on a large block, in pieces with the event loop's turns between them,
      // then the rest of the set-up (unless the connection was lost meanwhile: a rejoin sets up again).
      const connection = s.connection;
      s.factoring = x;
      // Lost meanwhile: the phase left 'setup' (and a new connection has another number).
      const work = x.factorInPieces(msg.rho).then(
        (pieces): Outcome => {
          if (s.factoring === x) s.factoring = undefined;
          return s.connection !== connection || s.phase !== 'setup' ? reply() : ready(s, env, msg, { kind: 'admm', x }, testX, n, undefined, t0, pieces);
        },
        (err: unknown) => {
          if (s.factoring === x) s.factoring = undefined;
          void x.close(); // set-up failed: this x-update is not used
          throw err;
        },
      );
      return { kind: 'later', work };
    }
    model = { kind: 'admm', x };
  }
  return ready(s, env, msg, model, testX, n, bw, t0, undefined);
}

/** The end of the set-up: the model in place, the privacy calibrated and `ready` sent. */
function ready(s: SessionState, env: SessionEnv, msg: Setup, model: Model, testX: Csr | Dense | undefined, n: number, bw: number | undefined, t0: number, factorPieces: number | undefined): Outcome {
  const { privacy } = env;
  s.testX = testX;
  // A rejoin's new model replaces the old one: its threads, if any, stop.
  if (s.model?.kind === 'admm' && (model.kind !== 'admm' || s.model.x !== model.x)) void s.model.x.close();
  const info = privacy.calibrate({ lambda: msg.lambda, rho: msg.rho, rounds: msg.rounds, parties: msg.parties, features: env.features, n, algorithm: msg.algorithm, bw });
  s.model = model;
  // A fresh model is x = 0: that of round 0. A rejoin past round 0 waits for resume to recompute it.
  s.current = s.round === 0;
  s.previous = undefined;
  s.phase = 'training';
  env.log.info(
    {
      rows: n,
      droppedRows: env.train.ids.length - n,
      testRows: s.testX?.rows ?? 0,
      algorithm: msg.algorithm,
      role: msg.role,
      form: model.kind === 'admm' ? model.x.form : undefined,
      dense: model.kind === 'admm' ? model.x.dense : undefined,
      threads: model.kind === 'admm' ? model.x.threads : undefined,
      factorMs: Math.round(performance.now() - t0),
      factorPieces,
    },
    'aligned and factorised',
  );
  env.log.info({ ...info }, `privacy: ${info.mechanism === 'none' ? 'none, shares are sent without noise' : info.mechanism}`);
  // The set-up's garbage (the setup message, the selection's arrays, the reads of the spilled
  // rows) would otherwise wait through the first rounds, whose own collections are of the young
  // generation (RoundGarbage), and add to their peak: 13-20 MB more in the first rounds of a
  // million-row run.
  collectGarbage();
  return { kind: 'joined', messages: [{ type: 'ready', jobId: s.jobId!, privacy: info }] };
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
 * one-shot, passive: the one release (drawn once, then the same vector on every repeat: see
 * Privacy.scoreRelease), with the clipped test scores when the party releases them.
 */
function onRelease(s: SessionState, env: SessionEnv): Outcome {
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
function onFit(s: SessionState, env: SessionEnv, msg: Fit): Outcome {
  expectPhase(s, 'training');
  const m = s.model;
  if (m?.kind !== 'active') throw new ProtocolError('unexpected', 'fit, but this party is not the active party of a one-shot job');
  const n = m.D.rows;
  const releases = msg.parties.map((party, j) => ({ party, scores: msg.releases.slice(j * n, (j + 1) * n), sigma: msg.sigmas[j] }));
  const key = createHash('sha256').update(JSON.stringify([msg.parties, Array.from(msg.sigmas), n])).update(new Uint8Array(msg.releases.buffer, msg.releases.byteOffset, msg.releases.byteLength)).digest('hex');
  if (s.fitWork?.key !== key) {
    const t0 = performance.now();
    const fit = fitInThread({ D: m.D, y: m.y, releases, loss: m.loss, labelFlip: m.labelFlip, lambda: m.lambda });
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
function oneShotModel(m: Extract<Model, { kind: 'passive' | 'active' }>): FinalModel {
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
      local: { coefficients: Array.from(f.local.coefficients), intercept: f.local.intercept, objective: f.local.objective },
    },
  };
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

/** max |v_i|, for an error message (the validator has made sure every value is finite). */
function maxAbs(v: Float64Array): number {
  let m = 0;
  for (let i = 0; i < v.length; i++) m = Math.max(m, Math.abs(v[i]));
  return m;
}

/**
 * A party never sends a non-finite value (PROTOCOL.md). What it computes from validated,
 * finite inputs and its bounded data (magnitude at most 1e100) can still overflow when the
 * coordinator sends extreme ones (rho 1e300, c near 1e308): the party then stops with an
 * error that names them (close 4003, exit 69) instead of sending NaN or writing a model of
 * nulls. `what` says what overflowed, and from which inputs.
 */
function refuseNonFinite(what: () => string, values: Float64Array, scalar = 0): void {
  const i = firstOutside(values);
  if (i >= 0 || !Number.isFinite(scalar))
    throw new ProtocolError('invalid', `${what()}: refusing to send non-finite values (${i >= 0 ? `value ${i} is ${values[i]}` : `||x||^2 is ${scalar}`})`);
}
