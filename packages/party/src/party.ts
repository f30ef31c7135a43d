import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import WebSocket, { type RawData } from 'ws';
import {
  type Csr,
  type FeatureTable,
  type ReadOptions,
  ConfigError,
  DataError,
  PeerError,
  csrSelectRows,
  hashIds,
  helloProof,
  readFeatureFile,
  writeFileAtomic,
} from '@admm-share/core';
import {
  type CoordinatorMessage,
  type Done,
  type PartyMessage,
  type ValidationContext,
  CloseCodes,
  PROTOCOL_VERSION,
  ProtocolError,
  assertNever,
  closeKindOf,
  closeReason,
  decode,
  encode,
  validateCoordinatorMessage,
} from '@admm-share/protocol';
import { type PrivacyConfig, Privacy, normaliseRows, validatePrivacyConfig } from './privacy.js';
import { SgdModel } from './sgd.js';
import { FACTOR_LIMIT, RidgeXUpdate } from './xupdate.js';

export interface PartyConfig {
  /** ws:// URL of the coordinator. */
  coordinator: string;
  partyId: string;
  /** Join only this job (null: whatever job the coordinator runs). */
  jobId: string | null;
  data: string;
  test?: string;
  read: ReadOptions;
  /** Fit an unpenalised intercept at this party (at most one party should). */
  intercept: boolean;
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
  tls?: { ca?: string; cert?: string; key?: string };
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

/** Close codes of a connection that broke rather than was closed on purpose: worth reconnecting. */
const RETRIABLE_CLOSE_CODES = new Set([1001, 1005, 1006]);

/** Bytes of MessagePack framing allowed on top of a message's vectors. */
const ENVELOPE_BYTES = 4096;

type State = 'connecting' | 'challenge' | 'welcome' | 'setup' | 'training' | 'done' | 'failed';

/**
 * One organisation's process: loads its own feature file(s), joins the job, and each round
 * turns the coordinator's broadcast into a new x_m and share. D_m and x_m never leave it;
 * what it sends is listed in PROTOCOL.md.
 */
export function start(config: PartyConfig, deps: { logger: Logger }): PartyHandle {
  const log = deps.logger.child({ party: config.partyId });
  validatePrivacyConfig(config.privacy, config.intercept);
  const privacy = new Privacy(config.privacy);
  const train = readFeatureFile(config.data, config.read);
  // The training file fixes the number of features; a test row with a larger index is an error.
  const features = train.X.cols;
  let test = config.test ? readFeatureFile(config.test, { ...config.read, features }) : undefined;
  log.info({ file: config.data, rows: train.ids.length, features, nonzeros: train.X.values.length, testRows: test?.ids.length ?? 0 }, 'data loaded');
  let scaled = 0;
  if (privacy.enabled) {
    // The sensitivity bounds assume rows of norm <= 1 (docs/privacy.md).
    const n = normaliseRows(train.X);
    train.X = n.X;
    scaled = n.scaled;
    if (test) test.X = normaliseRows(test.X).X;
    log.info({ rowsScaled: scaled, rows: train.ids.length }, 'privacy: rows with norm > 1 scaled to norm 1');
    if (privacy.noise?.seeded) log.warn({ seed: config.privacy.seed }, 'privacy: noise is SEEDED and therefore predictable: for reproducible experiments only, no privacy');
    if (config.privacy.mechanism === 'paper')
      log.warn("privacy: the paper's mechanism does not deliver its stated guarantee (docs/privacy.md); use it to reproduce the paper only");
    if (test && !config.releaseTestScores) {
      log.warn('privacy: test-set scores are not noised, so the test set is not used (pass --release-test-scores to send them anyway)');
      test = undefined;
    }
  }
  const party = new Party(config, log, train, test, features, privacy, scaled);
  return { done: party.done, close: () => party.close() };
}

/** model-p1.json -> model-p1.privacy.json */
export function privacyReportPath(model: string): string {
  return model.replace(/(\.json)?$/, '.privacy.json');
}

class Party {
  readonly done: Promise<PartyResult>;
  private resolve!: (r: PartyResult) => void;
  private reject!: (e: Error) => void;
  private ws: WebSocket;
  private readonly url: URL;
  private readonly maxPayload: number;
  /** True once the job's training has started: from then on a lost connection is retried. */
  private joined = false;
  private lostAt: number | undefined;
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private state: State = 'connecting';
  private jobId: string | undefined;
  private x: RidgeXUpdate | undefined;
  /** With algorithm 'sgd' the model is this instead of x. */
  private sgd: SgdModel | undefined;
  private sgdStep = 0;
  private sgdRows: Uint32Array = new Uint32Array(0);
  private testX: Csr | undefined;
  private round = 0;
  /** The model before the last round, restored if the job ends one round earlier (budget). */
  private previous: { x: Float64Array; intercept: number } | undefined;
  private connectTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly cfg: PartyConfig,
    private readonly log: Logger,
    private readonly train: FeatureTable,
    private readonly test: FeatureTable | undefined,
    private readonly features: number,
    private readonly privacy: Privacy,
    private readonly rowsScaled: number,
  ) {
    this.done = new Promise((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
    this.done.catch(() => undefined);
    const rows = train.ids.length + (test?.ids.length ?? 0);
    // The largest frame the coordinator sends: setup (4 bytes per row index) or a round
    // (8 bytes per training row). Never the ws default of 100 MiB.
    const maxPayload = Math.max(4 * rows, 8 * train.ids.length) + ENVELOPE_BYTES;
    let url: URL;
    try {
      url = new URL(cfg.coordinator);
      if (url.protocol !== 'ws:' && url.protocol !== 'wss:') throw new Error('not ws:// or wss://');
    } catch (err) {
      throw new ConfigError(`--coordinator '${cfg.coordinator}' is not a ws:// URL (${(err as Error).message})`);
    }
    if (cfg.tls && url.protocol !== 'wss:') throw new ConfigError('--tls-ca, --tls-cert and --tls-key need a wss:// coordinator URL');
    this.url = url;
    this.maxPayload = maxPayload;
    this.ws = this.connect();
  }

  /** Open a connection to the coordinator; a lost one during training is retried (see dropped). */
  private connect(): WebSocket {
    const { cfg, log } = this;
    const ws = new WebSocket(this.url, {
      maxPayload: this.maxPayload,
      perMessageDeflate: false,
      handshakeTimeout: cfg.connectTimeoutMs,
      ...(cfg.tls?.ca ? { ca: cfg.tls.ca } : {}),
      ...(cfg.tls?.cert ? { cert: cfg.tls.cert, key: cfg.tls.key } : {}),
      rejectUnauthorized: true,
    });
    this.state = 'connecting';
    clearTimeout(this.connectTimer);
    this.connectTimer = setTimeout(() => {
      if (ws === this.ws && (this.state === 'connecting' || this.state === 'challenge' || this.state === 'welcome'))
        this.joined ? this.dropped(`no answer within ${cfg.connectTimeoutMs} ms`) : this.fail(new PeerError(`no answer from ${cfg.coordinator} within ${cfg.connectTimeoutMs} ms`));
    }, cfg.connectTimeoutMs);
    ws.on('error', (err) => {
      if (ws !== this.ws) return;
      const e = err as NodeJS.ErrnoException;
      const tlsHint = /CERT|SELF_SIGNED|VERIFY|ERR_TLS|altnames/i.test(`${e.code} ${e.message}`)
        ? ` (TLS: the coordinator's certificate is not trusted${cfg.tls?.ca ? ' by --tls-ca' : ''}: ${e.message})`
        : '';
      if (this.joined && !tlsHint) this.dropped(e.code ?? e.message);
      else this.fail(new PeerError(`connection to ${cfg.coordinator} failed: ${e.code ?? e.message}${tlsHint}`));
    });
    ws.on('open', () => {
      if (ws !== this.ws) return;
      log.info({ coordinator: cfg.coordinator, reconnect: this.joined }, 'connected');
      this.state = 'challenge';
    });
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (ws === this.ws) this.onMessage(data, isBinary);
    });
    // The coordinator pings every --heartbeat; silence for --heartbeat-timeout means a dead
    // connection (a half-open socket never reports a close): drop it and rejoin.
    let lastSign = Date.now();
    const sign = () => (lastSign = Date.now());
    ws.on('ping', sign);
    ws.on('message', sign);
    const watchdog = setInterval(() => {
      if (ws !== this.ws || ws.readyState !== WebSocket.OPEN) return clearInterval(watchdog);
      if (this.joined && Date.now() - lastSign > cfg.heartbeatTimeoutMs) {
        log.warn({ heartbeatTimeoutMs: cfg.heartbeatTimeoutMs }, 'no heartbeat from the coordinator; dropping the connection');
        clearInterval(watchdog);
        ws.terminate();
      }
    }, Math.max(100, cfg.heartbeatTimeoutMs / 4));
    watchdog.unref();
    ws.on('close', () => clearInterval(watchdog));
    ws.on('close', (code, reason) => {
      if (ws !== this.ws) return;
      clearTimeout(this.connectTimer);
      if (this.state === 'done' || this.state === 'failed') return;
      const kind = closeKindOf(code);
      const text = reason.toString() || (kind ? CloseCodes[kind].reason : 'no reason given');
      // Only a connection that broke (not one the coordinator closed on purpose) is retried.
      if (this.joined && RETRIABLE_CLOSE_CODES.has(code)) this.dropped(`code ${code}`);
      else this.fail(new PeerError(`coordinator closed the connection (code ${code}: ${text})`), false);
    });
    return ws;
  }

  /**
   * The connection was lost during the job: reconnect with exponential backoff and jitter
   * (100 ms doubling to 5 s, times 0.5 to 1.5) until --reconnect-timeout; on rejoining, the
   * coordinator sends the job's setup again and the round to resume from.
   */
  private dropped(why: string): void {
    if (this.state === 'done' || this.state === 'failed') return;
    const now = Date.now();
    this.lostAt ??= now;
    if (now - this.lostAt > this.cfg.reconnectTimeoutMs) {
      this.fail(new PeerError(`lost the coordinator (${why}) and could not rejoin within ${this.cfg.reconnectTimeoutMs} ms`), false);
      return;
    }
    const delay = Math.min(5000, 100 * 2 ** this.attempt) * (0.5 + Math.random());
    this.attempt++;
    this.state = 'connecting';
    this.log.warn({ why, attempt: this.attempt, delayMs: Math.round(delay) }, 'connection lost; reconnecting');
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      if (this.state !== 'failed' && this.state !== 'done') this.ws = this.connect();
    }, delay);
  }

  close(): void {
    this.fail(new PeerError('party stopped'));
  }

  /** Where the privacy ledger is kept between restarts: next to the model. */
  private get ledgerPath(): string {
    return this.cfg.model.replace(/(\.json)?$/, '.ledger.json');
  }

  private get model(): RidgeXUpdate | SgdModel | undefined {
    return this.x ?? this.sgd;
  }

  private send(msg: PartyMessage): void {
    this.ws.send(encode(msg));
  }

  private context(): ValidationContext {
    return {
      jobId: this.jobId,
      n: this.model?.n,
      nTest: this.testX?.rows,
      round: undefined,
      step: this.sgd ? this.sgdStep + 1 : undefined,
      batchRows: this.sgdRows.length,
      fileRows: { train: this.train.ids.length, test: this.test?.ids.length ?? 0 },
    };
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    try {
      if (!isBinary) throw new ProtocolError('malformed', 'text frame; messages are binary MessagePack');
      const msg = validateCoordinatorMessage(decode(data as Buffer), this.context());
      this.handle(msg);
    } catch (err) {
      if (err instanceof ProtocolError) {
        this.log.error({ close: err.closeCode, err: err.message }, 'bad message from coordinator');
        this.fail(new PeerError(`coordinator sent a bad message: ${err.message}`), true, err.kind);
      } else if (err instanceof DataError || err instanceof ConfigError) {
        this.fail(err, true, 'partyFailure');
      } else {
        this.fail(new PeerError(`internal error: ${(err as Error).message}`), true, 'internal');
      }
    }
  }

  private expect(...states: State[]): void {
    if (!states.includes(this.state)) throw new ProtocolError('unexpected', `message not expected in state '${this.state}'`);
  }

  private handle(msg: CoordinatorMessage): void {
    switch (msg.type) {
      case 'challenge': {
        this.expect('challenge');
        if (msg.protocolVersion !== PROTOCOL_VERSION)
          throw new ProtocolError('versionMismatch', `party speaks version ${PROTOCOL_VERSION}, coordinator sent version ${msg.protocolVersion}`);
        this.state = 'welcome';
        const { cfg, train, test } = this;
        this.send({
          type: 'hello',
          protocolVersion: PROTOCOL_VERSION,
          partyId: cfg.partyId,
          jobId: this.jobId ?? cfg.jobId,
          features: this.features,
          trainRows: train.ids.length,
          testRows: test?.ids.length ?? 0,
          proof: cfg.token === undefined ? null : helloProof(cfg.token, msg.nonce, cfg.partyId, this.jobId ?? cfg.jobId),
        });
        return;
      }
      case 'welcome': {
        this.expect('welcome');
        if (msg.protocolVersion !== PROTOCOL_VERSION)
          throw new ProtocolError('versionMismatch', `party speaks version ${PROTOCOL_VERSION}, coordinator sent version ${msg.protocolVersion}`);
        clearTimeout(this.connectTimer);
        if (this.jobId !== undefined && msg.jobId !== this.jobId) throw new ProtocolError('wrongJob', `rejoining job '${this.jobId}', the coordinator runs '${msg.jobId}'`);
        this.jobId = msg.jobId;
        this.state = 'setup';
        this.log.info({ jobId: msg.jobId, rejoin: this.joined }, 'joined job');
        if (this.privacy.enabled && !this.joined) this.privacy.restoreLedger(this.ledgerPath, msg.jobId);
        this.send({ type: 'ids', jobId: msg.jobId, set: 'train', hashes: hashIds(this.train.ids, msg.hashKey) });
        if (this.test) this.send({ type: 'ids', jobId: msg.jobId, set: 'test', hashes: hashIds(this.test.ids, msg.hashKey) });
        return;
      }
      case 'setup': {
        this.expect('setup');
        const t0 = performance.now();
        const D = csrSelectRows(this.train.X, msg.trainRows);
        if (msg.algorithm === 'sgd') {
          if (this.privacy.enabled) throw new ConfigError('privacy is not available with --algorithm sgd (its releases are not analysed); use --mechanism none');
          this.sgd = new SgdModel(D, msg.lambda, this.cfg.intercept);
        } else this.x = new RidgeXUpdate(D, msg.lambda, this.cfg.intercept);
        if (this.privacy.enabled && this.x?.form === 'cg')
          throw new ConfigError(`privacy needs a factorised x-update, and this block (${D.rows} rows x ${D.cols} features) is too large for one (limit ${FACTOR_LIMIT} on the smaller side)`);
        if (this.test && msg.testRows.length > 0) this.testX = csrSelectRows(this.test.X, msg.testRows);
        const privacy = this.privacy.calibrate({ lambda: msg.lambda, rho: msg.rho, rounds: msg.rounds, parties: msg.parties, features: this.features, n: D.rows });
        this.state = 'training';
        this.log.info(
          { rows: D.rows, droppedRows: this.train.ids.length - D.rows, testRows: this.testX?.rows ?? 0, algorithm: msg.algorithm, form: this.x?.form, factorMs: Math.round(performance.now() - t0) },
          'aligned and factorised',
        );
        this.log.info({ ...privacy }, `privacy: ${privacy.mechanism === 'none' ? 'none, shares are sent without noise' : privacy.mechanism}`);
        this.joined = true;
        this.lostAt = undefined;
        this.attempt = 0;
        this.send({ type: 'ready', jobId: this.jobId!, privacy });
        return;
      }
      case 'resume': {
        this.expect('training');
        if (!this.x) throw new ProtocolError('unexpected', 'resume in an SGD job');
        if (this.privacy.enabled && this.privacy.releases < msg.round)
          throw new ConfigError(`cannot resume at round ${msg.round}: this party's privacy ledger records only ${this.privacy.releases} releases (was ${this.ledgerPath} lost?)`);
        this.x.released.set(msg.share);
        this.round = msg.round;
        this.previous = undefined;
        this.log.info({ round: msg.round }, 'resumed');
        return;
      }
      case 'sgd': {
        this.expect('training');
        const model = this.sgd;
        if (!model) throw new ProtocolError('unexpected', 'an sgd step in an ADMM job');
        model.apply(this.sgdRows, msg.gradient, msg.lr);
        this.sgdStep = msg.step;
        if (msg.full) {
          this.round = msg.epoch;
          this.sgdRows = new Uint32Array(0);
          this.send({ type: 'share', jobId: this.jobId!, round: msg.epoch, share: model.share(), penaltySq: model.penaltySq(), epsilonSpent: 0 });
        } else {
          this.sgdRows = msg.rows;
          this.send({ type: 'batchScores', jobId: this.jobId!, step: msg.step, scores: model.scoresFor(msg.rows) });
        }
        return;
      }
      case 'round': {
        this.expect('training');
        if (!this.x) throw new ProtocolError('unexpected', 'an ADMM round in an SGD job');
        if (msg.round !== this.round + 1) throw new ProtocolError('unexpected', `round ${msg.round} after round ${this.round}`);
        const x = this.x!;
        const allowed = this.privacy.check(msg.round, msg.rho);
        if (!allowed.ok) {
          this.log.warn({ round: msg.round, epsilonSpent: this.privacy.spent }, `privacy: refusing round: ${allowed.why}`);
          this.send({ type: 'exhausted', jobId: this.jobId!, round: msg.round, epsilonSpent: this.privacy.spent });
          return;
        }
        this.round = msg.round;
        this.previous = { x: x.x.slice(), intercept: x.intercept };
        x.updateFromBroadcast(msg.c, msg.rho, this.privacy.bounds);
        this.privacy.release(x);
        if (this.privacy.enabled) this.privacy.saveLedger(this.ledgerPath, this.jobId!);
        // ||x_m||^2 depends on the data and is not noised, so with privacy on it is not sent
        // (the coordinator's objective then lacks the penalty; it is computed from noisy shares anyway).
        const penaltySq = this.privacy.enabled ? 0 : x.penaltySq();
        this.send({ type: 'share', jobId: this.jobId!, round: msg.round, share: x.released, penaltySq, epsilonSpent: this.privacy.spent });
        return;
      }
      case 'evaluate': {
        this.expect('training');
        if (!this.testX) throw new ProtocolError('unexpected', 'evaluate, but no test set was aligned');
        this.send({ type: 'scores', jobId: this.jobId!, round: this.round, scores: this.model!.scores(this.testX) });
        return;
      }
      case 'done': {
        this.expect('training');
        if (this.x && msg.rounds === this.round - 1 && this.previous) {
          // Another party refused this round: the job's model is the one of the round before.
          this.x!.x.set(this.previous.x);
          this.x!.intercept = this.previous.intercept;
        }
        this.writeModel(msg);
        this.state = 'done';
        this.log.info({ rounds: msg.rounds, reason: msg.reason, model: this.cfg.model }, 'model written');
        const result = { jobId: msg.jobId, rounds: msg.rounds, model: this.cfg.model };
        // Resolve once the close handshake is over, so the coordinator sees a clean close.
        const fallback = setTimeout(() => this.ws.terminate(), 5000);
        this.ws.once('close', () => {
          clearTimeout(fallback);
          this.resolve(result);
        });
        this.ws.close(CloseCodes.done.code, 'model written');
        return;
      }
      default:
        assertNever(msg);
    }
  }

  private writeModel(done: Done): void {
    const x = this.model!;
    const names = this.train.featureNames;
    const model = {
      format: 'admm-share-party-model/1',
      jobId: done.jobId,
      partyId: this.cfg.partyId,
      features: this.features,
      featureNames: names,
      coefficients: Array.from(x.x),
      intercept: this.cfg.intercept ? x.intercept : null,
      hyperParameters: { ...done.params, rounds: done.rounds, stopReason: done.reason },
      rowNormalisation: this.privacy.enabled ? 'rows with norm > 1 scaled to norm 1 (apply the same to new data)' : null,
      trainingObjective: done.objective,
      rows: x.n,
      data: this.cfg.data,
      createdAt: new Date().toISOString(),
    };
    mkdirSync(dirname(this.cfg.model), { recursive: true });
    writeFileAtomic(this.cfg.model, JSON.stringify(model, null, 2) + '\n');
    writeFileAtomic(privacyReportPath(this.cfg.model), JSON.stringify(this.privacy.report(this.cfg.partyId, done.jobId, this.rowsScaled), null, 2) + '\n');
  }

  private fail(err: Error, close = true, kind: keyof typeof CloseCodes = 'aborted'): void {
    if (this.state === 'done' || this.state === 'failed') return;
    this.state = 'failed';
    clearTimeout(this.connectTimer);
    clearTimeout(this.retryTimer);
    if (close && (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING)) {
      if (this.ws.readyState === WebSocket.OPEN) this.ws.close(CloseCodes[kind].code, closeReason(kind, err.message));
      else this.ws.terminate();
    }
    this.reject(err);
  }
}
