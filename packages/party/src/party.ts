// The party process: loads its own feature files, then runs the job's session over a link
// to the coordinator and writes the model when the job is done. It owns only the wiring:
// transport/ is the connection, session/ the job's state machine, scoring/model-file.ts the output.
import { accessSync, constants, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { type BlockTable, type KeptTable, type Preparation, type ReadOptions, ConfigError, DataError, DenseRows, InternalError, PeerError, PsiTeam, SpilledCsr, denseToCsr, detectFormat, isDense, originalUnits, osNoise, packIds, readFeatureBlock, readFeatureFile, readKeptBlock, seededNoise } from '@admm-share/core';
import { type CloseKind, type Role, ProtocolError, SCORING_RETRIABLE_CLOSE_CODES, assertNever } from '@admm-share/protocol';
import { type PsiCacheFlags, Progress, peakMemoryBytes } from '@admm-share/runtime';
import { collectGarbage, collectYoungGarbage } from './session/gc.js';
import { CoordinatorLink, maxPayloadFor } from './transport/link.js';
import type { ClientTls } from './transport/tls.js';
import { type PartyModel, ledgerPath, readPartyModel, writeModelFiles } from './scoring/model-file.js';
import { type PreparationFlags, loadPreparedLike, loadTrainingData, preparationPath, scaleWarning } from './preparation/data.js';
import { writePartyReportOf } from './scoring/model-report.js';
import { type PrivacyConfig, DEFAULT_BX, normaliseCsrRows, normaliseDenseRows, validatePrivacyConfig } from './privacy/mechanism.js';
import { Privacy } from './privacy/privacy.js';
import { type ProbeKind, ProbeBudget, probeBudgetPath } from './intersection/probe-budget.js';
import { PartyPsi } from './intersection/psi.js';
import { PartyPsiCaches } from './intersection/psi-caches.js';
import { type ScoringPrivacyConfig, type ScoringRows, DEFAULT_SCORE_CLIP, Scorer, ScoringPrivacy, scoringLedgerPath } from './scoring/scoring.js';
import { handle } from './session/session.js';
import { type Outcome, type SessionEnv, type SessionRows, connectionLost, connectionOpened, newSession, validationContext } from './session/state.js';

export { privacyReportPath } from './scoring/model-file.js';

export interface PartyConfig {
  /** ws:// URL of the coordinator. */
  coordinator: string;
  partyId: string;
  /** Join only this job (null: whatever job the coordinator runs). */
  jobId: string | null;
  data: string;
  test?: string;
  read: ReadOptions;
  /** How the data is prepared (columns, missing values, categories, scaling); see preparation/data.ts. */
  prepare: PreparationFlags;
  /** Fit an unpenalised intercept at this party (at most one party should). */
  intercept: boolean;
  /** active: the label holder's own organisation (agrees to get the labels; sends no noise). */
  role: Role;
  /** Where to write the model file (the privacy report goes next to it). */
  model: string;
  privacy: PrivacyConfig;
  /**
   * With privacy on, test-set scores D_test x_m are not covered by the guarantee (they are
   * not noised); they are sent only if this is set.
   */
  releaseTestScores: boolean;
  /** Give up if the coordinator does not answer within this time (ms). */
  connectTimeoutMs: number;
  /** After losing the connection during the job, keep trying to rejoin for this long (ms). */
  reconnectTimeoutMs: number;
  /** No ping or message from the coordinator for this long means the connection is dead (ms). */
  heartbeatTimeoutMs: number;
  /** This party's secret, shared with the coordinator only; proves the hello (never sent). */
  token?: string;
  /** wss://: trust only this CA for the coordinator's certificate (pinning); cert and key for mutual TLS. */
  tls?: ClientTls;
  /**
   * The coordinator's label set of a `psi` may hold at most this many times this party's rows
   * (default MAX_LABEL_FACTOR): the coordinator chooses that set, so a cap bounds how many
   * candidate ids it can test against this party's.
   */
  maxLabelFactor?: number;
  /**
   * Threads beside the party's own for a large dense block's per-round products and set-up
   * Gram matrix (default 'auto': threadsFor).
   */
  threads?: number | 'auto';
  /** Candidate ids the coordinator may test per UTC day (default: 4 x (train + test rows) + 1024; probeBudget). */
  maxProbeIdsPerDay?: number;
  /** Different label sets answered per job and set (default MAX_LABEL_SETS_PER_JOB). */
  maxLabelSetsPerJob?: number;
  /** --psi-cache: keep the intersection's key and points per coordinator (intersection/psi-caches.ts). */
  psiCache?: PsiCacheFlags;
}

/**
 * Default of --max-label-sets-per-job: one. A coordinator restarted for the same job (with
 * --resume or afresh) derives its key and order from a secret kept in its --out, so it sends
 * the very points it sent before; only one that lost that folder sends the same ids anew.
 */
export const MAX_LABEL_SETS_PER_JOB = 1;
/** Default of --max-probe-ids-per-day, as a multiple of this party's rows (train + test), plus SLACK_LABEL_IDS. */
export const PROBE_IDS_PER_ROW = 4;

/**
 * This party's probe budget (intersection/probe-budget.ts), kept beside its ledger. The day's
 * default, 4 ids a row (train and test) and 1024, lets a coordinator align a job with a label
 * set as large as the party's files four times a day (a restart of the coordinator costs nothing),
 * and tests at most that many candidates a day. A lookup per connection defaults to the rows and 1024.
 */
function probeBudget(coordinator: string, ledger: string, kind: ProbeKind, rows: number, flags: { perDay?: number; setsPerJob?: number; perConnection?: number }): ProbeBudget {
  return new ProbeBudget(probeBudgetPath(ledger), coordinatorKey(coordinator), kind, {
    idsPerDay: flags.perDay ?? PROBE_IDS_PER_ROW * rows + SLACK_LABEL_IDS,
    labelSetsPerJob: flags.setsPerJob ?? MAX_LABEL_SETS_PER_JOB,
    lookupIdsPerConnection: flags.perConnection ?? rows + SLACK_LABEL_IDS,
  });
}

/** The coordinator's URL as its budget's key: normalised, so that ws://h:1 and ws://h:1/ are one. */
function coordinatorKey(url: string): string {
  try {
    return new URL(url).href;
  } catch {
    return url;
  }
}

/** Default of --max-label-factor (as the coordinator's --max-rows-factor the other way). */
export const MAX_LABEL_FACTOR = 10;
/** Label ids allowed beyond the factor, so that a party with few rows can still join a larger job. */
const SLACK_LABEL_IDS = 1024;

/** admm-party predict: score new rows with a trained model, in a batch job or online. */
export interface ScoringConfig extends Pick<PartyConfig, 'coordinator' | 'partyId' | 'jobId' | 'read' | 'connectTimeoutMs' | 'reconnectTimeoutMs' | 'heartbeatTimeoutMs' | 'token' | 'tls' | 'maxLabelFactor' | 'maxProbeIdsPerDay' | 'psiCache'> {
  /** Ids the coordinator may look up per connection (default: the rows and 1024). */
  maxLookupIdsPerConnection?: number;
  /** The model file this party wrote in training. */
  model: string;
  /** The new rows (their ids and this party's features). */
  data: string;
  /** Noise on the scores (a budget for this prediction job), or none (an explicit --mechanism none). */
  privacy: ScoringPrivacyConfig | null;
}

export interface PartyHandle {
  done: Promise<PartyResult>;
  close(): void;
}

export interface PartyResult {
  jobId: string;
  rounds: number;
  model: string;
}


/**
 * One organisation's process: loads its own feature file(s), joins the job, and each round
 * turns the coordinator's broadcast into a new x_m and share. D_m and x_m never leave it;
 * what it sends is listed in PROTOCOL.md.
 */
export function start(config: PartyConfig, deps: { logger: Logger }): PartyHandle {
  const log = deps.logger.child({ party: config.partyId });
  validatePrivacyConfig(config.privacy, config.intercept);
  modelFolder(config.model);
  // The preparation's statistics are paid from the budget first (docs/privacy.md, section 13);
  // the release gets the rest.
  const cfg = config.privacy;
  const budget = cfg.mechanism === 'none' ? null : { epsilon: cfg.epsilon!, delta: cfg.delta!, mechanism: cfg.mechanism, seeded: cfg.seed !== undefined, noise: () => (cfg.seed !== undefined ? seededNoise(`${cfg.seed}/prepare`) : osNoise()) };
  const loaded = loadTrainingData(config.data, config.read, config.prepare, budget, preparationPath(config.model), log);
  const spend = loaded.spend;
  const privacy = spend ? new Privacy({ ...cfg, epsilon: spend.releaseEpsilon, delta: spend.releaseDelta }, spend, { epsilon: cfg.epsilon!, delta: cfg.delta! }) : new Privacy(cfg);
  if (privacy.enabled && loaded.preparation === null) {
    const warning = scaleWarning(loaded.table);
    if (warning) log.warn(warning);
  }
  // Dense files are kept dense and their rows selected in place (see DenseRows); a sparse file's
  // matrix waits in a temporary file for the rows a set-up selects (see SpilledCsr). With privacy
  // on, every row is scaled into the unit ball: the sensitivity bounds assume rows of norm <= 1
  // (docs/privacy.md).
  const { rows: train, scaled: rowsScaled } = keptRows(loaded.table, privacy.enabled);
  // The training file fixes the number of features; a test row with a larger index is an error.
  const features = train.X.cols;
  const testTable = config.test === undefined ? undefined : loaded.preparation ? loadPreparedLike(config.test, config.read, loaded.preparation, log) : (privacy.enabled ? readFeatureBlock : readKeptBlock)(config.test, { ...config.read, features });
  let test: SessionRows | undefined = testTable ? keptRows(testTable, privacy.enabled).rows : undefined;
  const X = train.X;
  // The peak so far is the reading's: at a million rows it had been the party's whole peak.
  log.info({ file: config.data, rows: train.ids.length, features, nonzeros: X.nonzeros(), dense: X instanceof DenseRows, testRows: test?.ids.length ?? 0, peakMemoryBytes: peakMemoryBytes() }, 'data loaded');
  if (privacy.enabled) {
    if (loaded.spend)
      log.info({ share: loaded.spend.share, mu: loaded.spend.mu, reused: loaded.spend.reused, releaseEpsilon: loaded.spend.releaseEpsilon, releaseDelta: loaded.spend.releaseDelta }, "privacy: the preparation's statistics are differentially private estimates paid from the budget (composed with the release in GDP)");
    log.info({ rowsScaled, rows: train.ids.length }, 'privacy: rows with norm > 1 scaled to norm 1');
    if (privacy.noise?.seeded) log.warn({ seed: config.privacy.seed }, 'privacy: noise is SEEDED and therefore predictable: for reproducible experiments only, no privacy');
    if (config.privacy.mechanism === 'paper')
      log.warn("privacy: the paper's mechanism does not deliver its stated guarantee (docs/privacy.md); use it to reproduce the paper only");
    if (test && !config.releaseTestScores) {
      log.warn('privacy: test-set scores are not noised, so the test set is not used (pass --release-test-scores to send them anyway)');
      test = undefined;
    }
    if (config.releaseTestScores)
      log.warn('privacy: --release-test-scores: test-set scores (of --test, or of the rows the coordinator holds out with --holdout/--test-ids) are sent without noise and are not covered by the privacy guarantee');
  }
  // A progress bar for the intersection on a terminal (silent otherwise).
  const progress = new Progress();
  const psi = new PartyPsi(new PsiTeam({ afterChunk: collectYoungGarbage }), { train: train.ids, test: test?.ids }, (set, what) => progress.counter(`${set} ${what}`), collectGarbage);
  const env: SessionEnv = {
    partyId: config.partyId,
    jobId: config.jobId,
    intercept: config.intercept,
    token: config.token,
    role: config.role,
    train,
    test,
    releaseTestScores: config.releaseTestScores,
    features,
    privacy,
    ledgerPath: ledgerPath(config.model),
    psi,
    maxLabelIds: Math.ceil((config.maxLabelFactor ?? MAX_LABEL_FACTOR) * Math.max(train.ids.length, test?.ids.length ?? 0)) + SLACK_LABEL_IDS,
    probe: probeBudget(config.coordinator, ledgerPath(config.model), 'training', train.ids.length + (test?.ids.length ?? 0), { perDay: config.maxProbeIdsPerDay, setsPerJob: config.maxLabelSetsPerJob }),
    threads: config.threads ?? 'auto',
    ...(config.psiCache ? { psiCaches: new PartyPsiCaches(config.psiCache, log) } : {}),
    log,
  };
  // The file's matrix is spilled and its strings are packed: what the reader built is garbage.
  collectGarbage();
  // With a cache, the key is known only once the coordinator's psi says which cache it uses.
  if (!config.psiCache) psi.prepare('train');
  return run(config, env, rowsScaled, loaded.preparation);
}

/**
 * Score new rows with a trained model: the model file read and checked against the new data,
 * then the same session over the same link as training, answering psi, lookup and score until
 * the coordinator ends the prediction job.
 */
export function startScoring(config: ScoringConfig, deps: { logger: Logger }): PartyHandle {
  const log = deps.logger.child({ party: config.partyId });
  const model = readPartyModel(config.model);
  if (model.partyId !== config.partyId) throw new ConfigError(`--model ${config.model} is party ${model.partyId}'s model, this party is --id ${config.partyId}`);
  const data = scoringRows(config, model, log);
  const clip = config.privacy?.clip ?? model.scoreClip ?? DEFAULT_SCORE_CLIP;
  const privacy = config.privacy ? new ScoringPrivacy(config.privacy, clip) : undefined;
  const scorer = new Scorer(model, data, privacy);
  log.info({ file: config.data, rows: data.ids.length, model: config.model, modelJob: model.jobId, digest: model.digest }, 'model and new rows loaded');
  if (privacy)
    log.info({ epsilon: config.privacy!.epsilon, delta: config.privacy!.delta, requests: config.privacy!.requests, clip, sigma: privacy.sigma }, `scoring privacy: Gaussian noise on each score${privacy.seeded ? ' (SEEDED: predictable, experiments only)' : ''}`);
  else log.warn('scoring privacy: none, this party\'s scores of the new rows are sent without noise (--mechanism none)');
  const progress = new Progress();
  const rows: SessionRows = { ids: data.ids, X: data.X, featureNames: data.featureNames };
  const env: SessionEnv = {
    partyId: config.partyId,
    jobId: config.jobId,
    intercept: model.preprocessing.intercept,
    token: config.token,
    role: model.role,
    train: rows,
    test: undefined,
    releaseTestScores: false,
    features: model.features,
    privacy: new Privacy({ mechanism: 'none', bx: DEFAULT_BX }),
    ledgerPath: ledgerPath(config.model),
    psi: new PartyPsi(new PsiTeam({ afterChunk: collectYoungGarbage }), { train: rows.ids, test: undefined }, (set, what) => progress.counter(what), collectGarbage),
    maxLabelIds: Math.ceil((config.maxLabelFactor ?? MAX_LABEL_FACTOR) * data.ids.length) + SLACK_LABEL_IDS,
    probe: probeBudget(config.coordinator, ledgerPath(config.model), 'scoring', data.ids.length, { perDay: config.maxProbeIdsPerDay, perConnection: config.maxLookupIdsPerConnection }),
    scoring: { scorer, ledger: scoringLedgerPath(config.model) },
    threads: 0, // scoring has no x-update
    ...(config.psiCache ? { psiCaches: new PartyPsiCaches(config.psiCache, log) } : {}),
    log,
  };
  return run(config, env, 0, null);
}

/**
 * The new rows to score, as the model's training rows were: prepared with the model's own
 * preparation, or read as they are (a LIBSVM file need not mention the last columns).
 */
function scoringRows(config: ScoringConfig, model: PartyModel, log: Logger): ScoringRows {
  if (model.preparation !== null) {
    const t = loadPreparedLike(config.data, config.read, model.preparation, log);
    return { file: config.data, ids: t.ids, X: isDense(t.X) ? denseToCsr(t.X) : t.X, featureNames: t.featureNames };
  }
  const data = readFeatureFile(config.data, config.read);
  if (data.X.cols > model.features)
    throw new ConfigError(`--data ${config.data} has ${data.X.cols} feature columns, but party ${model.partyId}'s model (job ${model.jobId}) was trained on ${model.features}`);
  if (detectFormat(config.data, config.read.format) === 'libsvm' && data.X.cols < model.features) {
    data.X = { ...data.X, cols: model.features };
    data.featureNames = Array.from({ length: model.features }, (_, j) => String(j + 1));
  }
  return { file: data.file, ids: packIds(data.ids), X: data.X, featureNames: data.featureNames };
}

/**
 * What a training party keeps of a file it read: a dense matrix, or a sparse one in a temporary
 * file; with `unit`, every row with a norm above 1 scaled to norm 1, and the number scaled.
 */
function keptRows(t: BlockTable | KeptTable, unit: boolean): { rows: SessionRows & { X: DenseRows | SpilledCsr }; scaled: number } {
  if (t.X instanceof SpilledCsr) {
    // Spilled as it was read: only without privacy, whose rows need no scaling.
    if (unit) throw new InternalError('keeping the rows read', 'rows to scale in a temporary file');
    return { rows: { ids: t.ids, X: t.X, featureNames: t.featureNames }, scaled: 0 };
  }
  const scaled = !unit ? 0 : isDense(t.X) ? normaliseDenseRows(t.X) : normaliseCsrRows(t.X);
  return { rows: { ids: t.ids, X: isDense(t.X) ? new DenseRows(t.X) : new SpilledCsr(t.X), featureNames: t.featureNames }, scaled };
}

/**
 * The model file's folder, created if missing and checked writable before joining: the ledger
 * and a one-shot release are written there mid-job, before anything is sent.
 */
function modelFolder(model: string): void {
  const dir = dirname(model);
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw new ConfigError(`--model ${model}: its folder ${dir} cannot be created or written to (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** Drive a session over a link until the job is done or something fails. */
/** What driving a session needs of a party's configuration, training or scoring. */
type RunConfig = Pick<PartyConfig, 'coordinator' | 'partyId' | 'data' | 'model' | 'tls' | 'connectTimeoutMs' | 'reconnectTimeoutMs' | 'heartbeatTimeoutMs'>;

function run(config: RunConfig, env: SessionEnv, rowsScaled: number, preparation: Preparation | null): PartyHandle {
  const session = newSession();
  let resolve!: (r: PartyResult) => void;
  let reject!: (e: Error) => void;
  const done = new Promise<PartyResult>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  done.catch(() => undefined);
  /** Set once the outcome is decided (model written, or failed): nothing else happens after. */
  let settled = false;

  const fail = (err: Error, close?: CloseKind): void => {
    if (settled) return;
    settled = true;
    // The party's own failures (its data, files, state or a bug) name local paths: the
    // coordinator is told only the kind, the details stay in this party's log.
    if (close === 'partyFailure' || close === 'internal') env.log.error({ close, err: err.message }, 'party failure; closing');
    if (close) link.abort(close, close === 'partyFailure' || close === 'internal' ? "see the party's log" : err.message);
    reject(err);
  };

  /** A bad frame or a failed handler: the kind of error decides the close code. */
  const failOn = (err: unknown): void => {
    if (err instanceof ProtocolError) {
      // A scoring party refuses one bad request (by closing that connection: the coordinator
      // fails the request) and joins again: one request must not end the service.
      if (env.scoring && session.phase === 'setup' && link.refuseAndRejoin(err.kind, err.message)) {
        env.log.warn({ close: err.closeCode, err: err.message }, 'refused a bad request from the coordinator; rejoining');
        return;
      }
      env.log.error({ close: err.closeCode, err: err.message }, 'bad message from coordinator');
      fail(new PeerError(`coordinator sent a bad message: ${err.message}`), err.kind);
    } else if (err instanceof DataError || err instanceof ConfigError) fail(err, 'partyFailure');
    // A bug, not the coordinator's doing: exit 70, with the stack under ADMM_DEBUG.
    else fail(new InternalError('handling a coordinator message', err), 'internal');
  };

  const act = (outcome: Outcome): void => {
    switch (outcome.kind) {
      case 'reply':
        break;
      case 'answered':
        link.markAnswered();
        break;
      case 'later':
        outcome.work.then(
          (next) => {
            if (settled) return;
            try {
              act(next);
            } catch (err) {
              failOn(err);
            }
          },
          (err: unknown) => settled || failOn(err),
        );
        return;
      case 'done': {
        const { done: msg, model } = outcome;
        writeModelFiles({
          path: config.model,
          partyId: config.partyId,
          role: env.role,
          data: config.data,
          features: env.features,
          featureNames: env.train.featureNames,
          done: msg,
          model,
          privacy: env.privacy,
          rowsScaled,
          preparation,
          ...(env.privacy.enabled && session.testX && session.testFrom ? { testScores: { rows: session.testX.rows, from: session.testFrom } } : {}),
        });
        writePartyReportOf(config.model, env.log, preparation ? originalUnits(preparation, model.coefficients) : undefined);
        settled = true;
        env.log.info({ rounds: msg.rounds, reason: msg.reason, model: config.model, peakMemoryBytes: peakMemoryBytes() }, 'model written');
        const result: PartyResult = { jobId: msg.jobId, rounds: msg.rounds, model: config.model };
        // The PSI cache is written in the background meanwhile: the party ends once it is on disk.
        void Promise.all([link.finish('done', 'model written'), env.psi.written()]).then(() => resolve(result), reject);
        return;
      }
      default:
        assertNever(outcome);
    }
    for (const m of outcome.messages) link.send(m);
    if (outcome.kind === 'reply') for (const b of outcome.encoded ?? []) link.sendEncoded(b);
  };

  const link = new CoordinatorLink(
    {
      coordinator: config.coordinator,
      tls: config.tls,
      maxPayload: maxPayloadFor({ train: env.train.ids.length, test: env.test?.ids.length ?? 0, labelIds: env.maxLabelIds }),
      connectTimeoutMs: config.connectTimeoutMs,
      reconnectTimeoutMs: config.reconnectTimeoutMs,
      heartbeatTimeoutMs: config.heartbeatTimeoutMs,
      ...(env.scoring ? { retriableCodes: SCORING_RETRIABLE_CLOSE_CODES } : {}),
    },
    env.log,
    {
      context: () => validationContext(session, env),
      roundInto: () => (session.model?.kind === 'admm' ? session.model.x.broadcastInto : undefined),
      open: () => connectionOpened(session),
      lost: () => connectionLost(session),
      message: (msg) => {
        if (settled) return;
        try {
          act(handle(session, env, msg));
        } catch (err) {
          failOn(err);
        }
      },
      invalid: failOn,
      failed: (err) => fail(err),
      // Scoring: the coordinator ends a prediction job by closing with 'done' once it has every
      // party's scores (or, online, when it stops serving).
      closedDone: () => {
        if (!env.scoring || settled) return false;
        settled = true;
        env.log.info({ requests: session.scored, peakMemoryBytes: peakMemoryBytes() }, 'prediction job ended by the coordinator');
        env.psi.written().then(() => resolve({ jobId: session.jobId ?? '', rounds: session.scored, model: config.model }), reject);
        return true;
      },
    },
  );
  return { done, close: () => fail(new PeerError('party stopped'), 'aborted') };
}
