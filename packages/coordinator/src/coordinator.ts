import { randomBytes, timingSafeEqual } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { type Server as HttpServer, createServer as createHttpServer } from 'node:http';
import { type Server as HttpsServer, createServer as createHttpsServer } from 'node:https';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket, type RawData } from 'ws';
import {
  ConfigError,
  PeerError,
  classificationMetrics,
  type Loss,
  hashIds,
  helloProof,
  hashKeys,
  lossByName,
  meanLoss,
  writeFileAtomic,
} from '@admm-share/core';
import {
  type CloseKind,
  type CoordinatorMessage,
  type LossName,
  type PartyMessage,
  type PrivacyInfo,
  type Scores,
  type Share,
  type StopReason,
  CloseCodes,
  ID_HASH_BYTES,
  PROTOCOL_VERSION,
  ProtocolError,
  closeReason,
  decode,
  encode,
  validatePartyMessage,
} from '@admm-share/protocol';
import seedrandom from 'seedrandom';
import { AdmmCoordinator, type RoundStats, type Variant } from './admm.js';
import { type LabelOptions, type Labels, loadLabels } from './labels.js';
import { CHECKPOINT_FILE, type Checkpoint, labelsDigest, readCheckpoint, writeCheckpoint } from './checkpoint.js';

export interface SgdConfig {
  batchSize: number;
  /** Learning rate of epoch e: lr / (1 + lrDecay (e - 1)). */
  lr: number;
  lrDecay: number;
}

export interface CoordinatorConfig {
  algorithm: 'admm' | 'sgd';
  sgd: SgdConfig;
  host: string;
  /** 0 picks a free port; the `listening` log line reports it. */
  port: number;
  labels: string;
  testLabels?: string;
  labelOptions: LabelOptions;
  /** Party ids allowed to join; the job starts when all of them have. */
  parties: string[];
  jobId: string;
  loss: LossName;
  lambda: number;
  variant: Variant;
  /** undefined: the data-scaled default (see defaultRho). */
  rho?: number;
  alpha: number;
  maxRounds: number;
  tolerance: { abs: number; rel: number };
  /** Evaluate on the test set every k rounds (0: only at the end). */
  evalEvery: number;
  /** Directory for trace.jsonl and summary.json. */
  out: string;
  /** An unauthenticated connection must say hello within this time. */
  helloTimeoutMs: number;
  /** A party that loses its connection during ADMM training may rejoin within this time (0: never). */
  rejoinTimeoutMs: number;
  /** A party must answer each request (share, scores, ready) within this time. */
  roundTimeoutMs: number;
  /** Ping every connected party this often; one missed pong drops the connection. */
  heartbeatMs: number;
  /** Largest number of rows a party may declare, relative to the label file (bounds memory and frame size). */
  maxRowsFactor: number;
  /** Each party's secret; when given, a hello must carry a valid proof (see helloProof). */
  credentials?: Record<string, string>;
  /** Write a checkpoint every k completed rounds (0: never). */
  checkpointEvery: number;
  /** Continue the job checkpointed in `out` instead of starting one. */
  resume: boolean;
  /** Whether --job was given (a resume then checks it against the checkpoint). */
  jobIdGiven?: boolean;
  /** Serve wss:// with this certificate and key (PEM); with clientCa, require client certificates from that CA. */
  tls?: { cert: string; key: string; clientCa?: string };
}

export interface PartySummary {
  id: string;
  features: number;
  rows: number;
  testRows: number;
}

export interface TestMetrics {
  logLoss?: number;
  accuracy?: number;
  auc?: number;
  rmse?: number;
}

export interface Summary {
  jobId: string;
  algorithm: 'admm' | 'sgd';
  sgd?: SgdConfig;
  variant: Variant;
  loss: LossName;
  lambda: number;
  rho: { initial: number; final: number };
  alpha: number;
  rounds: number;
  reason: StopReason;
  converged: boolean;
  objective: number;
  /**
   * The coordinator computes the objective from what it receives: with noise on, from the
   * noisy shares and without the parties' penalties (which they do not send then), which is
   * not the objective of the parties' models.
   */
  objectiveFrom: 'shares' | 'noisy shares';
  residuals: { primal: number; dual: number } | null;
  test?: TestMetrics;
  /** Present when the coordinator has test labels but did not evaluate, with the reason (then no `test`). */
  evaluation?: { skipped: string };
  seconds: { total: number; setup: number; training: number; perRound: number };
  bytes: { toCoordinator: number; fromCoordinator: number };
  parties: PartySummary[];
  rows: { train: number; test: number };
  droppedRows: number;
  droppedTestRows: number;
  /** Each party's privacy setting as it reported it, and the budget it had spent at the end. */
  privacy: (PrivacyInfo & { party: string; epsilonSpent: number })[];
}

export interface CoordinatorHandle {
  port: number;
  done: Promise<Summary>;
  close(): Promise<void>;
}

/**
 * Default rho, scaled to the data: the loss is an average over N samples, so its
 * curvature per sample is O(1/N) and rho is 0.01/N (exact form; 0.3/N for the paper's
 * form, which needs a larger rho to stay stable). See docs/rho.md for the measurements.
 */
export function defaultRho(variant: Variant, n: number): number {
  return (variant === 'exact' ? 0.01 : 0.3) / n;
}

/** Bytes of MessagePack framing allowed on top of a message's vectors. */
const ENVELOPE_BYTES = 4096;
/** A hello is a few short fields; anything larger before authentication is hostile. */
const HELLO_MAX_BYTES = 1024;
/**
 * Connections allowed to wait for their hello at once; each holds a socket and a timer for
 * at most --hello-timeout, so this bounds what a flood of silent connections can hold.
 */
const MAX_PENDING_CONNECTIONS = 64;
/** Unsent bytes a party may leave queued (it is not reading) before its connection is closed, in messages. */
const MAX_QUEUED_MESSAGES = 4;

interface JobContext {
  parties: PartyState[];
  y: Float64Array;
  yTest: Float64Array | undefined;
  rho0: number;
  privacy: (PrivacyInfo & { party: string })[];
  maxRounds: number;
  noisy: boolean;
  epsilonSpent: Record<string, number>;
  setupSeconds: number;
  dropped: { train: number; test: number };
  labelRows: { train: Uint32Array; test: Uint32Array };
  /** Rounds already done (a resumed job continues after them). */
  startRound: number;
  restored: boolean;
  /** Why the job does not evaluate on the test labels it has (a party has no test set). */
  evaluationSkipped: string | undefined;
}

/** The socket of a party that has not (re)connected to a resumed coordinator yet: sends go nowhere. */
const DETACHED = { readyState: 3, OPEN: 1, bufferedAmount: 0, send() {}, close() {}, terminate() {}, ping() {} } as unknown as WebSocket;

interface TrainResult {
  reason: StopReason;
  objective: number;
  residuals: { primal: number; dual: number } | null;
  metrics: TestMetrics | undefined;
  trainingSeconds: number;
  rho: { initial: number; final: number };
}

interface FinishedRound {
  round: number;
  epsilonSpent: Record<string, number>;
  stats: RoundStats;
  penaltySq: number;
  test: TestMetrics | undefined;
  seconds: number;
  roundSeconds: number;
  bytes: { toCoordinator: number; fromCoordinator: number };
}

type Phase = 'waiting' | 'setup' | 'training' | 'finishing' | 'done' | 'failed';

interface PartyState {
  id: string;
  ws: WebSocket;
  features: number;
  fileRows: { train: number; test: number };
  hashes: { train?: Uint8Array; test?: Uint8Array };
  aligned: { train: Uint32Array; test: Uint32Array } | undefined;
  inbox: PartyMessage[];
  waiter: { deliver: (m: PartyMessage) => void; fail: (e: Error) => void } | undefined;
  /** False while a party that left a running job may still come back. */
  connected: boolean;
  rejoinTimer?: NodeJS.Timeout;
  /** A rejoining party's progress: its ids, then its ready. */
  rejoin?: { hashes: { train?: Uint8Array; test?: Uint8Array }; awaitingReady: boolean };
  /** The last request broadcast to the party (round, evaluate), resent when it rejoins. */
  lastRequest?: Uint8Array;
  /** Heartbeat: false after a ping until the pong comes back. */
  alive: boolean;
  /** The privacy setting its last ready reported. */
  privacyInfo?: PrivacyInfo;
}

/**
 * Why a job with test labels cannot evaluate: a party without a test set has no test scores
 * to send (it was given no --test, or has privacy on without --release-test-scores).
 */
function noTestSet(parties: { id: string; fileRows: { test: number } }[]): string | undefined {
  const ids = parties.filter((p) => p.fileRows.test === 0).map((p) => p.id);
  if (ids.length === 0) return undefined;
  const who = ids.length === 1 ? `party ${ids[0]} has` : `parties ${ids.join(', ')} have`;
  return `${who} no test set: no test metrics for this job; give every party --test (with privacy also --release-test-scores) to evaluate`;
}

export async function start(config: CoordinatorConfig, deps: { logger: Logger }): Promise<CoordinatorHandle> {
  const c = new Coordinator(config, deps.logger);
  const port = await c.listen();
  return { port, done: c.done, close: () => c.close() };
}

class Coordinator {
  readonly done: Promise<Summary>;
  private resolveDone!: (s: Summary) => void;
  private rejectDone!: (e: Error) => void;
  private readonly labels: Labels;
  private readonly testLabels: Labels | undefined;
  private hashKey: Uint8Array = randomBytes(32);
  private readonly parties = new Map<string, PartyState>();
  private wss: WebSocketServer | undefined;
  private server: HttpServer | HttpsServer | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private phase: Phase = 'waiting';
  private round = 0;
  /** Connections that have not said hello yet. */
  private pending = 0;
  /** For rejoining parties: the ADMM state, the last completed round, the setup, the aligned ids. */
  private admm: AdmmCoordinator | undefined;
  private completedRound = 0;
  private setupMessage: Extract<CoordinatorMessage, { type: 'setup' }> | undefined;
  private readonly keptKeys: { train?: string[]; test?: string[] } = {};
  /** The checkpoint to continue from (--resume). */
  private readonly resumeFrom: Checkpoint | undefined;
  private onAllRejoined: (() => void) | undefined;
  private ctx: JobContext | undefined;
  private labelsDigest = '';
  private sgdStep = 0;
  private batchRows = 0;
  private n = 0;
  private nTest = 0;
  private bytesIn = 0;
  private bytesOut = 0;
  private readonly started = performance.now();
  private allJoined!: () => void;
  private readonly joined = new Promise<void>((r) => (this.allJoined = r));
  private readonly maxRows: number;

  constructor(
    private cfg: CoordinatorConfig,
    private readonly log: Logger,
  ) {
    if (cfg.parties.length === 0) throw new ConfigError('no parties configured');
    if (cfg.credentials) {
      const missing = cfg.parties.filter((p) => !cfg.credentials![p]);
      if (missing.length) throw new ConfigError(`no credential for ${missing.join(', ')} in the credentials file`);
    } else log.warn('no credentials configured: anyone who can reach this port can join as a listed party (pass --credentials)');
    if (new Set(cfg.parties).size !== cfg.parties.length) throw new ConfigError(`party ids must be distinct: ${cfg.parties.join(', ')}`);
    this.done = new Promise((res, rej) => {
      this.resolveDone = res;
      this.rejectDone = rej;
    });
    this.done.catch(() => undefined);
    this.labels = loadLabels(cfg.labels, cfg.loss, cfg.labelOptions);
    this.testLabels = cfg.testLabels ? loadLabels(cfg.testLabels, cfg.loss, cfg.labelOptions) : undefined;
    this.labelsDigest = labelsDigest(this.labels, this.testLabels);
    if (cfg.resume) {
      const cp = readCheckpoint(join(cfg.out, CHECKPOINT_FILE));
      if (cp.labelsDigest !== this.labelsDigest) throw new ConfigError('--resume: the label files differ from the ones the checkpointed job used');
      if (cp.setup.algorithm !== 'admm') throw new ConfigError('--resume: only ADMM jobs can be resumed');
      if (cp.setup.parties !== cfg.parties.length) throw new ConfigError(`--resume: the job had ${cp.setup.parties} parties, --parties lists ${cfg.parties.length}`);
      if (cfg.jobIdGiven && cfg.jobId !== cp.jobId) throw new ConfigError(`--resume: the checkpoint is for job '${cp.jobId}', not '${cfg.jobId}'`);
      this.cfg = { ...cfg, jobId: cp.jobId };
      this.hashKey = cp.hashKey;
      this.resumeFrom = cp;
    }
    this.maxRows = Math.ceil(cfg.maxRowsFactor * Math.max(this.labels.ids.length, this.testLabels?.ids.length ?? 0)) + 1024;
    log.info(
      { labels: cfg.labels, rows: this.labels.ids.length, testRows: this.testLabels?.ids.length ?? 0, classes: this.labels.classes },
      'labels loaded',
    );
  }

  listen(): Promise<number> {
    // The largest legitimate frame: a party's id hashes (up to maxRows of them) or a
    // vector of doubles over the label rows, whichever is larger. Never the ws default.
    const rowsForVectors = Math.max(this.labels.ids.length, this.testLabels?.ids.length ?? 0);
    const maxPayload = Math.max(this.maxRows * ID_HASH_BYTES, rowsForVectors * 8) + ENVELOPE_BYTES;
    const tls = this.cfg.tls;
    const server = tls
      ? createHttpsServer({
          cert: tls.cert,
          key: tls.key,
          // Mutual TLS: only clients with a certificate from this CA get through the handshake.
          ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
        })
      : createHttpServer();
    this.server = server;
    return new Promise((resolve, reject) => {
      const wss = new WebSocketServer({ server, maxPayload, perMessageDeflate: false });
      this.wss = wss;
      const onError = (err: Error) => {
        const hint = (err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? '; choose another --port (--port 0 picks a free one)' : '';
        if (this.phase === 'waiting' && !server.listening) reject(new ConfigError(`cannot listen on ${this.cfg.host}:${this.cfg.port}: ${err.message}${hint}`));
        else this.fail(new PeerError(`server error: ${err.message}`));
      };
      server.on('error', onError);
      wss.on('error', onError);
      server.on('tlsClientError', (err: Error) => this.log.warn({ err: err.message }, 'TLS handshake failed'));
      // Heartbeats: a party that misses a pong for a whole interval is cut off (then it may
      // rejoin), so a half-open connection cannot hold the job for --round-timeout.
      this.heartbeat = setInterval(() => {
        for (const p of this.parties.values()) {
          if (!p.connected || p.ws.readyState !== p.ws.OPEN) continue;
          if (!p.alive) {
            this.log.warn({ party: p.id, heartbeatMs: this.cfg.heartbeatMs }, 'no heartbeat; dropping the connection');
            p.ws.terminate();
            continue;
          }
          p.alive = false;
          p.ws.ping();
        }
      }, this.cfg.heartbeatMs);
      this.heartbeat.unref();
      server.on('listening', () => {
        const addr = server.address();
        const port = typeof addr === 'object' && addr ? addr.port : this.cfg.port;
        this.log.info({ port, host: this.cfg.host, tls: Boolean(tls), mutualTls: Boolean(tls?.clientCa), jobId: this.cfg.jobId, parties: this.cfg.parties, maxPayload }, 'listening');
        resolve(port);
        this.run().catch((err) => this.fail(err));
      });
      wss.on('connection', (ws, req) => this.onConnection(ws, req.socket.remoteAddress ?? '?'));
      server.listen(this.cfg.port, this.cfg.host);
    });
  }

  /**
   * Stop on a signal. During ADMM training the state of the last completed round is
   * checkpointed and the parties are told the coordinator is going away (1001), so they keep
   * trying to rejoin and `--resume` continues the job; otherwise the job is aborted.
   */
  async close(): Promise<void> {
    if (this.phase === 'training' && this.admm && this.ctx && this.cfg.algorithm === 'admm' && this.completedRound > 0) {
      this.checkpoint(this.ctx, this.completedRound, this.admm);
      const reason = `coordinator stopping after round ${this.completedRound}; it can be resumed`;
      for (const p of this.parties.values()) if (p.connected) p.ws.close(1001, reason);
      this.log.warn({ round: this.completedRound }, 'stopped: checkpoint written, resume with --resume');
      this.phase = 'failed';
      this.rejectDone(new PeerError(`stopped after round ${this.completedRound}; checkpoint written to ${join(this.cfg.out, CHECKPOINT_FILE)}`));
    } else if (this.phase !== 'done' && this.phase !== 'failed') this.fail(new PeerError('coordinator stopped'));
    await this.shutdownServer();
  }

  // ---- connections -------------------------------------------------------

  private onConnection(ws: WebSocket, remote: string): void {
    const log = this.log.child({ remote });
    let party: PartyState | undefined;
    ws.on('error', (err) => log.warn({ err: err.message }, 'socket error'));
    if (this.pending >= MAX_PENDING_CONNECTIONS) {
      log.warn({ close: CloseCodes.busy.code, pending: this.pending }, 'closing connection');
      ws.close(CloseCodes.busy.code, closeReason('busy', `${this.pending} connections are already waiting to say hello`));
      return;
    }
    this.pending++;
    let counted = true;
    const settle = () => {
      if (counted) this.pending--;
      counted = false;
    };
    const helloTimer = setTimeout(() => {
      if (!party) reject('helloTimeout', `no hello within ${this.cfg.helloTimeoutMs} ms`);
    }, this.cfg.helloTimeoutMs);
    const reject = (kind: CloseKind, detail: string) => {
      log.warn({ close: CloseCodes[kind].code, detail, party: party?.id }, 'closing connection');
      ws.close(CloseCodes[kind].code, closeReason(kind, detail));
    };
    // Every connection starts with a fresh challenge; the hello must answer it.
    const nonce = randomBytes(32);
    const challenge = encode({ type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce });
    this.bytesOut += challenge.length;
    ws.send(challenge);
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const bytes = toBytes(data);
      this.bytesIn += bytes.length;
      try {
        if (!isBinary) throw new ProtocolError('malformed', 'text frame; messages are binary MessagePack');
        if (!party) {
          if (bytes.length > HELLO_MAX_BYTES) throw new ProtocolError('invalid', `${bytes.length}-byte frame before hello (limit ${HELLO_MAX_BYTES})`);
          const msg = validatePartyMessage(decode(bytes), { jobId: undefined });
          if (msg.type !== 'hello') throw new ProtocolError('unexpected', `'${msg.type}' before hello`);
          party = this.onHello(ws, msg, log, nonce);
          clearTimeout(helloTimer);
          settle();
          return;
        }
        const msg = validatePartyMessage(decode(bytes), this.contextFor(party));
        this.deliver(party, msg);
      } catch (err) {
        if (!(err instanceof ProtocolError)) {
          log.error({ err: (err as Error).message }, 'internal error handling a message');
          reject('internal', (err as Error).message);
          if (party) this.fail(new PeerError(`internal error handling a message from ${party.id}: ${(err as Error).message}`));
          return;
        }
        reject(err.kind, err.message);
        if (party && this.parties.get(party.id) === party) this.fail(new PeerError(`party ${party.id}: ${err.message}`));
      }
    });
    ws.on('close', (code, reason) => {
      clearTimeout(helloTimer);
      settle();
      if (!party || this.parties.get(party.id) !== party || party.ws !== ws) return;
      const why = `party ${party.id} disconnected (code ${code}${reason.length ? `: ${reason.toString()}` : ''})`;
      if (this.phase === 'training' && this.cfg.algorithm === 'admm' && this.cfg.rejoinTimeoutMs > 0) {
        // A lost connection during ADMM training: the party may reconnect (or be restarted)
        // and resume; the job waits for it up to --rejoin-timeout.
        const p = party;
        p.connected = false;
        p.rejoin = undefined;
        log.warn({ party: p.id, code, rejoinTimeoutMs: this.cfg.rejoinTimeoutMs }, 'party disconnected; waiting for it to rejoin');
        p.rejoinTimer = setTimeout(() => this.fail(new PeerError(`${why}, and did not rejoin within ${this.cfg.rejoinTimeoutMs} ms`)), this.cfg.rejoinTimeoutMs);
        return;
      }
      if (this.phase === 'finishing' || this.phase === 'done') {
        log.debug({ party: party.id, code }, 'party closed');
        this.partyClosed(party);
      } else if (this.phase === 'waiting') {
        // Before the job starts a party may leave and join again (after fixing its data, say).
        log.warn({ party: party.id, code, reason: reason.toString() }, 'party left before the job started');
        this.parties.delete(party.id);
      } else if (this.phase !== 'failed') this.fail(new PeerError(why));
    });
  }

  private onHello(ws: WebSocket, msg: Extract<PartyMessage, { type: 'hello' }>, log: Logger, nonce: Uint8Array): PartyState {
    const reject = (kind: CloseKind, detail: string): never => {
      throw new ProtocolError(kind, detail);
    };
    if (msg.protocolVersion !== PROTOCOL_VERSION)
      reject('versionMismatch', `coordinator speaks version ${PROTOCOL_VERSION}, party ${msg.partyId} sent version ${msg.protocolVersion}`);
    if (!this.cfg.parties.includes(msg.partyId)) reject('unknownParty', `'${msg.partyId}' is not one of ${this.cfg.parties.join(', ')}`);
    const secret = this.cfg.credentials?.[msg.partyId];
    if (this.cfg.credentials) {
      // Same message for a missing and a wrong proof; constant-time comparison.
      const expected = helloProof(secret!, nonce, msg.partyId, msg.jobId);
      if (!msg.proof || !timingSafeEqual(Buffer.from(msg.proof), Buffer.from(expected))) reject('unauthorized', `bad or missing credential for '${msg.partyId}'`);
    }
    const known = this.parties.get(msg.partyId);
    if (known && !known.connected) {
      // A party that left the running job comes back.
      if (msg.jobId !== null && msg.jobId !== this.cfg.jobId) reject('wrongJob', `party wants job '${msg.jobId}', this is job '${this.cfg.jobId}'`);
      // (A resumed coordinator learns the feature counts again from the rejoining parties.)
      if (known.features > 0 && msg.features !== known.features) reject('alignment', `party ${msg.partyId} rejoins with ${msg.features} features, it had ${known.features}`);
      known.features = msg.features;
      clearTimeout(known.rejoinTimer);
      known.ws = ws;
      known.connected = true;
      known.alive = true;
      ws.on('pong', () => (known.alive = true));
      known.fileRows = { train: msg.trainRows, test: msg.testRows };
      known.rejoin = { hashes: {}, awaitingReady: false };
      log.info({ party: known.id }, 'party rejoining');
      this.send(known, { type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: this.cfg.jobId, hashKey: this.hashKey });
      return known;
    }
    if (known) reject('duplicateParty', `'${msg.partyId}' is already connected`);
    if (msg.jobId !== null && msg.jobId !== this.cfg.jobId) reject('wrongJob', `party wants job '${msg.jobId}', this is job '${this.cfg.jobId}'`);
    if (this.phase !== 'waiting') reject('unexpected', 'the job has already started');
    if (msg.trainRows > this.maxRows || msg.testRows > this.maxRows)
      reject('invalid', `party declares ${Math.max(msg.trainRows, msg.testRows)} rows; limit is ${this.maxRows}`);
    const state: PartyState = {
      id: msg.partyId,
      ws,
      features: msg.features,
      fileRows: { train: msg.trainRows, test: msg.testRows },
      hashes: {},
      aligned: undefined,
      inbox: [],
      waiter: undefined,
      connected: true,
      alive: true,
    };
    ws.on('pong', () => (state.alive = true));
    this.parties.set(state.id, state);
    log.info({ party: state.id, features: msg.features, rows: msg.trainRows, testRows: msg.testRows }, 'party joined');
    this.send(state, { type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: this.cfg.jobId, hashKey: this.hashKey });
    return state;
  }

  private contextFor(p: PartyState) {
    return {
      jobId: this.cfg.jobId,
      n: this.phase === 'training' || this.phase === 'finishing' ? this.n : undefined,
      nTest: this.nTest,
      round: this.phase === 'training' ? this.round : undefined,
      declaredRows: p.fileRows,
      step: this.cfg.algorithm === 'sgd' ? this.sgdStep : undefined,
      batchRows: this.batchRows,
    };
  }

  /** Messages that arrive while the job is not waiting for them are protocol violations. */
  private deliver(p: PartyState, msg: PartyMessage): void {
    if (p.rejoin) {
      this.onRejoinMessage(p, msg);
      return;
    }
    if (msg.type === 'ids') {
      if (this.phase !== 'waiting') throw new ProtocolError('unexpected', 'ids after alignment');
      if (msg.set === 'test' && !this.testLabels) {
        p.hashes.test = new Uint8Array(0); // the coordinator has no test labels: nothing to align
      } else {
        if (p.hashes[msg.set]) throw new ProtocolError('unexpected', `${msg.set} ids sent twice`);
        p.hashes[msg.set] = msg.hashes;
      }
      if (this.allIdsIn()) this.allJoined();
      return;
    }
    if (msg.type === 'hello') throw new ProtocolError('unexpected', 'second hello');
    if (p.waiter) {
      const w = p.waiter;
      p.waiter = undefined;
      w.deliver(msg);
      return;
    }
    // A party speaks only when asked, so at most one message can be pending.
    if (p.inbox.length > 0) throw new ProtocolError('unexpected', `'${msg.type}' while '${p.inbox[0].type}' is still unprocessed`);
    p.inbox.push(msg);
  }

  private allIdsIn(): boolean {
    if (this.parties.size !== this.cfg.parties.length) return false;
    for (const p of this.parties.values()) {
      if (!p.hashes.train) return false;
      if (p.fileRows.test > 0 && !p.hashes.test) return false;
    }
    return true;
  }

  private next<T extends PartyMessage['type']>(p: PartyState, ...types: T[]): Promise<Extract<PartyMessage, { type: T }>> {
    const check = (m: PartyMessage) => {
      if (!(types as string[]).includes(m.type)) throw new ProtocolError('unexpected', `'${m.type}' while waiting for '${types.join("' or '")}'`);
      return m as Extract<PartyMessage, { type: T }>;
    };
    const queued = p.inbox.shift();
    if (queued) return Promise.resolve(check(queued));
    if (this.phase === 'failed') return Promise.reject(new PeerError('job aborted'));
    return new Promise((resolve, reject) => {
      // A party that stays silent ends the job after --round-timeout instead of hanging it.
      const deadline = setTimeout(() => {
        p.waiter = undefined;
        const detail = `no '${types.join("' or '")}' within ${this.cfg.roundTimeoutMs} ms`;
        p.ws.close(CloseCodes.timeout.code, closeReason('timeout', detail));
        this.fail(new PeerError(`party ${p.id}: ${detail}`));
      }, this.cfg.roundTimeoutMs);
      p.waiter = {
        deliver: (m) => {
          clearTimeout(deadline);
          try {
            resolve(check(m));
          } catch (err) {
            const e = err as ProtocolError;
            p.ws.close(e.closeCode, closeReason(e.kind, e.message));
            reject(new PeerError(`party ${p.id}: ${e.message}`));
          }
        },
        fail: (e) => {
          clearTimeout(deadline);
          reject(e);
        },
      };
    });
  }

  /** Write the state the job needs to go on after a crash (atomically; see checkpoint.ts). */
  private checkpoint(ctx: JobContext, round: number, admm: AdmmCoordinator): void {
    const { trainRows: _t, testRows: _s, ...setup } = this.setupMessage!;
    writeCheckpoint(join(this.cfg.out, CHECKPOINT_FILE), {
      format: 'admm-share-checkpoint/1',
      jobId: this.cfg.jobId,
      round,
      hashKey: this.hashKey,
      labelsDigest: this.labelsDigest,
      labelRows: ctx.labelRows,
      keptKeys: { train: this.keptKeys.train!, test: this.keptKeys.test ?? null },
      dropped: ctx.dropped,
      setup,
      admm: admm.snapshot(),
    });
    this.log.debug({ round }, 'checkpoint written');
  }

  /** The same message to every party, encoded once (parties that are away get it when they rejoin). */
  private broadcast(parties: PartyState[], msg: CoordinatorMessage): void {
    const bytes = encode(msg);
    for (const p of parties) {
      p.lastRequest = bytes;
      if (p.connected) this.sendBytes(p, bytes);
    }
  }

  /**
   * A rejoining party sends its ids again; its rows are aligned anew (its file may have been
   * reordered, not changed: every sample of the job must be there), it gets the job's setup,
   * and after its ready the round the job last completed with its share from that round, then
   * the request it has not answered yet.
   */
  private onRejoinMessage(p: PartyState, msg: PartyMessage): void {
    const r = p.rejoin!;
    if (msg.type === 'ids' && !r.awaitingReady) {
      if (r.hashes[msg.set]) throw new ProtocolError('unexpected', `${msg.set} ids sent twice`);
      r.hashes[msg.set] = msg.set === 'test' && !this.testLabels ? new Uint8Array(0) : msg.hashes;
      if (!r.hashes.train || (p.fileRows.test > 0 && !r.hashes.test)) return;
      const rows = (set: 'train' | 'test') => {
        const kept = this.keptKeys[set];
        if (!kept) return new Uint32Array(0);
        const index = new Map(hashKeys(r.hashes[set]!).map((k, i) => [k, i]));
        return Uint32Array.from(kept, (k) => {
          const i = index.get(k);
          if (i === undefined) throw new ProtocolError('alignment', `party ${p.id} rejoined without a ${set} sample of the job`);
          return i;
        });
      };
      p.aligned = { train: rows('train'), test: rows('test') };
      r.awaitingReady = true;
      this.send(p, { ...this.setupMessage!, trainRows: p.aligned.train, testRows: p.aligned.test });
      return;
    }
    if (msg.type === 'ready' && r.awaitingReady) {
      p.rejoin = undefined;
      p.privacyInfo = msg.privacy;
      const m = this.cfg.parties.indexOf(p.id);
      this.send(p, { type: 'resume', jobId: this.cfg.jobId, round: this.completedRound, share: this.admm!.lastShare(m) });
      if (p.waiter && p.lastRequest) this.sendBytes(p, p.lastRequest);
      this.log.info({ party: p.id, round: this.completedRound }, 'party rejoined');
      if (this.onAllRejoined && [...this.parties.values()].every((q) => q.connected && !q.rejoin)) this.onAllRejoined();
      return;
    }
    throw new ProtocolError('unexpected', `'${msg.type}' while rejoining`);
  }

  private send(p: PartyState, msg: CoordinatorMessage): void {
    this.sendBytes(p, encode(msg));
  }

  /** A party that stops reading would make its queue grow without bound: close it instead. */
  private sendBytes(p: PartyState, bytes: Uint8Array): void {
    if (p.ws.bufferedAmount > MAX_QUEUED_MESSAGES * Math.max(bytes.length, 1 << 20)) {
      const detail = `${p.ws.bufferedAmount} bytes unread`;
      p.ws.close(CloseCodes.slowReader.code, closeReason('slowReader', detail));
      this.fail(new PeerError(`party ${p.id} stopped reading (${detail})`));
      return;
    }
    this.bytesOut += bytes.length;
    p.ws.send(bytes);
  }

  // ---- the job -----------------------------------------------------------

  /** A new job: wait for every party, align, set up, collect their ready. */
  private async startJob(): Promise<JobContext | undefined> {
    await Promise.race([this.joined, this.done.then(() => undefined)]);
    if (this.phase === 'failed') return undefined;
    this.phase = 'setup';
    const setupStart = performance.now();
    const parties = this.cfg.parties.map((id) => this.parties.get(id)!);
    const train = this.align('train', this.labels, parties);
    const evaluationSkipped = this.testLabels ? noTestSet(parties) : undefined;
    if (evaluationSkipped) this.log.warn({ parties: parties.filter((p) => p.fileRows.test === 0).map((p) => p.id) }, evaluationSkipped);
    const test = this.testLabels && !evaluationSkipped ? this.align('test', this.testLabels, parties) : undefined;
    this.n = train.labelRows.length;
    this.nTest = test?.labelRows.length ?? 0;
    const y = Float64Array.from(train.labelRows, (r) => this.labels.y[r]);
    const yTest = test ? Float64Array.from(test.labelRows, (r) => this.testLabels!.y[r]) : undefined;
    this.log.info({ rows: this.n, dropped: train.dropped, testRows: this.nTest, droppedTest: test?.dropped ?? 0 }, 'samples aligned');
    const rho0 = this.cfg.rho ?? defaultRho(this.cfg.variant, this.n);
    this.keptKeys.train = train.keptKeys;
    this.keptKeys.test = test?.keptKeys;
    this.setupMessage = {
      type: 'setup',
      jobId: this.cfg.jobId,
      trainRows: new Uint32Array(0),
      testRows: new Uint32Array(0),
      lambda: this.cfg.lambda,
      loss: this.cfg.loss,
      rounds: this.cfg.maxRounds,
      rho: rho0,
      parties: parties.length,
      algorithm: this.cfg.algorithm,
    };
    for (const p of parties) {
      p.aligned = { train: train.partyRows.get(p.id)!, test: test?.partyRows.get(p.id) ?? new Uint32Array(0) };
      this.send(p, { ...this.setupMessage, trainRows: p.aligned.train, testRows: p.aligned.test });
    }
    const ready = await Promise.all(parties.map((p) => this.next(p, 'ready')));
    const privacy = ready.map((r, m) => ({ party: parties[m].id, ...r.privacy }));
    // A party's budget pays for a number of rounds; the job runs no more than the smallest.
    const maxRounds = Math.min(this.cfg.maxRounds, ...privacy.map((q) => q.rounds));
    if (maxRounds < this.cfg.maxRounds) this.log.warn({ maxRounds, requested: this.cfg.maxRounds }, 'rounds capped by a party\'s privacy budget');
    for (const q of privacy) this.log.info(q, `party ${q.party} privacy: ${q.mechanism}${q.seeded ? ' (SEEDED noise: predictable)' : ''}`);
    const noisy = privacy.some((q) => q.mechanism !== 'none');
    const epsilonSpent: Record<string, number> = Object.fromEntries(parties.map((p) => [p.id, 0]));
    const setupSeconds = (performance.now() - setupStart) / 1000;
    return {
      parties,
      y,
      yTest,
      rho0,
      privacy,
      maxRounds,
      noisy,
      epsilonSpent,
      setupSeconds,
      dropped: { train: train.dropped, test: test?.dropped ?? 0 },
      labelRows: { train: Uint32Array.from(train.labelRows), test: Uint32Array.from(test?.labelRows ?? []) },
      startRound: 0,
      restored: false,
      evaluationSkipped,
    };
  }

  /**
   * Continue a job from its checkpoint (--resume): the ADMM state comes back from disk, the
   * parties (still running, reconnecting by themselves) rejoin and are told the round.
   */
  private async restoreJob(cp: Checkpoint): Promise<JobContext | undefined> {
    const setupStart = performance.now();
    this.phase = 'training';
    this.n = cp.labelRows.train.length;
    this.nTest = cp.labelRows.test.length;
    this.keptKeys.train = cp.keptKeys.train;
    this.keptKeys.test = cp.keptKeys.test ?? undefined;
    this.setupMessage = { ...cp.setup, trainRows: new Uint32Array(0), testRows: new Uint32Array(0) };
    this.completedRound = cp.round;
    this.round = cp.round;
    const y = Float64Array.from(cp.labelRows.train, (r) => this.labels.y[r]);
    const yTest = this.testLabels ? Float64Array.from(cp.labelRows.test, (r) => this.testLabels!.y[r]) : undefined;
    const admm = new AdmmCoordinator({
      variant: this.cfg.variant,
      loss: lossByName(this.cfg.loss),
      y,
      parties: this.cfg.parties.length,
      lambda: this.cfg.lambda,
      rho: cp.admm.rho,
      alpha: this.cfg.variant === 'exact' ? this.cfg.alpha : 1,
      tolerance: this.cfg.tolerance,
    });
    admm.restore(cp.admm);
    this.admm = admm;
    const wait = Math.max(this.cfg.rejoinTimeoutMs, 1000);
    const rejoined = new Promise<void>((resolve) => (this.onAllRejoined = resolve));
    for (const id of this.cfg.parties) {
      const p: PartyState = {
        id,
        ws: DETACHED,
        features: 0,
        fileRows: { train: 0, test: 0 },
        hashes: {},
        aligned: undefined,
        inbox: [],
        waiter: undefined,
        connected: false,
        alive: true,
      };
      p.rejoinTimer = setTimeout(() => this.fail(new PeerError(`party ${id} did not rejoin the resumed job within ${wait} ms`)), wait);
      this.parties.set(id, p);
    }
    this.log.info({ round: cp.round, jobId: this.cfg.jobId }, 'resuming from checkpoint; waiting for the parties to rejoin');
    await Promise.race([rejoined, this.done.then(() => undefined)]);
    if ((this.phase as Phase) === 'failed') return undefined;
    const parties = this.cfg.parties.map((id) => this.parties.get(id)!);
    const privacy = parties.map((p) => ({ party: p.id, ...p.privacyInfo! }));
    return {
      parties,
      y,
      yTest,
      rho0: cp.setup.rho,
      privacy,
      maxRounds: Math.min(this.cfg.maxRounds, ...privacy.map((q) => q.rounds)),
      noisy: privacy.some((q) => q.mechanism !== 'none'),
      epsilonSpent: Object.fromEntries(parties.map((p) => [p.id, 0])),
      setupSeconds: (performance.now() - setupStart) / 1000,
      dropped: cp.dropped,
      labelRows: cp.labelRows,
      startRound: cp.round,
      restored: true,
      // No test ids were aligned when the job started: it goes on without evaluation.
      evaluationSkipped: this.testLabels && !cp.keptKeys.test ? (noTestSet(parties) ?? 'the job started without a test set at every party: no test metrics') : undefined,
    };
  }

  private async run(): Promise<void> {
    const ctx = this.resumeFrom ? await this.restoreJob(this.resumeFrom) : await this.startJob();
    if (!ctx) return;
    this.ctx = ctx;
    const { parties, y, rho0, privacy, maxRounds, noisy, epsilonSpent, setupSeconds, dropped } = ctx;
    const yTest = ctx.evaluationSkipped ? undefined : ctx.yTest;

    const finish = async (r: TrainResult): Promise<void> => {
      this.phase = 'finishing';
      for (const p of parties)
        this.send(p, {
          type: 'done',
          jobId: this.cfg.jobId,
          reason: r.reason,
          rounds: this.round,
          objective: r.objective,
          params: { variant: this.cfg.algorithm === 'sgd' ? 'sgd' : this.cfg.variant, rho: r.rho.final, alpha: this.cfg.alpha, lambda: this.cfg.lambda, loss: this.cfg.loss },
        });
      const summary: Summary = {
        jobId: this.cfg.jobId,
        algorithm: this.cfg.algorithm,
        variant: this.cfg.variant,
        loss: this.cfg.loss,
        lambda: this.cfg.lambda,
        rho: r.rho,
        alpha: this.cfg.variant === 'exact' ? this.cfg.alpha : 1,
        ...(this.cfg.algorithm === 'sgd' ? { sgd: this.cfg.sgd } : {}),
        rounds: this.round,
        reason: r.reason,
        converged: r.reason === 'converged',
        objective: r.objective,
        objectiveFrom: noisy ? 'noisy shares' : 'shares',
        residuals: r.residuals,
        ...(r.metrics ? { test: r.metrics } : {}),
        ...(ctx.evaluationSkipped ? { evaluation: { skipped: ctx.evaluationSkipped } } : {}),
        seconds: {
          total: (performance.now() - this.started) / 1000,
          setup: setupSeconds,
          training: r.trainingSeconds,
          perRound: r.trainingSeconds / this.round,
        },
        bytes: { toCoordinator: this.bytesIn, fromCoordinator: this.bytesOut },
        parties: parties.map((p) => ({ id: p.id, features: p.features, rows: p.fileRows.train, testRows: p.fileRows.test })),
        rows: { train: this.n, test: this.nTest },
        droppedRows: dropped.train,
        droppedTestRows: dropped.test,
        privacy: privacy.map((q) => ({ ...q, epsilonSpent: epsilonSpent[q.party] })),
      };
      writeFileAtomic(join(this.cfg.out, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
      this.log.info({ rounds: summary.rounds, objective: summary.objective, reason: r.reason, test: summary.test }, 'job done');
      await this.waitForPartiesToClose(parties);
      this.phase = 'done';
      this.resolveDone(summary);
      await this.shutdownServer();
    };

    const loss = lossByName(this.cfg.loss);
    if (this.cfg.algorithm === 'sgd') {
      await finish(await this.trainSgd(parties, loss, y, yTest, maxRounds));
      return;
    }
    let admm: AdmmCoordinator;
    if (ctx.restored) admm = this.admm!;
    else {
      admm = new AdmmCoordinator({
        variant: this.cfg.variant,
        loss,
        y,
        parties: parties.length,
        lambda: this.cfg.lambda,
        rho: rho0,
        alpha: this.cfg.variant === 'exact' ? this.cfg.alpha : 1,
        tolerance: this.cfg.tolerance,
      });
      admm.step(parties.map(() => new Float64Array(this.n))); // z and dual from x = 0, so round 1 already moves
      this.admm = admm;
    }
    this.phase = 'training';
    this.log.info({ rho: rho0, variant: this.cfg.variant, alpha: this.cfg.alpha, maxRounds }, 'training');
    const trace = new TraceWriter(this.cfg.out, ctx.restored ? ctx.startRound : undefined);
    const trainStart = performance.now();
    let reason: StopReason = 'max-rounds';
    let last: FinishedRound | undefined;
    let unreported: FinishedRound | undefined;
    let objective = NaN;
    // Report a round (objective, trace line, log) after the next round's broadcast, while
    // the parties compute: the objective costs a log and an exp per sample.
    const report = (r: FinishedRound) => {
      objective = admm.objective(r.penaltySq);
      const line = {
        round: r.round,
        objective,
        primal: r.stats.primal,
        dual: r.stats.dual,
        rho: r.stats.rho,
        seconds: r.seconds,
        roundSeconds: r.roundSeconds,
        bytes: r.bytes,
        ...(noisy ? { epsilonSpent: r.epsilonSpent } : {}),
        ...(r.test ? { test: r.test } : {}),
      };
      trace.write(line);
      this.log.info({ ...line, maxRounds }, 'round');
    };
    let completed = false;
    let exhausted: string[] = [];
    try {
      for (let t = ctx.startRound + 1; t <= maxRounds; t++) {
        const roundStart = performance.now();
        const in0 = this.bytesIn;
        const out0 = this.bytesOut;
        this.round = t;
        this.broadcast(parties, { type: 'round', jobId: this.cfg.jobId, round: t, rho: admm.rho, c: admm.c });
        if (unreported) report(unreported);
        unreported = undefined;
        const replies = await Promise.all(parties.map((p) => this.next(p, 'share', 'exhausted')));
        for (const [m, r] of replies.entries()) epsilonSpent[parties[m].id] = r.epsilonSpent;
        const refused = replies.flatMap((r, m) => (r.type === 'exhausted' ? [parties[m].id] : []));
        if (refused.length > 0) {
          // A party's ledger refused this round: end with the model of the round before.
          this.log.warn({ round: t, parties: refused }, 'privacy budget exhausted: ending the job');
          reason = 'budget';
          exhausted = refused;
          this.round = t - 1;
          break;
        }
        const shares = replies as Share[];
        const stats = admm.step(shares.map((s) => s.share));
        this.completedRound = t;
        if (this.cfg.checkpointEvery > 0 && t % this.cfg.checkpointEvery === 0) this.checkpoint(ctx, t, admm);
        const converged = stats.primal <= stats.epsPrimal && stats.dual <= stats.epsDual;
        const final = converged || t === maxRounds;
        const test = yTest && (final || (this.cfg.evalEvery > 0 && t % this.cfg.evalEvery === 0)) ? await this.evaluate(parties, t, yTest) : undefined;
        const now = performance.now();
        last = unreported = {
          round: t,
          stats,
          penaltySq: shares.reduce((acc, s) => acc + s.penaltySq, 0),
          test,
          seconds: (now - trainStart) / 1000,
          roundSeconds: (now - roundStart) / 1000,
          bytes: { toCoordinator: this.bytesIn - in0, fromCoordinator: this.bytesOut - out0 },
          epsilonSpent: { ...epsilonSpent },
        };
        if (converged) {
          reason = 'converged';
          break;
        }
      }
      if (!last)
        throw new PeerError(
          `no round ran: no privacy budget left at ${exhausted.join(', ')}; a new run needs a new --job id (the party's ledger holds the releases of an earlier run of job ${this.cfg.jobId})`,
        );
      if (unreported) report(unreported);
      completed = true;
    } finally {
      trace.close(completed);
    }
    await finish({
      reason,
      objective,
      residuals: { primal: last.stats.primal, dual: last.stats.dual },
      metrics: last.test,
      trainingSeconds: (performance.now() - trainStart) / 1000,
      rho: { initial: rho0, final: admm.rho },
    });
  }

  /**
   * Mini-batch SGD over the same processes (FDML, Hu et al. 2019). Per step the parties score
   * a batch, the coordinator returns d loss / d score for each row, and each party updates its
   * own coefficients (with the next batch in the same message). An epoch is one pass over the
   * data in a fresh seeded order; at its end the parties send their full shares, for the
   * objective, and test scores when due. `--rounds` counts epochs.
   */
  private async trainSgd(parties: PartyState[], loss: Loss, y: Float64Array, yTest: Float64Array | undefined, maxEpochs: number): Promise<TrainResult> {
    const { batchSize, lr: lr0, lrDecay } = this.cfg.sgd;
    const n = this.n;
    const rng = seedrandom(`${this.cfg.jobId}/sgd`);
    const order = Uint32Array.from({ length: n }, (_, i) => i);
    let gradient = new Float64Array(0);
    let step = 0;
    let objective = NaN;
    let metrics: TestMetrics | undefined;
    this.phase = 'training';
    this.log.info({ algorithm: 'sgd', batchSize, lr: lr0, lrDecay, maxEpochs }, 'training');
    const trace = new TraceWriter(this.cfg.out);
    const trainStart = performance.now();
    let completed = false;
    try {
      for (let epoch = 1; epoch <= maxEpochs; epoch++) {
        const epochStart = performance.now();
        const in0 = this.bytesIn;
        const out0 = this.bytesOut;
        const lr = lr0 / (1 + lrDecay * (epoch - 1));
        for (let i = n - 1; i > 0; i--) {
          const j = Math.floor(rng() * (i + 1));
          const tmp = order[i];
          order[i] = order[j];
          order[j] = tmp;
        }
        for (let start = 0; start < n; start += batchSize) {
          const rows = order.slice(start, Math.min(n, start + batchSize));
          this.sgdStep = ++step;
          this.broadcast(parties, { type: 'sgd', jobId: this.cfg.jobId, step, epoch, lr, gradient, rows, full: false });
          this.batchRows = rows.length;
          const replies = await Promise.all(parties.map((p) => this.next(p, 'batchScores')));
          gradient = new Float64Array(rows.length);
          for (let k = 0; k < rows.length; k++) {
            let s = 0;
            for (const r of replies) s += r.scores[k];
            gradient[k] = loss.deriv(y[rows[k]], s);
          }
        }
        this.round = epoch;
        this.sgdStep = ++step;
        this.broadcast(parties, { type: 'sgd', jobId: this.cfg.jobId, step, epoch, lr, gradient, rows: new Uint32Array(0), full: true });
        this.batchRows = 0;
        gradient = new Float64Array(0);
        const shares = await Promise.all(parties.map((p) => this.next(p, 'share')));
        const sum = new Float64Array(n);
        for (const s of shares) for (let i = 0; i < n; i++) sum[i] += s.share[i];
        objective = meanLoss(loss, y, sum) + (this.cfg.lambda / 2) * shares.reduce((a, s) => a + s.penaltySq, 0);
        const final = epoch === maxEpochs;
        metrics = yTest && (final || (this.cfg.evalEvery > 0 && epoch % this.cfg.evalEvery === 0)) ? await this.evaluate(parties, epoch, yTest) : undefined;
        const now = performance.now();
        const line = {
          round: epoch,
          epoch,
          objective,
          lr,
          steps: step,
          seconds: (now - trainStart) / 1000,
          roundSeconds: (now - epochStart) / 1000,
          bytes: { toCoordinator: this.bytesIn - in0, fromCoordinator: this.bytesOut - out0 },
          ...(metrics ? { test: metrics } : {}),
        };
        trace.write(line);
        this.log.info({ ...line, maxRounds: maxEpochs }, 'round');
      }
      completed = true;
    } finally {
      trace.close(completed);
    }
    return {
      reason: 'max-rounds',
      objective,
      residuals: null,
      metrics,
      trainingSeconds: (performance.now() - trainStart) / 1000,
      rho: { initial: 0, final: 0 },
    };
  }

  private async evaluate(parties: PartyState[], t: number, yTest: Float64Array): Promise<TestMetrics> {
    this.broadcast(parties, { type: 'evaluate', jobId: this.cfg.jobId, round: t });
    const replies = await Promise.all(parties.map((p) => this.next(p, 'scores')));
    const total = new Float64Array(this.nTest);
    for (const r of replies as Scores[]) {
      if (r.round !== t) throw new PeerError(`scores for round ${r.round}, expected ${t}`);
      for (let i = 0; i < total.length; i++) total[i] += r.scores[i];
    }
    if (this.cfg.loss === 'logistic') return classificationMetrics(total, yTest);
    return { rmse: Math.sqrt(2 * meanLoss(lossByName('squared'), yTest, total)) };
  }

  /**
   * Sample alignment by keyed id hashes: the intersection, in the order of the label
   * file. Returns the label rows kept and, per party, which of its rows they are.
   */
  private align(set: 'train' | 'test', labels: Labels, parties: PartyState[]) {
    const labelKeys = hashKeys(hashIds(labels.ids, this.hashKey));
    const union = new Set(labelKeys);
    const index = parties.map((p) => {
      const keys = hashKeys(p.hashes[set]!);
      const m = new Map<string, number>();
      keys.forEach((k, i) => {
        if (m.has(k)) this.abortParty(p, 'alignment', `the ${set} ids contain a duplicate`);
        m.set(k, i);
        union.add(k);
      });
      return m;
    });
    const labelRows: number[] = [];
    const keptKeys: string[] = [];
    const partyRows = parties.map(() => [] as number[]);
    labelKeys.forEach((k, r) => {
      const rows = index.map((m) => m.get(k));
      if (rows.some((x) => x === undefined)) return;
      labelRows.push(r);
      keptKeys.push(k);
      rows.forEach((x, m) => partyRows[m].push(x!));
    });
    if (labelRows.length === 0) {
      const err = new PeerError(`no ${set} sample id is shared by the labels and every party: check that each party reads its ids as they are written (--ids first|qid|row, --id-column)`);
      for (const p of parties) p.ws.close(CloseCodes.alignment.code, closeReason('alignment', `no common ${set} ids: check the party's --ids / --id-column`));
      throw err;
    }
    return {
      labelRows,
      keptKeys,
      partyRows: new Map(parties.map((p, m) => [p.id, Uint32Array.from(partyRows[m])])),
      dropped: union.size - labelRows.length,
    };
  }

  private abortParty(p: PartyState, kind: CloseKind, detail: string): never {
    p.ws.close(CloseCodes[kind].code, closeReason(kind, detail));
    throw new PeerError(`party ${p.id}: ${detail}`);
  }

  private closedParties = new Set<string>();
  private onAllClosed: (() => void) | undefined;

  private partyClosed(p: PartyState): void {
    this.closedParties.add(p.id);
    if (this.closedParties.size === this.parties.size) this.onAllClosed?.();
  }

  /** Parties close after writing their model files; give them a moment, then close for them. */
  private async waitForPartiesToClose(parties: PartyState[]): Promise<void> {
    if (this.closedParties.size === parties.length) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 10_000);
      this.onAllClosed = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  private fail(err: Error): void {
    if (this.phase === 'failed' || this.phase === 'done') return;
    this.phase = 'failed';
    this.log.error({ err: err.message }, 'job failed');
    for (const p of this.parties.values())
      if (p.ws.readyState === p.ws.OPEN) p.ws.close(CloseCodes.aborted.code, closeReason('aborted', err.message));
    for (const p of this.parties.values()) {
      p.waiter?.fail(err);
      p.waiter = undefined;
    }
    this.rejectDone(err);
    void this.shutdownServer();
  }

  private shutdownServer(): Promise<void> {
    clearInterval(this.heartbeat);
    const wss = this.wss;
    const server = this.server;
    if (!wss || !server) return Promise.resolve();
    this.wss = undefined;
    this.server = undefined;
    for (const ws of wss.clients) ws.terminate();
    return new Promise((resolve) => wss.close(() => server.close(() => resolve())));
  }
}

function toBytes(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * The per-round trace, one JSON object per line. Written to `trace.jsonl.partial` as the
 * job runs and renamed to `trace.jsonl` when it completes, so a `trace.jsonl` is always whole.
 */
class TraceWriter {
  private readonly fd: number;
  private readonly partial: string;
  /** `keepUpTo`: a resumed job keeps the lines of the rounds up to its checkpoint. */
  constructor(
    private readonly dir: string,
    keepUpTo?: number,
  ) {
    mkdirSync(dir, { recursive: true });
    this.partial = join(dir, 'trace.jsonl.partial');
    let kept = '';
    if (keepUpTo !== undefined && existsSync(this.partial))
      kept = readFileSync(this.partial, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '' && (JSON.parse(l) as { round: number }).round <= keepUpTo)
        .map((l) => l + '\n')
        .join('');
    this.fd = openSync(this.partial, 'w');
    if (kept) writeSync(this.fd, kept);
  }
  write(obj: object): void {
    writeSync(this.fd, JSON.stringify(obj) + '\n');
  }
  close(complete: boolean): void {
    closeSync(this.fd);
    if (complete) renameSync(this.partial, join(this.dir, 'trace.jsonl'));
  }
}
