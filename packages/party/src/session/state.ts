// A session's state and what it reads: the plain objects every handler is passed, the
// outcome a handler returns, and the small checks the handlers share.
import type { Logger } from 'pino';
import { type ClassWeights, type Csr, type Dense, type FeatureTable, type LossName, type PackedIds, DenseRows, SpilledCsr } from '@admm-share/core';
import { type ByteSource, type Done, type PartyMessage, type Psi, type Role, type SampleSet, type ValidationContext, PROTOCOL_VERSION, ProtocolError, firstOutside } from '@admm-share/protocol';
import type { ProbeBudget } from '../intersection/probe-budget.js';
import type { PartyPsi } from '../intersection/psi.js';
import type { PartyPsiCaches } from '../intersection/psi-caches.js';
import type { Privacy } from '../privacy/privacy.js';
import type { ActiveFit, PassiveModel } from '../privacy/release.js';
import type { FinalModel } from '../scoring/model-file.js';
import type { Scorer } from '../scoring/scoring.js';
import type { RidgeXUpdate } from '../xupdate/ridge-xupdate.js';
import type { SgdModel } from '../xupdate/sgd.js';
import { RoundGarbage } from './gc.js';

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
  | { kind: 'active'; D: Csr; y: Float64Array; lambda: number; loss: LossName; labelFlip: number; classWeights: ClassWeights | undefined; fit: (ActiveFit & { parties: string[] }) | undefined };

export interface SessionState {
  phase: Phase;
  /** The job joined: set by the first welcome, which a rejoin must match. */
  jobId: string | undefined;
  /** Built by setup (again on every rejoin). */
  model: Model | undefined;
  testX: Csr | Dense | undefined;
  /** The file the test rows are from: the test file, or ('train') rows the coordinator held out of the training file. */
  testFrom: SampleSet | undefined;
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
  psiParts: { set: SampleSet; total: number; next: number; points: Uint8Array; cache: Psi['cache'] } | undefined;
  /** This connection's PSI caches: the coordinator's name for them (challenge) and the id this party named in its hello (psi-caches.ts). */
  psiCache: { name: string | undefined; announced: string | null | undefined };
  /** Scoring: `score` requests answered so far. */
  scored: number;
  /** Scoring: `lookup` requests received so far (answered or refused). */
  lookups: number;
  /** A set-up's factorisation under way (stopped if the connection is lost). */
  factoring: RidgeXUpdate | undefined;
  /** The collections at each round of a large size. */
  garbage: RoundGarbage;
}

export function newSession(): SessionState {
  return { phase: 'connecting', jobId: undefined, model: undefined, testX: undefined, testFrom: undefined, round: 0, current: false, previous: undefined, connection: 0, fitWork: undefined, psiSets: new Set(), psiParts: undefined, psiCache: { name: undefined, announced: undefined }, scored: 0, lookups: 0, factoring: undefined, garbage: new RoundGarbage() };
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
  /**
   * With a privacy budget, test scores (un-noised, outside the guarantee) are sent only with
   * --release-test-scores: of a test file, or of rows the coordinator holds out of the training file.
   */
  releaseTestScores: boolean;
  /** d_m, fixed by the training file. */
  features: number;
  privacy: Privacy;
  /** Where the privacy ledger is kept between restarts. */
  ledgerPath: string;
  /** This party's side of the private set intersection (its key and order last as long as the process). */
  psi: Pick<PartyPsi, 'answer' | 'fileRows' | 'blindAgain' | 'useCache' | 'costs' | 'settle' | 'prepare' | 'written'>;
  /** --psi-cache: this party's caches of the intersection, one per coordinator. */
  psiCaches?: PartyPsiCaches;
  /**
   * Scoring new rows with a trained model (admm-party predict) instead of training: the model
   * and the new rows (`train` is then the file of new rows), and the scoring ledger's path.
   */
  scoring?: { scorer: Scorer; ledger: string };
  /** What the coordinator may test against this party's ids: label sets per job, ids per day and per connection (intersection/probe-budget.ts). */
  probe?: ProbeBudget;
  /** The most label ids a `psi` may carry (admm-party --max-label-factor). */
  maxLabelIds: number;
  /** Threads beside the party's own for a large dense block's products and set-up (admm-party --threads; threadsFor). */
  threads: number | 'auto';
  log: Logger;
}

/** What a handled message asks of the connection. */
export type Outcome =
  /** `encoded`: messages already encoded, or made a piece at a time (the intersection's answer, encodeIdsSource), sent after `messages`. */
  | { kind: 'reply'; messages: PartyMessage[]; encoded?: ByteSource[] }
  /** welcome: the party is in the job; the connect timeout no longer applies, and from now on a broken connection is retried. */
  | { kind: 'answered'; messages: PartyMessage[] }
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
  s.psiCache = { name: undefined, announced: undefined };
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

export function expectPhase(s: SessionState, phase: Phase): void {
  if (s.phase !== phase) throw new ProtocolError('unexpected', `message not expected in state '${s.phase}'`);
}

export function checkVersion(version: number): void {
  if (version !== PROTOCOL_VERSION) throw new ProtocolError('versionMismatch', `party speaks version ${PROTOCOL_VERSION}, coordinator sent version ${version}`);
}

export function reply(...messages: PartyMessage[]): Outcome {
  return { kind: 'reply', messages };
}

/** The ADMM model, or a protocol error naming what came in the wrong kind of job. */
export function admmModel(s: SessionState, what: string): RidgeXUpdate {
  if (s.model?.kind !== 'admm') throw new ProtocolError('unexpected', `${what} in an SGD job`);
  return s.model.x;
}

/** max |v_i|, for an error message (the validator has made sure every value is finite). */
export function maxAbs(v: Float64Array): number {
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
export function refuseNonFinite(what: () => string, values: Float64Array, scalar = 0): void {
  const i = firstOutside(values);
  if (i >= 0 || !Number.isFinite(scalar))
    throw new ProtocolError('invalid', `${what()}: refusing to send non-finite values (${i >= 0 ? `value ${i} is ${values[i]}` : `||x||^2 is ${scalar}`})`);
}
