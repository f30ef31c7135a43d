/**
 * The coordinator as a phase machine:
 *   waiting    every configured party joins; its ids are intersected with the labels (connections/party-port.ts, alignment/psi.ts)
 *   setup      samples aligned (alignment/alignment.ts), job built (job.ts), setup sent, ready collected
 *   training   the algorithm's loop, from the table in training/loops.ts (ADMM, one-shot or SGD)
 *   finishing  done sent; every party closes after writing its model; summary and job.json written (output/)
 * A resumed job (--resume) is built from its checkpoint instead and starts training once
 * every party has rejoined. Any failure ends the job everywhere with the error that caused it.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { InternalError, PeerError, applyFlips, resolveClassWeights } from '@admm-share/core';
import { type Done, CLOSE_GRACE_MS, ENVELOPE_BYTES, POINT_BYTES, encode } from '@admm-share/protocol';
import { noTraffic } from '../bytes.js';
import type { CoordinatorConfig, Phase } from '../config.js';
import { PartyPort, maxRowsFor } from '../connections/party-port.js';
import { type StatusServer, startStatusServer } from '../monitoring/status-server.js';
import { Monitor } from '../monitoring/monitor.js';
import { CHECKPOINT_FILE, type Checkpoint, removeCheckpoint } from '../output/checkpoint.js';
import { describeJob, writeJobFile } from '../output/job-file.js';
import { jobSecret } from '../output/coordinator-key.js';
import { ALIGNMENT_METHOD, type Summary, writeSummary } from '../output/summary.js';
import type { TraceLine } from '../output/trace.js';
import type { LoopContext, TrainingLoop } from '../training/loop.js';
import { LOOPS } from '../training/loops.js';
import { type SelectionReport, readTestIds, selectionLine } from '../alignment/test-rows.js';
import { type Job, alignSamples, buildJob, checkConfig, evaluationSkipReason, participation, reselect, resolveAlgorithm, setupFor } from './job.js';
import { type LabelFlips, resolveLabelFlips } from './label-flips.js';
import { type Labels, labelsDigest, loadLabels } from './labels.js';
import { MIN_RESUME_WINDOW_MS, checkResumedClassWeights, checkResumedLabelPrivacy, readResumable } from './resume.js';
import { buildSummary } from './summary-of.js';
import { reportOf, reportWarnings, writeJobReport } from './report-of.js';

export type { CoordinatorConfig, HttpConfig, LocalBaseline, Phase, SgdConfig } from '../config.js';
export type { PartySummary, Summary, TestMetrics, TraceLine } from '../output/summary.js';
export { defaultRho } from './job.js';

/** What `start` returns: the ports, the job's end, and the stop. */
export interface CoordinatorHandle {
  port: number;
  /** The HTTP port (with `http` in the config). */
  httpPort?: number;
  done: Promise<Summary>;
  /** Resolves once the HTTP port has closed: at the job's end, or `http.lingerMs` after it (at once without HTTP). */
  httpClosed: Promise<void>;
  close(): Promise<void>;
}

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
  /** The labels the job evaluates with: --test-labels, or with --holdout / --test-ids the true (never flipped) training labels. */
  private readonly evaluationLabels: Labels | undefined;
  /** The ids of --test-ids, read before anything is opened. */
  private readonly testIds: string[] | undefined;
  /** A resumed job's held-out test rows, chosen again from its flags (and checked against its checkpoint) before anything is opened. */
  private readonly resumedSelection: SelectionReport | undefined;
  private readonly labelsDigest: string;
  /** When the intersection began and ended, for the summary. */
  private readonly alignment = { started: 0, seconds: 0 };
  private readonly resumeFrom: Checkpoint | undefined;
  private readonly traffic = noTraffic();
  /** The parties' port: the intersection, the registry of parties, the server. */
  private readonly port: PartyPort;
  private readonly maxRows: number;
  private readonly started = performance.now();
  /** The HTTP port (--http-port), if any, what it shows, and what closes it after the job's end. */
  private readonly monitor: Monitor | undefined;
  private status: StatusServer | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  private stopLinger: (() => void) | undefined;
  /** Stopped by close(): the HTTP port closes at once. */
  private stopped = false;
  /** The job's training loop, once training starts (a resumed job's as soon as it is built). */
  private loop: TrainingLoop | undefined;
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
    checkConfig(config, log);
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
    this.evaluationLabels = config.testSelection ? this.labels : this.testLabels;
    this.testIds = config.testSelection?.method === 'test-ids' ? readTestIds(config.testSelection.file, config.labelOptions.idColumn ?? 'id', config.labelOptions.encoding) : undefined;
    this.resumeFrom = config.resume ? readResumable(config, this.labelsDigest, this.labels.ids.length) : undefined;
    this.cfg = this.resumeFrom ? { ...config, jobId: this.resumeFrom.jobId } : config;
    this.resumedSelection = this.resumeFrom?.samples.testFrom ? reselect(config, this.resumeFrom.samples, this.labels, this.testIds) : undefined;
    this.maxRows = maxRowsFor(config.maxRowsFactor, Math.max(this.labels.ids.length, this.testLabels?.ids.length ?? 0));
    log.info({ labels: config.labels, rows: this.labels.ids.length, testRows: this.testLabels?.ids.length ?? 0, classes: this.labels.classes }, 'labels loaded');
    // A label --class-weight names that is not a class is refused now, not once the parties have joined.
    if (config.classWeight && this.labels.classes) resolveClassWeights(config.classWeight, this.labels.y, this.labels.classes);
    if (this.resumeFrom) checkResumedLabelPrivacy(this.resumeFrom, config.labelPrivacy !== undefined);
    // Drawn (or, for the same job, read back) before anything is sent: every party then only
    // ever sees what follows from the flipped labels.
    this.labelFlips = resolveLabelFlips(this.cfg, this.labels, log);
    const flipped = this.labelFlips;
    this.trainLabels = flipped ? { ...this.labels, y: applyFlips(this.labels.y, flipped.flipped) } : this.labels;
    const labelFlip = flipped?.flipProbability ?? 0;
    if (this.resumeFrom) checkResumedLabelPrivacy(this.resumeFrom, labelFlip);
    if (this.resumeFrom) checkResumedClassWeights(this.resumeFrom, config.classWeight, this.trainLabels);
    const cfg = this.cfg;
    this.port = new PartyPort({
      ids: cfg.parties,
      policy: { credentials: cfg.credentials, jobId: cfg.jobId, maxRows: this.maxRows },
      psiIds: { train: this.labels.ids, test: this.testLabels?.ids },
      psiSecret: () => jobSecret(cfg.out, cfg.jobId),
      // A resumed job keeps the caches its parties were aligned with: rotating, or ageing out,
      // mid-job would send them label points under a new key, which they refuse (docs/privacy.md 11.7).
      psiCache: cfg.psiCache && cfg.resume ? { ...cfg.psiCache, rotate: false, maxAgeDays: Infinity } : cfg.psiCache,
      progressNames: { psi: (set, what) => `${set} ${what}`, party: (party, set) => `${party} ${set} ids` },
      watch: (step) => this.monitor?.alignment.step(step),
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

  private get parties() {
    return this.port.parties;
  }

  async start(): Promise<CoordinatorHandle> {
    const { cfg, log, port: partyPort } = this;
    // The largest legitimate frame: a party's ids (up to maxRows points, and one point per
    // label id of the set) or a vector of doubles over the label rows, whichever is larger.
    const labelRows = Math.max(this.labels.ids.length, this.testLabels?.ids.length ?? 0);
    const maxPayload = Math.max((this.maxRows + labelRows) * POINT_BYTES, labelRows * 8) + ENVELOPE_BYTES;
    // The intersection's clock starts now; its label side once listening, while the parties start.
    this.alignment.started = performance.now();
    if (cfg.http && this.monitor) this.status = await startStatusServer(cfg.http, this.monitor, log);
    let port: number;
    try {
      port = await partyPort.listen({ host: cfg.host, port: cfg.port, tls: cfg.tls, maxPayload, helloTimeoutMs: cfg.helloTimeoutMs, onRefused: (code, kind) => this.monitor?.refused(code, kind) });
    } catch (err) {
      await this.status?.close();
      throw err;
    }
    this.phase = 'waiting';
    log.info({ port, host: cfg.host, tls: Boolean(cfg.tls), mutualTls: Boolean(cfg.tls?.clientCa), jobId: cfg.jobId, parties: cfg.parties, maxPayload }, 'listening');
    // After saying so (the parties start reading their data meanwhile), and before any hello is
    // handled (this runs before the event loop takes a connection): opening the caches takes seconds.
    partyPort.prepare(
      (['train', 'test'] as const).filter((set) => partyPort.psi.counts[set] > 0),
      (err) => this.fail(err),
    );
    this.run().then(
      (summary) => this.resolveDone(summary),
      (err: Error) => this.fail(err),
    );
    return { port, ...(this.status ? { httpPort: this.status.port } : {}), done: this.done, httpClosed: this.closeHttpAfterJob(), close: () => this.close() };
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
    const loop = this.loopFor(job);
    parties.lossPolicy = loop.lossPolicy;
    // A loop that cannot take a party back (SGD) starts only with every party there (one lost in the set-up is away).
    const away = parties.list.find((p) => p.status !== 'connected');
    if (loop.lossPolicy === 'fatal' && away) throw new PeerError(`party ${away.id} lost its connection after the set-up, and a ${algorithm} job cannot take it back`);
    const result = await this.guard(loop.run(joined));

    this.phase = 'finishing';
    this.finalRounds = result.rounds;
    // `done` carries the objective: never a non-finite value on the wire (loop.ts, assertFinite).
    if (!Number.isFinite(result.objective)) throw new InternalError(`after round ${result.rounds}`, `the training objective is ${result.objective}; done was not sent`);
    const done: Done = {
      type: 'done',
      jobId: cfg.jobId,
      reason: result.reason,
      rounds: result.rounds,
      objective: result.objective,
      params: { ...result.params, alpha: cfg.alpha, lambda: cfg.lambda, loss: cfg.loss },
      classes: this.labels.classes ?? null,
    };
    await this.guard(parties.finish(done, CLOSE_GRACE_MS));
    await this.guard(parties.cachesWritten());
    const built = buildSummary({ cfg, job, result, participation: joined, parties: parties.list, traffic: this.traffic, setupSeconds, totalSeconds: (performance.now() - this.started) / 1000,
      alignment: { ...ALIGNMENT_METHOD, labelIds: this.port.psi.counts, seconds: this.resumeFrom ? null : this.alignment.seconds, ...this.port.psi.report() },
      classes: this.labels.classes ?? null,
    });
    const report = reportOf(job, built, this.evaluationLabels?.ids, cfg.testSelection ? cfg.labels : cfg.testLabels, cfg.labelOptions);
    const warnings = reportWarnings(built, report);
    for (const w of warnings) this.log.warn(w);
    const summary: Summary = warnings.length > 0 ? { ...built, warnings } : built;
    writeSummary(cfg.out, summary);
    if (report) await writeJobReport(cfg.out, report, this.log);
    this.monitor?.finished(summary);
    writeJobFile(cfg.out, describeJob(cfg, summary, parties.list));
    // The checkpoint is of no use once the job is complete.
    removeCheckpoint(join(cfg.out, CHECKPOINT_FILE));
    this.log.info({ rounds: summary.rounds, objective: summary.objective, reason: result.reason, test: summary.test }, 'job done');
    this.phase = 'done';
    parties.stop();
    await this.port.close();
    return summary;
  }

  /** The job's training loop, from the table of algorithms (a resumed job's was made from its checkpoint). */
  private loopFor(job: Job, from?: Checkpoint): TrainingLoop {
    return (this.loop ??= LOOPS[job.setup.algorithm](this.loopContext(job), from));
  }

  /** waiting -> setup: every party joins, the samples are aligned, every party is set up and ready. */
  private async newJob(): Promise<{ job: Job; setupSeconds: number }> {
    const { cfg, parties, log } = this;
    const matched = await this.guard(parties.allJoined());
    const setupStart = performance.now();
    this.alignment.seconds = (setupStart - this.alignment.started) / 1000;
    this.monitor?.alignment.aligned(this.alignment.seconds);
    this.phase = 'setup';
    const skip = evaluationSkipReason(this.testLabels, parties.list);
    if (skip) log.warn({ parties: skip.parties }, skip.reason);
    const skipped = skip?.reason;
    const { samples, partyRows, selection } = alignSamples(cfg, this.labels, this.testLabels, skipped, parties, matched, this.testIds);
    const algorithm = resolveAlgorithm(cfg, parties.list, log);
    const job: Job = { ...buildJob(cfg, this.trainLabels, this.evaluationLabels, samples, skipped, undefined, algorithm, this.labelFlips), testSelection: selection };
    log.info({ rows: job.n, dropped: samples.dropped.train, testRows: job.nTest, droppedTest: samples.dropped.test, method: 'ecdh-psi', seconds: this.alignment.seconds, ...(job.setup.classWeights ? { classWeights: job.setup.classWeights } : {}) }, 'samples aligned');
    if (selection) log.info(selection, selectionLine(selection));
    // From here a lost party rejoins (within --rejoin-timeout): it is aligned again and set up
    // anew, and its ready answers the set-up request.
    this.allowRejoins(job);
    parties.lossPolicy = 'may-rejoin';
    const ready = await this.guard(
      Promise.all(
        parties.list.map((p, m) =>
          p.request(encode(setupFor(job, p.id, cfg.activeParty, { train: partyRows.train[m], test: partyRows.test[m] })), ['ready'], { jobId: cfg.jobId }),
        ),
      ),
    );
    ready.forEach((r, m) => (parties.list[m].privacy = r.privacy));
    // The PSI caches were written while the parties set up: their tables (a few hundred MB at a
    // million ids) are freed before training allocates its state, not held beside it.
    await this.guard(parties.cachesWritten());
    return { job, setupSeconds: (performance.now() - setupStart) / 1000 };
  }

  /** A job from its checkpoint: training continues once every party has rejoined. */
  private async resumeJob(cp: Checkpoint): Promise<{ job: Job; setupSeconds: number }> {
    const { cfg, parties, log } = this;
    const setupStart = performance.now();
    const job: Job = { ...buildJob(cfg, this.trainLabels, this.evaluationLabels, cp.samples, cp.evaluationSkipped ?? undefined, cp.setup, cp.setup.algorithm, this.labelFlips), testSelection: this.resumedSelection };
    if (this.resumedSelection) log.info(this.resumedSelection, selectionLine(this.resumedSelection));
    this.phase = 'training';
    const loop = this.loopFor(job, cp);
    parties.lossPolicy = loop.lossPolicy;
    this.allowRejoins(job);
    const window = Math.max(cfg.rejoinTimeoutMs, MIN_RESUME_WINDOW_MS);
    log.info({ round: cp.round, jobId: cfg.jobId }, 'resuming from checkpoint; waiting for the parties to rejoin');
    await this.guard(parties.awaitRejoins(window));
    return { job, setupSeconds: (performance.now() - setupStart) / 1000 };
  }

  private allowRejoins(job: Job): void {
    this.parties.rejoinSource = {
      labelRows: job.labelRows,
      testFrom: job.testFrom ?? 'test',
      setup: (party, rows) => setupFor(job, party, this.cfg.activeParty, rows),
      // Before training (a rejoin during the set-up) there is nothing to resume.
      resume: (p) => this.loop?.resumeFor(p, this.finalRounds),
    };
  }

  private loopContext(job: Job): LoopContext {
    const monitor = this.monitor;
    // What sees each trace line: the monitor, when there is an HTTP port.
    const onTrace = monitor ? (line: TraceLine) => monitor.traced(line) : undefined;
    return { cfg: this.cfg, job, parties: this.parties, log: this.log, traffic: this.traffic, labelsDigest: this.labelsDigest, onTrace };
  }

  /** Wait for `p` unless the job fails first. */
  private guard<T>(p: Promise<T>): Promise<T> {
    return Promise.race([p, this.failed]);
  }

  /**
   * Stop on a signal. During training by a loop that checkpoints (ADMM) the state of the last completed round is
   * checkpointed (after any checkpoint still being written) and the parties are told the coordinator is going away (1001), so they keep
   * trying to rejoin and `--resume` continues the job; otherwise the job is aborted.
   */
  async close(): Promise<void> {
    // The HTTP port closes with the process, not --http-linger after it.
    this.stopped = true;
    const resumable = this.loop?.resumable;
    if (this.phase === 'training' && resumable && resumable.completedRound > 0) {
      const round = resumable.completedRound;
      resumable.checkpoint();
      this.phase = 'failed';
      const err = new PeerError(`stopped after round ${round}; checkpoint written to ${join(this.cfg.out, CHECKPOINT_FILE)}`);
      this.parties.goingAway(`coordinator stopping after round ${round}; it can be resumed`, err);
      this.monitor?.failed(err.message);
      this.rejectFailed(err);
      // The job ends (and the process exits) once the checkpoint is on disk.
      const written = await resumable.flushCheckpoints().then(
        () => true,
        (e: Error) => (this.log.error({ err: e.message }, 'stopped: the checkpoint could not be written'), false),
      );
      if (written) this.log.warn({ round }, 'stopped: checkpoint written, resume with --resume');
      this.rejectDone(err);
    } else this.fail(new PeerError('coordinator stopped'));
    clearTimeout(this.lingerTimer);
    this.stopLinger?.();
    await Promise.all([this.port.close(), this.status?.close()]);
  }

  private fail(err: Error): void {
    if (this.phase === 'failed' || this.phase === 'done') return;
    this.phase = 'failed';
    this.log.error({ err: err.message }, 'job failed');
    this.monitor?.failed(err.message);
    this.parties.abort(err);
    this.rejectFailed(err);
    this.rejectDone(err);
    void this.port.close();
  }
}
