/**
 * The ADMM training loop. One round t:
 *   sendRound (round t: rho and c to every party; with Anderson acceleration each its own c)
 *   -> round t-1's trace line (its objective's loss summed after the step, mostly by the step's
 *      worker thread) and, when due, its checkpoint (encoded now, written in the background),
 *      while the parties compute
 *   -> collect the shares (each recorded for replays as it arrives)
 *   -> AdmmStep.step (z-update, dual update, residuals, next c) -> evaluate (when due).
 * The loop stops at convergence, at the last round, or when a party's budget refuses a round.
 */
import { join } from 'node:path';
import { PeerError, trainingLoss } from '@admm-share/core';
import type { Exhausted, Resume, Share, SolverStats, StopReason } from '@admm-share/protocol';
import { AdmmStep } from '../numerics/admm-step.js';
import { CHECKPOINT_FILE, type Checkpoint, type CheckpointedRound, CheckpointWriter, checkpointDue as isCheckpointDue } from '../output/checkpoint.js';
import { type TraceLine, TraceWriter } from '../output/trace.js';
import { trafficSince } from '../bytes.js';
import type { Participation } from '../job/job.js';
import type { PartyConnection } from '../connections/party-connection.js';
import { evaluate, evaluatesAt } from './evaluation.js';
import { type AdmmResult, type LoopContext, type Resumable, type TrainingLoop, assertFinite } from './loop.js';
import { ReplayLog } from './replay.js';

/** Each party's conjugate gradient solve of the round, by id; undefined when no party reported one. */
function solverStats(answers: readonly (Share | Exhausted)[], parties: readonly { id: string }[]): Record<string, SolverStats> | undefined {
  const entries = answers.flatMap((r, m) => (r.type === 'share' && r.solver ? [[parties[m].id, r.solver] as const] : []));
  return entries.length > 0 ? Object.fromEntries(entries) : undefined;
}

/** A completed round: what its trace line and a checkpoint need (the checkpoint keeps all but the round's number and the solver's). */
export interface FinishedRound extends CheckpointedRound {
  round: number;
  /** The conjugate gradient solves of the parties that reported one (not kept in a checkpoint). */
  solver?: Record<string, SolverStats>;
}

export class AdmmLoop implements TrainingLoop, Resumable {
  /** A party whose connection is lost may rejoin: it resumes from its latest answered round. */
  readonly lossPolicy = 'may-rejoin';
  /** A stop during training checkpoints this loop; --resume continues it. */
  readonly resumable: Resumable = this;
  private readonly admm: AdmmStep;
  private readonly replay: ReplayLog;
  /** The last completed round (the checkpoint's on a resumed job). */
  private last: FinishedRound | undefined;
  private readonly checkpoints: CheckpointWriter;

  constructor(
    private readonly d: LoopContext,
    from?: Checkpoint,
  ) {
    const { cfg, job } = d;
    this.checkpoints = new CheckpointWriter(join(cfg.out, CHECKPOINT_FILE), d.log);
    this.admm = new AdmmStep({
      variant: cfg.variant,
      // With label privacy: the loss corrected for the flips, in the z-update and the objective.
      loss: trainingLoss(job.setup.loss, job.setup.labelFlip, job.setup.classWeights),
      y: job.y,
      parties: d.parties.list.length,
      lambda: job.setup.lambda,
      rho: from ? from.admm.rho : job.setup.rho,
      alpha: cfg.variant === 'exact' ? cfg.alpha : 1,
      tolerance: cfg.tolerance,
      // A resumed job goes on as it was checkpointed; a new one accelerates unless a party adds
      // noise (the iteration is then not a fixed-point map; research mode, docs/rho.md).
      anderson: from ? (from.admm.anderson?.memory ?? 0) : cfg.variant === 'exact' && !d.parties.list.some((p) => p.noise) ? cfg.anderson : 0,
    });
    if (from) {
      this.admm.restore(from.admm);
      this.last = { round: from.round, ...from.last, epsilonSpent: { ...from.last.epsilonSpent } };
    } else this.admm.step(d.parties.list.map(() => new Float64Array(job.n)), true); // z and dual from x = 0, so round 1 already moves
    this.replay = new ReplayLog(d.parties.list.length, job.n, job.setup.rho, from?.replay);
  }

  /** Where a rejoining party resumes: its latest answered round (not after the job's last round once it has ended). */
  resumeFor(p: PartyConnection, atMost?: number): Resume {
    return this.replay.resume(p.index, this.d.job.jobId, atMost);
  }

  get completedRound(): number {
    return this.last?.round ?? 0;
  }

  async run(participation: Participation): Promise<AdmmResult> {
    const { cfg, job, log } = this.d;
    const { maxRounds } = participation;
    const restoredRound = this.last?.round;
    log.info({ rho: this.admm.rho, variant: cfg.variant, alpha: cfg.alpha, anderson: this.admm.opts.anderson ?? 0, maxRounds, from: restoredRound ?? 0 }, 'training');
    const trace = new TraceWriter(cfg.out, log, maxRounds, restoredRound === undefined ? undefined : restoredRound - 1, this.d.onTrace);
    const trainStart = performance.now();
    let reason: StopReason = this.last?.converged ? 'converged' : 'max-rounds';
    // A resumed job reports its checkpoint's round again (the trace kept the rounds before it).
    let untraced: FinishedRound | undefined = this.last;
    // A round's checkpoint is encoded once the next round's messages are out (its state does not
    // change until the next step, and the parties are computing), or after the last round.
    let checkpointDue = false;
    // When the last checkpoint was queued (--checkpoint-seconds counts from it).
    let lastCheckpoint = trainStart;
    let completed = false;
    try {
      while (this.last === undefined || (!this.last.converged && this.last.round < maxRounds)) {
        const t = this.completedRound + 1;
        const roundStart = performance.now();
        const before = { ...this.d.traffic };
        const replies = this.sendRound(t);
        if (untraced) trace.write(this.traceLine(untraced, participation.noisy));
        untraced = undefined;
        if (checkpointDue) this.checkpoint();
        checkpointDue = false;
        const answers = await Promise.all(replies);
        const epsilonSpent = Object.fromEntries(answers.map((r, m) => [this.d.parties.list[m].id, r.epsilonSpent]));
        const refusedBy = answers.flatMap((r, m) => (r.type === 'exhausted' ? [this.d.parties.list[m].id] : []));
        if (refusedBy.length > 0) {
          // A party's ledger refused this round: end with the model of the round before.
          log.warn({ round: t, parties: refusedBy }, 'privacy budget exhausted: ending the job');
          reason = 'budget';
          if (!this.last)
            throw new PeerError(
              `no round ran: no privacy budget left at ${refusedBy.join(', ')}; a new run needs a new --job id (a party's ledger holds the releases of an earlier run of job ${job.jobId})`,
            );
          this.last.epsilonSpent = epsilonSpent;
          break;
        }
        const shares = answers.filter((r): r is Share => r.type === 'share');
        const stats = this.admm.step(shares.map((s) => s.share));
        // The shares were bounded on receipt (MAX_SHARE_MAGNITUDE), so this never fires unless
        // the update itself is wrong; then the job fails here, not at the parties that refuse c.
        // (c is what is sent; z and the dual reach it, so one pass over c covers them; with
        // Anderson acceleration each party's own vector is what is sent.) The step checked
        // them; only then are they searched, for the message.
        if (!this.admm.sentFinite()) {
          if (this.admm.accelerated) this.d.parties.list.forEach((p, m) => assertFinite(`round ${t}`, `the vector for ${p.id}`, this.admm.cFor(m)));
          else assertFinite(`round ${t}`, 'c', this.admm.c);
        }
        const converged = stats.primal <= stats.epsPrimal && stats.dual <= stats.epsDual;
        const now = performance.now();
        this.last = untraced = {
          round: t,
          stats,
          penaltySq: shares.reduce((acc, s) => acc + s.penaltySq, 0),
          converged,
          test: undefined,
          seconds: (now - trainStart) / 1000,
          roundSeconds: (now - roundStart) / 1000,
          bytes: trafficSince(this.d.traffic, before),
          epsilonSpent,
          solver: solverStats(answers, this.d.parties.list),
        };
        if (converged) reason = 'converged';
        const due = isCheckpointDue(cfg.checkpoint, t, now, lastCheckpoint);
        if (due) lastCheckpoint = now;
        const evaluating = evaluatesAt(job, t, converged || t === maxRounds, cfg.evalEvery);
        // Before an evaluation (the last round's, or --eval-every's) the checkpoint is queued at
        // once, as the job may be stopped while the parties score.
        if (due && evaluating) this.checkpoint();
        else checkpointDue = due;
        if (evaluating) this.last.test = await evaluate(job, this.d.parties, t);
      }
      const last = this.last;
      if (!last) throw new Error('internal: training ended without a round');
      // A job resumed from the checkpoint of its last round evaluates the model again if it had not.
      if (last.test === undefined && last.round === restoredRound && evaluatesAt(job, last.round, true, 0)) last.test = await evaluate(job, this.d.parties, last.round);
      if (untraced) trace.write(this.traceLine(untraced, participation.noisy));
      if (checkpointDue) this.checkpoint();
      completed = true;
      return {
        algorithm: 'admm',
        reason,
        rounds: last.round,
        objective: this.admm.objective(last.penaltySq),
        residuals: { primal: last.stats.primal, dual: last.stats.dual },
        metrics: last.test,
        trainingSeconds: (performance.now() - trainStart) / 1000,
        rho: { initial: job.setup.rho, final: this.admm.rho },
        params: { variant: cfg.variant, rho: this.admm.rho },
        ...(this.admm.accelerationCounts ? { acceleration: { memory: this.admm.opts.anderson ?? 0, ...this.admm.accelerationCounts } } : {}),
        epsilonSpent: last.epsilonSpent,
      };
    } finally {
      this.admm.close();
      trace.close(completed);
      // A checkpoint still being written finishes (a failed job is resumed from it); its own
      // failure only surfaces if training did not fail first.
      const flushed = this.checkpoints.flush();
      if (completed) await flushed;
      else await flushed.catch(() => undefined);
    }
  }

  /** Wait until every checkpoint written so far is on disk. */
  flushCheckpoints(): Promise<void> {
    return this.checkpoints.flush();
  }

  /** Round t's request to every party; each share is recorded for replays the moment it arrives. */
  private sendRound(t: number): Promise<Share | Exhausted>[] {
    const { job, parties } = this.d;
    const rho = this.admm.rho;
    // The vectors are kept as they were sent (the step overwrites them in place), in copies the
    // replay log recycles. Without acceleration every party gets the same one, encoded once.
    const shared = this.admm.accelerated ? undefined : this.replay.sentCopy(0, t, this.admm.c);
    const cs = parties.list.map((_, m) => shared ?? this.replay.sentCopy(m, t, this.admm.cFor(m)));
    const round = (c: Float64Array) => ({ type: 'round' as const, jobId: job.jobId, round: t, rho, c });
    const types = ['share', 'exhausted'] as const;
    const ctx = () => ({ jobId: job.jobId, n: job.n, round: t });
    const into = (m: number) => this.replay.receivedInto(m, t);
    const requests = shared ? parties.requestAll(round(shared), types, ctx, into) : parties.requestEach((m) => round(cs[m]), types, ctx, into);
    return requests.map((r, m) =>
      r.then((reply) => {
        if (reply.type === 'share') this.replay.record(m, t, rho, cs[m], reply.share);
        return reply;
      }),
    );
  }

  /** Round r's trace line (its objective's loss was summed by the step). */
  private traceLine(r: FinishedRound, noisy: boolean): TraceLine {
    return {
      round: r.round,
      objective: this.admm.objective(r.penaltySq),
      primal: r.stats.primal,
      dual: r.stats.dual,
      rho: r.stats.rho,
      seconds: r.seconds,
      roundSeconds: r.roundSeconds,
      bytes: r.bytes,
      ...(noisy ? { epsilonSpent: r.epsilonSpent } : {}),
      ...(r.solver ? { solver: r.solver } : {}),
      ...(r.test ? { test: r.test } : {}),
    };
  }

  /** Queue the state the job needs to go on after a crash (written atomically in the background; see checkpoint.ts). */
  checkpoint(): void {
    const last = this.last;
    if (!last) return;
    const { job, labelsDigest } = this.d;
    this.checkpoints.write({
      labelsDigest,
      jobId: job.jobId,
      round: last.round,
      samples: { labelRows: job.labelRows, dropped: job.dropped, ...(job.testFrom ? { testFrom: job.testFrom } : {}) },
      evaluationSkipped: job.evaluationSkipped ?? null,
      setup: job.setup,
      admm: this.admm.snapshot(),
      replay: this.replay.point(last.round),
      last,
    });
  }
}
