/**
 * The coordinator as a phase machine:
 *   waiting    every configured party joins; its ids are intersected with the labels (psi.ts, parties.ts)
 *   setup      samples aligned (alignment.ts), job built (job.ts), setup sent, ready collected
 *   training   the ADMM loop (admm-loop.ts) or the SGD loop (sgd-loop.ts)
 *   finishing  done sent; every party closes after writing its model; summary written
 * A resumed job (--resume) is built from its checkpoint instead and starts training once
 * every party has rejoined. Any failure ends the job everywhere with the error that caused it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, DataError, InternalError, PeerError, PsiPool, applyFlips } from '@admm-share/core';
import { type Done, type SampleSet, CLOSE_GRACE_MS, ENVELOPE_BYTES, POINT_BYTES, encode } from '@admm-share/protocol';
import { Progress } from '@admm-share/runtime';
import { listenForParties } from '../connections/admission.js';
import { AdmmLoop } from '../training/admm-loop.js';
import { type AlignedSet, AlignmentError, alignSet } from '../alignment/alignment.js';
import { CHECKPOINT_FILE, type Checkpoint, labelsDigest, readCheckpoint, removeCheckpoint } from '../output/checkpoint.js';
import type { CoordinatorConfig, CoordinatorHandle, Phase } from '../config.js';
import { writeJobFile } from '../output/job-file.js';
import { type Job, buildJob, evaluationSkipReason, participation, resolveAlgorithm, setupFor } from './job.js';
import { runOneShot } from '../training/one-shot-loop.js';
import { type LabelFlips, resolveLabelFlips } from './label-flips.js';
import { type Labels, loadLabels } from './labels.js';
import { type Matched, Parties } from '../connections/parties.js';
import { LabelPsi } from '../alignment/psi.js';
import type { Traffic } from '../connections/party-connection.js';
import { ALIGNMENT_METHOD, type Summary, type TraceLine, buildSummary, writeSummary } from '../output/summary.js';
import type { Server } from '../connections/server.js';
import { runSgd } from '../training/sgd-loop.js';
import { type StatusServer, startStatusServer } from '../monitoring/status-server.js';
import { Monitor } from '../monitoring/monitor.js';

export type { CoordinatorConfig, CoordinatorHandle, HttpConfig, LocalBaseline, Phase, SgdConfig } from '../config.js';
export type { PartySummary, Summary, TestMetrics, TraceLine } from '../output/summary.js';
export { defaultRho } from './job.js';

/** Rows a party may declare beyond --max-rows-factor x label rows, so that tiny label files do not refuse real parties. */
const SLACK_ROWS = 1024;
/** A resumed coordinator waits at least this long for the parties to rejoin, even with --rejoin-timeout 0. */
const MIN_RESUME_WINDOW_MS = 1000;

export async function start(config: CoordinatorConfig, deps: { logger: Logger }): Promise<CoordinatorHandle> {
  return new Coordinator(config, deps.logger).start();
}

class Coordinator {
  private phase: Phase = 'starting';
  private readonly cfg: CoordinatorConfig;
  private readonly labels: Labels;
  /** The training labels the job trains on: with label privacy the flipped ones, else `labels`. */
  private readonly trainLabels: Labels;
  private readonly labelFlips: LabelFlips | undefined;
  private readonly testLabels: Labels | undefined;
  private readonly labelsDigest: string;
  private readonly psi: LabelPsi;
  /** When the intersection began and ended, for the summary. */
  private readonly alignment = { started: 0, seconds: 0 };
  private readonly resumeFrom: Checkpoint | undefined;
  private readonly traffic: Traffic = { in: 0, out: 0 };
  private readonly parties: Parties;
  private readonly maxRows: number;
  private readonly started = performance.now();
  private server: Server | undefined;
  /** The HTTP port (--http-port), if any, what it shows, and what closes it after the job's end. */
  private readonly monitor: Monitor | undefined;
  private status: StatusServer | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  private stopLinger: (() => void) | undefined;
  /** Stopped by close(): the HTTP port closes at once. */
  private stopped = false;
  private loop: AdmmLoop | undefined;
  /** Rounds of the model the job keeps, once training has ended (a party rejoining then resumes there). */
  private finalRounds: number | undefined;
  private readonly failed: Promise<never>;
  private rejectFailed!: (err: Error) => void;
  readonly done: Promise<Summary>;
  private resolveDone!: (s: Summary) => void;
  private rejectDone!: (e: Error) => void;

  constructor(
    config: CoordinatorConfig,
    private readonly log: Logger,
  ) {
    if (config.parties.length === 0) throw new ConfigError('no parties configured');
    if (config.activeParty !== undefined && !config.parties.includes(config.activeParty))
      throw new ConfigError(`--active-party ${config.activeParty} is not one of --parties ${config.parties.join(', ')}`);
    if (new Set(config.parties).size !== config.parties.length) throw new ConfigError(`party ids must be distinct: ${config.parties.join(', ')}`);
    if (config.credentials) {
      const missing = config.parties.filter((p) => !config.credentials![p]);
      if (missing.length) throw new ConfigError(`no credential for ${missing.join(', ')} in the credentials file`);
    } else log.warn('no credentials configured: anyone who can reach this port can join as a listed party (pass --credentials)');
    if (config.labelPrivacy) {
      const { epsilon } = config.labelPrivacy;
      if (!(Number.isFinite(epsilon) && epsilon > 0)) throw new ConfigError(`--label-epsilon must be a positive number, got ${epsilon}`);
      if (config.loss !== 'logistic') throw new ConfigError(`--label-epsilon needs --loss logistic (randomized response flips two classes, and only the logistic loss has the correction for flipped labels), not ${config.loss}`);
      if (!(config.lambda > 0)) throw new ConfigError('--label-epsilon needs --lambda > 0: the loss corrected for flipped labels is unbounded below without the ridge term');
    }
    this.done = new Promise((res, rej) => {
      this.resolveDone = res;
      this.rejectDone = rej;
    });
    this.done.catch(() => undefined);
    this.failed = new Promise((_, rej) => (this.rejectFailed = rej));
    this.failed.catch(() => undefined);
    this.labels = loadLabels(config.labels, config.loss, config.labelOptions);
    this.testLabels = config.testLabels ? loadLabels(config.testLabels, config.loss, config.labelOptions) : undefined;
    this.labelsDigest = labelsDigest(this.labels, this.testLabels);
    this.resumeFrom = config.resume ? this.readResumable(config) : undefined;
    this.cfg = this.resumeFrom ? { ...config, jobId: this.resumeFrom.jobId } : config;
    const progress = new Progress();
    this.psi = new LabelPsi(new PsiPool(), { train: this.labels.ids, test: this.testLabels?.ids }, (set, what) => progress.counter(`${set} ${what}`));
    this.maxRows = Math.ceil(config.maxRowsFactor * Math.max(this.labels.ids.length, this.testLabels?.ids.length ?? 0)) + SLACK_ROWS;
    log.info({ labels: config.labels, rows: this.labels.ids.length, testRows: this.testLabels?.ids.length ?? 0, classes: this.labels.classes }, 'labels loaded');
    if (this.resumeFrom && (this.resumeFrom.setup.labelFlip > 0) !== (config.labelPrivacy !== undefined))
      throw new ConfigError(
        this.resumeFrom.setup.labelFlip > 0
          ? `--resume: the checkpointed job trains on labels flipped with probability ${this.resumeFrom.setup.labelFlip} (label privacy): resume it with its --label-epsilon`
          : '--resume: the checkpointed job trains on the true labels; resume it without --label-epsilon (a job cannot start flipping its labels half-way)',
      );
    // Drawn (or, for the same job, read back) before anything is sent: every party then only
    // ever sees what follows from the flipped labels.
    this.labelFlips = resolveLabelFlips(this.cfg, this.labels, log);
    const flipped = this.labelFlips;
    this.trainLabels = flipped ? { ...this.labels, y: applyFlips(this.labels.y, flipped.flipped) } : this.labels;
    const labelFlip = flipped?.flipProbability ?? 0;
    if (this.resumeFrom && this.resumeFrom.setup.labelFlip !== labelFlip)
      throw new ConfigError(`--resume: the checkpointed job flipped its labels with probability ${this.resumeFrom.setup.labelFlip}, its flips file says ${labelFlip}`);
    const cfg = this.cfg;
    this.parties = new Parties({
      ids: cfg.parties,
      policy: { parties: cfg.parties, credentials: cfg.credentials, jobId: cfg.jobId, maxRows: this.maxRows },
      psi: this.psi,
      progress: (party, set) => progress.counter(`${party} ${set} ids`),
      rejoinTimeoutMs: cfg.rejoinTimeoutMs,
      roundTimeoutMs: cfg.roundTimeoutMs,
      heartbeatMs: cfg.heartbeatMs,
      log,
      traffic: this.traffic,
      onFailure: (err) => this.fail(err),
      onReply: (p, msg, ctx, seconds, bytes) => this.monitor?.replied(p, msg, ctx, seconds, bytes),
    });
    this.monitor = cfg.http ? new Monitor(cfg, this.parties.list, this.traffic, () => this.phase) : undefined;
  }

  /** The checkpoint --resume continues from, or a truthful reason why there is none to continue. */
  private readResumable(cfg: CoordinatorConfig): Checkpoint {
    const path = join(cfg.out, CHECKPOINT_FILE);
    if (!existsSync(path) && existsSync(join(cfg.out, 'summary.json')))
      throw new ConfigError(`--resume: the job in ${cfg.out} completed (summary.json is there and its checkpoint was removed); nothing to resume`);
    if (!existsSync(path))
      throw new ConfigError(
        `--resume: no checkpoint in ${cfg.out} (ADMM writes one every --checkpoint-seconds of training, or every --checkpoint-every rounds; a one-shot job writes none: start it again without --resume and with the same --job id, and each passive party sends its stored release again at no cost)`,
      );
    const cp = readCheckpoint(path);
    if (cp.labelsDigest !== this.labelsDigest) throw new ConfigError('--resume: the label files differ from the ones the checkpointed job used');
    if (cp.setup.algorithm !== 'admm') throw new ConfigError('--resume: only ADMM jobs can be resumed');
    if (cp.setup.parties !== cfg.parties.length) throw new ConfigError(`--resume: the job had ${cp.setup.parties} parties, --parties lists ${cfg.parties.length}`);
    if (cfg.jobIdGiven && cfg.jobId !== cp.jobId) throw new ConfigError(`--resume: the checkpoint is for job '${cp.jobId}', not '${cfg.jobId}'`);
    if (cp.samples.labelRows.train.some((r) => r >= this.labels.ids.length)) throw new DataError(path, undefined, 'label rows beyond the label file');
    return cp;
  }

  async start(): Promise<CoordinatorHandle> {
    const { cfg, log } = this;
    // The largest legitimate frame: a party's ids (up to maxRows points, and one point per
    // label id of the set) or a vector of doubles over the label rows, whichever is larger.
    const labelRows = Math.max(this.labels.ids.length, this.testLabels?.ids.length ?? 0);
    const maxPayload = Math.max((this.maxRows + labelRows) * POINT_BYTES, labelRows * 8) + ENVELOPE_BYTES;
    // The label side of the intersection starts now, while the parties connect.
    this.alignment.started = performance.now();
    if (cfg.http && this.monitor) this.status = await startStatusServer(cfg.http, this.monitor, log);
    for (const set of ['train', 'test'] as const) if (this.psi.counts[set] > 0) this.psi.points(set).catch((err: Error) => this.fail(err));
    try {
      this.server = await this.listen(maxPayload);
    } catch (err) {
      await this.status?.close();
      throw err;
    }
    this.phase = 'waiting';
    const port = this.server.port;
    log.info({ port, host: cfg.host, tls: Boolean(cfg.tls), mutualTls: Boolean(cfg.tls?.clientCa), jobId: cfg.jobId, parties: cfg.parties, maxPayload }, 'listening');
    this.run().then(
      (summary) => this.resolveDone(summary),
      (err: Error) => this.fail(err),
    );
    return { port, ...(this.status ? { httpPort: this.status.port } : {}), done: this.done, httpClosed: this.closeHttpAfterJob(), close: () => this.close() };
  }

  private listen(maxPayload: number): Promise<Server> {
    const { cfg, log } = this;
    return listenForParties({
      host: cfg.host,
      port: cfg.port,
      tls: cfg.tls,
      maxPayload,
      log,
      helloTimeoutMs: cfg.helloTimeoutMs,
      traffic: this.traffic,
      onHello: (ws, hello, nonce, connLog) => this.parties.onHello(ws, hello, nonce, connLog),
      onRefused: (code, kind) => this.monitor?.refused(code, kind),
      onError: (err) => this.fail(new PeerError(`server error: ${err.message}`)),
    });
  }

  /** The HTTP port stays open --http-linger after the job ends (done or failed), unless the coordinator is stopped. */
  private async closeHttpAfterJob(): Promise<void> {
    const status = this.status;
    if (!status) return;
    const outcome = await this.done.then(
      () => 'done',
      () => 'failed',
    );
    const lingerMs = this.cfg.http?.lingerMs ?? 0;
    if (lingerMs > 0 && !this.stopped) {
      this.log.info({ httpPort: status.port, lingerSeconds: lingerMs / 1000, job: outcome }, 'job ended; the HTTP port stays open');
      await new Promise<void>((resolve) => {
        this.stopLinger = resolve;
        this.lingerTimer = setTimeout(resolve, lingerMs);
      });
    }
    await status.close();
  }

  private async run(): Promise<Summary> {
    const { cfg, parties } = this;
    const { job, setupSeconds } = this.resumeFrom ? await this.resumeJob(this.resumeFrom) : await this.newJob();
    const joined = participation(cfg, parties.list, this.log);

    this.phase = 'training';
    const algorithm = job.setup.algorithm;
    this.monitor?.jobStarted({ algorithm, rows: job.n, testRows: job.nTest, maxRounds: joined.maxRounds });
    parties.lossPolicy = algorithm === 'sgd' ? 'fatal' : 'may-rejoin';
    if (algorithm === 'admm') this.loop ??= new AdmmLoop(this.loopDeps(job));
    const onTrace = this.onTrace();
    const result = this.loop
      ? await this.loop.run(joined)
      : algorithm === 'one-shot'
        ? await this.guard(runOneShot(cfg, job, parties, joined, this.log, this.traffic, onTrace))
        : await runSgd(cfg, job, parties, joined, this.log, this.traffic, onTrace);

    this.phase = 'finishing';
    this.finalRounds = result.rounds;
    // `done` carries the objective: never a non-finite value on the wire (admm-loop.ts, assertFinite).
    if (!Number.isFinite(result.objective)) throw new InternalError(`after round ${result.rounds}`, `the training objective is ${result.objective}; done was not sent`);
    const done: Done = {
      type: 'done',
      jobId: cfg.jobId,
      reason: result.reason,
      rounds: result.rounds,
      objective: result.objective,
      params: { variant: algorithm === 'admm' ? cfg.variant : algorithm, rho: result.rho.final, alpha: cfg.alpha, lambda: cfg.lambda, loss: cfg.loss },
      classes: this.labels.classes ?? null,
    };
    await this.guard(parties.finish(done, CLOSE_GRACE_MS));
    const summary = buildSummary({ cfg, job, result, participation: joined, parties: parties.list, traffic: this.traffic, setupSeconds, totalSeconds: (performance.now() - this.started) / 1000,
      alignment: { ...ALIGNMENT_METHOD, labelIds: this.psi.counts, seconds: this.resumeFrom ? null : this.alignment.seconds },
      classes: this.labels.classes ?? null,
    });
    writeSummary(cfg.out, summary);
    this.monitor?.finished(summary);
    const oneShot = summary.oneShot;
    writeJobFile(cfg.out, {
      jobId: cfg.jobId,
      algorithm,
      loss: cfg.loss,
      labels: this.labels.classes ?? null,
      parties: parties.list.map((p) => ({ id: p.id, features: p.features, role: p.id === cfg.activeParty ? 'active' : 'passive', rowScaling: algorithm === 'one-shot' || p.noise })),
      combination: oneShot ? { kind: 'one-shot', activeParty: oneShot.activeParty, weights: oneShot.weights, intercept: oneShot.intercept ?? 0 } : { kind: 'sum' },
      test: summary.test ?? null,
    });
    // The checkpoint is of no use once the job is complete.
    removeCheckpoint(join(cfg.out, CHECKPOINT_FILE));
    this.log.info({ rounds: summary.rounds, objective: summary.objective, reason: result.reason, test: summary.test }, 'job done');
    this.phase = 'done';
    parties.stop();
    await this.server?.close();
    return summary;
  }

  /** waiting -> setup: every party joins, the samples are aligned, every party is set up and ready. */
  private async newJob(): Promise<{ job: Job; setupSeconds: number }> {
    const { cfg, parties, log } = this;
    const matched = await this.guard(parties.allJoined());
    const setupStart = performance.now();
    this.alignment.seconds = (setupStart - this.alignment.started) / 1000;
    this.phase = 'setup';
    parties.lossPolicy = 'fatal';
    const skip = evaluationSkipReason(this.testLabels, parties.list);
    if (skip) log.warn({ parties: skip.parties }, skip.reason);
    const skipped = skip?.reason;
    const train = this.align('train', this.labels, matched);
    const test = this.testLabels && !skipped ? this.align('test', this.testLabels, matched) : undefined;
    const samples = {
      labelRows: { train: train.labelRows, test: test?.labelRows ?? new Uint32Array(0) },
      dropped: { train: train.dropped, test: test?.dropped ?? 0 },
    };
    const algorithm = resolveAlgorithm(cfg, parties.list, log);
    const job = buildJob(cfg, this.trainLabels, this.testLabels, samples, skipped, undefined, algorithm, this.labelFlips);
    log.info({ rows: job.n, dropped: samples.dropped.train, testRows: job.nTest, droppedTest: samples.dropped.test, method: 'ecdh-psi', seconds: this.alignment.seconds }, 'samples aligned');
    this.allowRejoins(job);
    const empty = new Uint32Array(0);
    const ready = await this.guard(
      Promise.all(
        parties.list.map((p, m) =>
          p.request(encode(setupFor(job, p.id, cfg.activeParty, { train: train.partyRows[m], test: test?.partyRows[m] ?? empty })), ['ready'], { jobId: cfg.jobId }),
        ),
      ),
    );
    ready.forEach((r, m) => (parties.list[m].privacy = r.privacy));
    return { job, setupSeconds: (performance.now() - setupStart) / 1000 };
  }

  /** A job from its checkpoint: training continues once every party has rejoined. */
  private async resumeJob(cp: Checkpoint): Promise<{ job: Job; setupSeconds: number }> {
    const { cfg, parties, log } = this;
    const setupStart = performance.now();
    const job = buildJob(cfg, this.trainLabels, this.testLabels, cp.samples, cp.evaluationSkipped ?? undefined, cp.setup, cp.setup.algorithm, this.labelFlips);
    this.phase = 'training';
    parties.lossPolicy = 'may-rejoin';
    this.allowRejoins(job);
    const window = Math.max(cfg.rejoinTimeoutMs, MIN_RESUME_WINDOW_MS);
    log.info({ round: cp.round, jobId: cfg.jobId }, 'resuming from checkpoint; waiting for the parties to rejoin');
    const rejoined = parties.awaitRejoins(window);
    this.loop = new AdmmLoop(this.loopDeps(job), cp);
    await this.guard(rejoined);
    return { job, setupSeconds: (performance.now() - setupStart) / 1000 };
  }

  private allowRejoins(job: Job): void {
    this.parties.rejoinSource = {
      labelRows: job.labelRows,
      setup: (party, rows) => setupFor(job, party, this.cfg.activeParty, rows),
      resume: (p) => {
        // A one-shot party is brought back by the request it has not answered (release or fit).
        if (job.setup.algorithm === 'one-shot') return undefined;
        if (!this.loop) throw new PeerError(`party ${p.id} cannot rejoin an SGD job`);
        return this.loop.resumeFor(p, this.finalRounds);
      },
    };
  }

  private loopDeps(job: Job) {
    return { cfg: this.cfg, job, parties: this.parties, log: this.log, traffic: this.traffic, identity: { labelsDigest: this.labelsDigest }, onTrace: this.onTrace() };
  }

  /** What sees each trace line: the monitor, when there is an HTTP port. */
  private onTrace() {
    const monitor = this.monitor;
    return monitor ? (line: TraceLine) => monitor.traced(line) : undefined;
  }

  /** Align one set; a party at fault is named and closed, and the job fails. */
  private align(set: SampleSet, labels: Labels, matched: Matched[]): AlignedSet {
    try {
      return alignSet(set, labels.ids.length, this.parties.list.map((p, m) => ({ id: p.id, positions: matched[m][set] ?? new Int32Array(0) })));
    } catch (err) {
      if (!(err instanceof AlignmentError)) throw err;
      const culprit = err.party === undefined ? undefined : this.parties.byId(err.party);
      for (const p of culprit ? [culprit] : this.parties.list) p.close('alignment', err.message);
      throw new PeerError(culprit ? `party ${culprit.id}: ${err.message}` : err.message);
    }
  }

  /** Wait for `p` unless the job fails first. */
  private guard<T>(p: Promise<T>): Promise<T> {
    return Promise.race([p, this.failed]);
  }

  /**
   * Stop on a signal. During ADMM training the state of the last completed round is
   * checkpointed (after any checkpoint still being written) and the parties are told the coordinator is going away (1001), so they keep
   * trying to rejoin and `--resume` continues the job; otherwise the job is aborted.
   */
  async close(): Promise<void> {
    // The HTTP port closes with the process, not --http-linger after it.
    this.stopped = true;
    if (this.phase === 'training' && this.loop && this.loop.completedRound > 0) {
      const round = this.loop.completedRound;
      this.loop.checkpoint();
      this.phase = 'failed';
      const err = new PeerError(`stopped after round ${round}; checkpoint written to ${join(this.cfg.out, CHECKPOINT_FILE)}`);
      this.parties.goingAway(`coordinator stopping after round ${round}; it can be resumed`, err);
      this.monitor?.failed(err.message);
      this.rejectFailed(err);
      // The job ends (and the process exits) once the checkpoint is on disk.
      const written = await this.loop.flushCheckpoints().then(
        () => true,
        (e: Error) => (this.log.error({ err: e.message }, 'stopped: the checkpoint could not be written'), false),
      );
      if (written) this.log.warn({ round }, 'stopped: checkpoint written, resume with --resume');
      this.rejectDone(err);
    } else this.fail(new PeerError('coordinator stopped'));
    clearTimeout(this.lingerTimer);
    this.stopLinger?.();
    await Promise.all([this.server?.close(), this.status?.close()]);
  }

  private fail(err: Error): void {
    if (this.phase === 'failed' || this.phase === 'done') return;
    this.phase = 'failed';
    this.log.error({ err: err.message }, 'job failed');
    this.monitor?.failed(err.message);
    this.parties.abort(err);
    this.rejectFailed(err);
    this.rejectDone(err);
    void this.server?.close();
  }
}
