/**
 * What the coordinator needs to continue a job after a crash (`--resume`): written every
 * --checkpoint-seconds of training (--checkpoint-every rounds instead when that is given),
 * atomically (write, fsync, rename), as MessagePack so the vectors keep their exact bits,
 * and read back with every field checked like wire data.
 * The state is encoded at once and written in the background (CheckpointWriter), so the
 * rounds go on while the file system works.
 * Parties rejoin by themselves and are told the round (with what they need to recompute it).
 */
import { readFileSync, rmSync } from 'node:fs';
import { Packr } from 'msgpackr';
import type { Logger } from 'pino';
import { ConfigError, DataError, writeFileAtomicAsync } from '@admm-share/core';
import { requireInteger, requirePositive } from '@admm-share/runtime';
import { ALGORITHMS, LOSSES, NAME_RE, packInto, packedBound } from '@admm-share/protocol';
import type { AdmmSnapshot, RoundStats } from '../numerics/admm-step.js';
import type { TestMetrics } from './test-metrics.js';
import type { Samples, SetupParams } from '../job/job.js';
import type { ReplayPoint } from '../training/replay.js';

export const CHECKPOINT_FILE = 'checkpoint.bin';

/**
 * When a job writes its checkpoint: every `rounds` completed rounds (0: never), or after the
 * first round that ends `seconds` or more after the last checkpoint was queued (or training
 * began).
 */
export type CheckpointPolicy = { rounds: number } | { seconds: number };

/**
 * Seconds between checkpoints by default. A checkpoint is the whole state (427 MB at a million
 * rows and four parties, 12.6 MB on a9a): every tenth round, the default before, it took a9a's
 * coordinator 2.4-2.9 ms of CPU a round and its median round 0.9-1.0 ms, and at a million rows
 * the coordinator 1-1.5 s alone every ten rounds of 0.25 s (docs/scaling.md). By time, a crash
 * loses at most this much training however long a round is, and the checkpoints cost a bounded
 * part of it.
 */
export const DEFAULT_CHECKPOINT_SECONDS = 30;

/** The policy of --checkpoint-every and --checkpoint-seconds (at most one given; by time when neither is). */
export function checkpointPolicy(everyRounds: number | undefined, seconds: number | undefined): CheckpointPolicy {
  if (everyRounds !== undefined && seconds !== undefined) throw new ConfigError('give --checkpoint-every (rounds) or --checkpoint-seconds (time), not both');
  if (everyRounds !== undefined) return { rounds: requireInteger('checkpoint-every', everyRounds, 0) };
  return { seconds: seconds === undefined ? DEFAULT_CHECKPOINT_SECONDS : requirePositive('checkpoint-seconds', seconds) };
}

/** Whether round `round`, ending at `now` (ms, performance.now()), is due a checkpoint when the last was queued at `last`. */
export function checkpointDue(policy: CheckpointPolicy, round: number, now: number, last: number): boolean {
  return 'rounds' in policy ? policy.rounds > 0 && round % policy.rounds === 0 : now - last >= 1000 * policy.seconds;
}

const FORMAT = 'admm-share-checkpoint/5';

export interface Checkpoint {
  format: typeof FORMAT;
  jobId: string;
  /** The last completed round. */
  round: number;
  /** Digest of the label files, so a resume with other labels is refused. */
  labelsDigest: string;
  samples: Samples;
  evaluationSkipped: string | null;
  setup: SetupParams;
  admm: AdmmSnapshot;
  /** Each party's round `round` as it can be replayed to a rejoining party. */
  replay: ReplayPoint;
  /** The last round as its trace line reports it, and whether it converged (a converged job only finishes). */
  last: CheckpointedRound;
}

/** A completed round as a checkpoint keeps it (the training loop adds its number and the parties' solver figures). */
export interface CheckpointedRound {
  stats: RoundStats;
  penaltySq: number;
  converged: boolean;
  test: TestMetrics | undefined;
  seconds: number;
  roundSeconds: number;
  bytes: { toCoordinator: number; fromCoordinator: number };
  epsilonSpent: Record<string, number>;
}

// One configured Packr: typed arrays keep their type and bytes (see the protocol's codec).
const packr = new Packr({ moreTypes: true, useRecords: false });

/**
 * Buffers a CheckpointWriter keeps to encode into. With one, a checkpoint due while the last one
 * was still being written went into a fresh buffer: on a9a that was 8 checkpoints of 10 (a
 * write and its fsync outlast ten rounds there), each faulting its pages in (7 ms against 1.4
 * for a9a's 12.6 MB, 245 against 70-80 ms for a million rows' 427 MB), and each left its buffer
 * for the collector. With two, one can be written while the next is encoded. Checkpoints by
 * time (the default) seldom overlap; `--checkpoint-every` with short rounds still does.
 */
export const KEPT_BUFFERS = 2;

/**
 * Checkpoints of one job, one after the other. `write` encodes the state at once (it goes on
 * changing) and queues the bytes; each write goes to disk after the one before it, so the file
 * only ever moves forward. A write that failed fails the next `write` or `flush`.
 */
export class CheckpointWriter {
  private queue: Promise<void> = Promise.resolve();
  private failure: Error | undefined;
  /**
   * The buffers encoded into again once their write is on disk (KEPT_BUFFERS at most): a fresh
   * buffer costs a page fault every 4 KiB as it is written. They stay resident between
   * checkpoints.
   */
  private readonly kept: { buffer: Buffer; writing: boolean }[] = [];
  private allocated = 0;

  constructor(
    readonly path: string,
    private readonly log?: Logger,
  ) {}

  write(cp: Omit<Checkpoint, 'format'>): void {
    this.throwFailure();
    const value = { format: FORMAT, ...cp };
    // Into one buffer sized for it: msgpackr otherwise grows its buffer by copies. A 427 MB
    // state (a million rows, four parties, Anderson memory 5) took 6.1 s and 1.1 GB above the
    // state to encode that way, against 1.5 s and the 427 MB of the encoding itself.
    const slot = this.slotFor(packedBound(value));
    slot.writing = true;
    const bytes = packInto(packr, value, slot.buffer);
    this.queue = this.queue.then(() =>
      writeFileAtomicAsync(this.path, bytes, 0o600)
        .then(
          () => this.log?.debug({ round: cp.round }, 'checkpoint written'),
          (err: NodeJS.ErrnoException) => {
            this.failure ??= new DataError(this.path, undefined, `cannot write the checkpoint of round ${cp.round} (${err.code ?? err.message})`);
          },
        )
        .finally(() => (slot.writing = false)),
    );
  }

  /**
   * A buffer of at least `need` bytes that no queued write holds: a kept one, else a new one,
   * kept in place of a free one too small or beside the others up to KEPT_BUFFERS (else used
   * once: every kept one is still being written).
   */
  private slotFor(need: number): { buffer: Buffer; writing: boolean } {
    const free = this.kept.find((s) => !s.writing && s.buffer.length >= need);
    if (free) return free;
    const slot = { buffer: Buffer.allocUnsafeSlow(need), writing: false };
    this.allocated++;
    const small = this.kept.findIndex((s) => !s.writing);
    if (small >= 0) this.kept[small] = slot;
    else if (this.kept.length < KEPT_BUFFERS) this.kept.push(slot);
    return slot;
  }

  /** Buffers allocated so far: KEPT_BUFFERS at most while no more than one write is under way when the next is queued. */
  get allocations(): number {
    return this.allocated;
  }

  /** Every queued checkpoint is on disk (or the first failure is thrown). */
  async flush(): Promise<void> {
    await this.queue;
    this.throwFailure();
  }

  private throwFailure(): void {
    if (this.failure) throw this.failure;
  }
}

/** One checkpoint, on disk when the promise resolves. */
export async function writeCheckpoint(path: string, cp: Omit<Checkpoint, 'format'>): Promise<void> {
  const writer = new CheckpointWriter(path);
  writer.write(cp);
  await writer.flush();
}

export function removeCheckpoint(path: string): void {
  rmSync(path, { force: true });
}

export function readCheckpoint(path: string): Checkpoint {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new DataError(path, undefined, `cannot read the checkpoint to resume from (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let value: unknown;
  try {
    value = packr.unpack(bytes);
  } catch (err) {
    throw new DataError(path, undefined, `not a checkpoint (${(err as Error).message})`);
  }
  return validateCheckpoint(value, path);
}

type Obj = Record<string, unknown>;

/** Rebuild a checkpoint from a decoded value, checking every field; nothing unchecked survives. */
export function validateCheckpoint(value: unknown, path: string): Checkpoint {
  const bad = (what: string): never => {
    throw new DataError(path, undefined, `not a valid checkpoint: ${what}`);
  };
  const obj = (v: unknown, what: string): Obj => (typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v) ? (v as Obj) : bad(`${what} is not a map`));
  const num = (v: unknown, what: string, ok: (x: number) => boolean = Number.isFinite): number => (typeof v === 'number' && ok(v) ? v : bad(`${what} is ${String(v)}`));
  const int = (v: unknown, what: string, min = 0) => num(v, what, (x) => Number.isSafeInteger(x) && x >= min);
  const str = (v: unknown, what: string): string => (typeof v === 'string' ? v : bad(`${what} is not a string`));
  /** A vector of `n` finite values of the given kind (doubles, or the single-precision Anderson differences). */
  const floats = <A extends Float64Array | Float32Array>(kind: new (n: number) => A, v: unknown, what: string, n: number): A => {
    if (!(v instanceof kind)) return bad(`${what} is not a ${kind.name}`);
    if (v.length !== n) bad(`${what} has ${v.length} values, expected ${n}`);
    for (let i = 0; i < v.length; i++) if (!Number.isFinite(v[i])) bad(`${what}[${i}] is ${v[i]}`);
    return v;
  };
  const f64 = (v: unknown, what: string, n: number): Float64Array => floats(Float64Array, v, what, n);
  const lists = <A extends Float64Array | Float32Array>(kind: new (n: number) => A, v: unknown, what: string, count: number, n: number): A[] => {
    if (!Array.isArray(v) || v.length !== count) return bad(`${what} is not a list of ${count} vectors`);
    return v.map((x, m) => floats(kind, x, `${what}[${m}]`, n));
  };
  const rows = (v: unknown, what: string): Uint32Array => (v instanceof Uint32Array ? v : bad(`${what} is not a Uint32Array`));
  const oneOf = <T extends string>(v: unknown, what: string, options: readonly T[]): T => (options.find((o) => o === v) ?? bad(`${what} is ${String(v)}`));

  /** Anderson acceleration's state (admm-step.ts, anderson.ts): vectors of the packed state's length. */
  const andersonState = (v: unknown): NonNullable<AdmmSnapshot['anderson']> => {
    const x = obj(v, 'admm.anderson');
    const memory = int(x.memory, 'admm.anderson.memory', 1);
    const st = obj(x.state, 'admm.anderson.state');
    const dim = (M + 2) * n;
    const count = Array.isArray(st.dF) ? st.dF.length : bad('admm.anderson.state.dF is not a list');
    if (count > memory) bad(`admm.anderson.state holds ${count} differences, more than its memory ${memory}`);
    const bool = (b: unknown, what: string): boolean => (typeof b === 'boolean' ? b : bad(`${what} is not a boolean`));
    const cnt = obj(st.counts, 'admm.anderson.state.counts');
    return {
      memory,
      state: {
        point: f64(st.point, 'admm.anderson.state.point', dim),
        prevF: f64(st.prevF, 'admm.anderson.state.prevF', dim),
        prevG: f64(st.prevG, 'admm.anderson.state.prevG', dim),
        dF: lists(Float32Array, st.dF, 'admm.anderson.state.dF', count, dim),
        dG: lists(Float32Array, st.dG, 'admm.anderson.state.dG', count, dim),
        gram: f64(st.gram, 'admm.anderson.state.gram', count * count),
        rhs: f64(st.rhs, 'admm.anderson.state.rhs', count),
        havePrev: bool(st.havePrev, 'admm.anderson.state.havePrev'),
        extrapolated: bool(st.extrapolated, 'admm.anderson.state.extrapolated'),
        // Infinity before the first point is kept.
        lastNorm: num(st.lastNorm, 'admm.anderson.state.lastNorm', (y) => y >= 0),
        counts: { extrapolated: int(cnt.extrapolated, 'admm.anderson.state.counts.extrapolated'), rejected: int(cnt.rejected, 'admm.anderson.state.counts.rejected') },
      },
    };
  };

  const o = obj(value, 'the file');
  if (o.format !== FORMAT) bad(`format ${String(o.format)} (expected ${FORMAT})`);
  const jobId = str(o.jobId, 'jobId');
  if (!NAME_RE.test(jobId)) bad(`jobId '${jobId}'`);

  const s = obj(o.setup, 'setup');
  const setup: SetupParams = {
    type: 'setup',
    jobId: str(s.jobId, 'setup.jobId'),
    lambda: num(s.lambda, 'setup.lambda', (x) => Number.isFinite(x) && x >= 0),
    loss: oneOf(s.loss, 'setup.loss', LOSSES),
    rounds: int(s.rounds, 'setup.rounds', 1),
    rho: num(s.rho, 'setup.rho', (x) => Number.isFinite(x) && x > 0),
    parties: int(s.parties, 'setup.parties', 1),
    algorithm: oneOf(s.algorithm, 'setup.algorithm', ALGORITHMS),
    // Absent in checkpoints written before label privacy existed: those jobs flipped nothing.
    labelFlip: num(s.labelFlip, 'setup.labelFlip', (x) => x >= 0 && x < 0.5),
  };
  const M = setup.parties;

  const sm = obj(o.samples, 'samples');
  const lr = obj(sm.labelRows, 'samples.labelRows');
  const labelRows = { train: rows(lr.train, 'labelRows.train'), test: rows(lr.test, 'labelRows.test') };
  const n = labelRows.train.length;
  if (n === 0) bad('no training rows');
  const dr = obj(sm.dropped, 'samples.dropped');
  const samples: Samples = {
    labelRows,
    dropped: { train: int(dr.train, 'dropped.train'), test: int(dr.test, 'dropped.test') },
  };

  const a = obj(o.admm, 'admm');
  const admm: AdmmSnapshot = {
    rho: num(a.rho, 'admm.rho', (x) => Number.isFinite(x) && x > 0),
    c: f64(a.c, 'admm.c', n),
    z: f64(a.z, 'admm.z', n),
    dualVar: f64(a.dualVar, 'admm.dualVar', n),
    sum: f64(a.sum, 'admm.sum', n),
    a: f64(a.a, 'admm.a', n),
    t: f64(a.t, 'admm.t', n),
    slope: f64(a.slope, 'admm.slope', n),
    curvature: f64(a.curvature, 'admm.curvature', n),
    prevShares: lists(Float64Array, a.prevShares, 'admm.prevShares', M, n),
    ...(a.anderson === undefined || a.anderson === null ? {} : { anderson: andersonState(a.anderson) }),
  };

  const round = int(o.round, 'round', 1);
  const r = obj(o.replay, 'replay');
  const replay: ReplayPoint = {
    round: int(r.round, 'replay.round', 1),
    rho: num(r.rho, 'replay.rho', (x) => Number.isFinite(x) && x > 0),
    cs: lists(Float64Array, r.cs, 'replay.cs', M, n),
    previousShares: lists(Float64Array, r.previousShares, 'replay.previousShares', M, n),
    shares: lists(Float64Array, r.shares, 'replay.shares', M, n),
  };
  if (replay.round !== round) bad(`replay.round ${replay.round} is not the checkpoint's round ${round}`);

  const l = obj(o.last, 'last');
  const st = obj(l.stats, 'last.stats');
  const nonNeg = (x: number) => Number.isFinite(x) && x >= 0;
  /** Test metrics may be NaN (the AUC of a one-class test set); a budget is finite. */
  const numbers = (v: unknown, what: string, names?: readonly string[]): Record<string, number> => {
    const m = obj(v, what);
    const out: Record<string, number> = {};
    for (const [k, x] of Object.entries(m)) {
      if (names && !names.includes(k)) bad(`${what}.${k} is not expected`);
      out[k] = names ? num(x, `${what}.${k}`, (y) => Number.isFinite(y) || Number.isNaN(y)) : num(x, `${what}.${k}`);
    }
    return out;
  };
  const by = obj(l.bytes, 'last.bytes');
  const last: CheckpointedRound = {
    stats: {
      primal: num(st.primal, 'last.stats.primal', nonNeg),
      dual: num(st.dual, 'last.stats.dual', nonNeg),
      epsPrimal: num(st.epsPrimal, 'last.stats.epsPrimal', nonNeg),
      epsDual: num(st.epsDual, 'last.stats.epsDual', nonNeg),
      rho: num(st.rho, 'last.stats.rho', (x) => Number.isFinite(x) && x > 0),
    },
    penaltySq: num(l.penaltySq, 'last.penaltySq', nonNeg),
    converged: typeof l.converged === 'boolean' ? l.converged : bad('last.converged'),
    test: l.test === undefined || l.test === null ? undefined : numbers(l.test, 'last.test', ['logLoss', 'accuracy', 'auc', 'rmse']),
    seconds: num(l.seconds, 'last.seconds', nonNeg),
    roundSeconds: num(l.roundSeconds, 'last.roundSeconds', nonNeg),
    bytes: { toCoordinator: int(by.toCoordinator, 'last.bytes.toCoordinator'), fromCoordinator: int(by.fromCoordinator, 'last.bytes.fromCoordinator') },
    epsilonSpent: numbers(l.epsilonSpent, 'last.epsilonSpent'),
  };
  return {
    format: FORMAT,
    jobId,
    round,
    labelsDigest: str(o.labelsDigest, 'labelsDigest'),
    samples,
    evaluationSkipped: o.evaluationSkipped === null ? null : str(o.evaluationSkipped, 'evaluationSkipped'),
    setup,
    admm,
    replay,
    last,
  };
}
