/**
 * What the coordinator needs to continue a job after a crash (`--resume`): written every
 * --checkpoint-seconds of training (--checkpoint-every rounds instead when that is given),
 * atomically (write, fsync, rename), as MessagePack so the vectors keep their exact bits,
 * and read back through its schema (checkpointSchema), every field and length checked.
 * The state is encoded at once and written in the background (CheckpointWriter), so the
 * rounds go on while the file system works.
 * Parties rejoin by themselves and are told the round (with what they need to recompute it).
 * The file ends with an HMAC-SHA256 of everything before it under the coordinator's key
 * (coordinator.key beside it), checked before a byte of it is decoded: a flipped or zeroed byte,
 * an edited z or a share copied in from another round is refused as such.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { Packr } from 'msgpackr';
import type { Logger } from 'pino';
import { ConfigError, DataError, parseWith, writeFileAtomicAsync, z } from '@admm-share/core';
import { requireInteger, requirePositive } from '@admm-share/runtime';
import { ALGORITHMS, LOSSES, packInto, packedBound } from '@admm-share/protocol';
import { bytesSchema, nameSchema } from './fields.js';
import { coordinatorKey, signingKey } from './coordinator-key.js';

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

const FORMAT = 'admm-share-checkpoint/6';

/** Bytes of the HMAC-SHA256 at the end of the file. */
const MAC_BYTES = 32;

/** The trailer of `body` under `key` (a domain tag first: no other signed file's digest fits here). */
function macOf(key: Buffer, body: Uint8Array): Buffer {
  return createHmac('sha256', key).update('admm-share checkpoint\0').update(body).digest();
}

/**
 * `bytes` followed by its MAC: in `room` (the buffer `bytes` was encoded into) when it has
 * MAC_BYTES to spare after them, so that a checkpoint of hundreds of MB is not copied. The HMAC
 * runs on the main thread, between rounds: 7 ms for a9a's 12.6 MB and 0.48 s for a million rows'
 * 427 MB (measured on this project's 2-core machine), once per --checkpoint-seconds (30).
 */
function sealed(bytes: Buffer, room: Buffer, key: Buffer): Buffer {
  const start = bytes.byteOffset - room.byteOffset;
  const fits = bytes.buffer === room.buffer && start >= 0 && start + bytes.length + MAC_BYTES <= room.length;
  const out = fits ? room.subarray(start, start + bytes.length + MAC_BYTES) : Buffer.concat([bytes, Buffer.alloc(MAC_BYTES)]);
  macOf(key, bytes).copy(out, bytes.length);
  return out;
}

/** A vector of finite values of one kind (doubles, or Anderson's single-precision differences); its length is checked against the job's below. */
const floats = <A extends Float64Array | Float32Array>(kind: { new (n: number): A; readonly name: string }) =>
  z.custom<A>((v) => v instanceof kind, `expected a ${kind.name}`).superRefine((v, ctx) => {
    for (let i = 0; i < v.length; i++)
      if (!Number.isFinite(v[i])) {
        ctx.addIssue({ code: 'custom', path: [i], message: `is ${v[i]}` });
        return;
      }
  });
const f64 = floats<Float64Array>(Float64Array);
const f32 = floats<Float32Array>(Float32Array);
const rows = z.custom<Uint32Array>((v) => v instanceof Uint32Array, 'expected a Uint32Array');
const nonNegative = z.number().min(0);
const positive = z.number().positive();
/** Test metrics as MessagePack keeps them: NaN (the AUC of a one-class test set) stays NaN. */
const metric = z.union([z.number(), z.nan()]).optional();

/** Anderson acceleration's state (admm-step.ts, anderson.ts). */
const andersonSchema = z.object({
  memory: z.int().min(1),
  state: z.object({
    point: f64,
    prevF: f64,
    prevG: f64,
    dF: z.array(f32),
    dG: z.array(f32),
    gram: f64,
    rhs: f64,
    havePrev: z.boolean(),
    extrapolated: z.boolean(),
    // Infinity before the first point is kept.
    lastNorm: z.custom<number>((v) => typeof v === 'number' && v >= 0, 'expected a number >= 0'),
    counts: z.object({ extrapolated: z.int().min(0), rejected: z.int().min(0) }),
  }),
});

/** A completed round as a checkpoint keeps it (the training loop adds its number and the parties' solver figures). */
const checkpointedRoundSchema = z.object({
  stats: z.object({ primal: nonNegative, dual: nonNegative, epsPrimal: nonNegative, epsDual: nonNegative, rho: positive }),
  penaltySq: nonNegative,
  converged: z.boolean(),
  test: z
    .strictObject({ logLoss: metric, accuracy: metric, auc: metric, rmse: metric })
    .nullish()
    .transform((t) => t ?? undefined),
  seconds: nonNegative,
  roundSeconds: nonNegative,
  bytes: bytesSchema,
  epsilonSpent: z.record(z.string(), z.number()),
});
export type CheckpointedRound = z.output<typeof checkpointedRoundSchema>;

export const checkpointSchema = z
  .object({
    format: z.literal(FORMAT),
    jobId: nameSchema,
    /** The last completed round. */
    round: z.int().min(1),
    /** Digest of the label files, so a resume with other labels is refused. */
    labelsDigest: z.string(),
    samples: z.object({
      labelRows: z.object({ train: rows, test: rows }),
      dropped: z.object({ train: z.int().min(0), test: z.int().min(0) }),
      /** 'train': the test rows were held out of the training labels (--holdout, --test-ids); absent: rows of --test-labels. */
      testFrom: z.literal('train').optional(),
    }),
    evaluationSkipped: z.string().nullable(),
    setup: z
      .object({
        jobId: z.string(),
        lambda: nonNegative,
        loss: z.enum(LOSSES),
        rounds: z.int().min(1),
        rho: positive,
        parties: z.int().min(1),
        algorithm: z.enum(ALGORITHMS),
        labelFlip: z.number().min(0).lt(0.5),
        classWeights: z.strictObject({ negative: positive, positive }).optional(),
      })
      .transform((s) => ({ type: 'setup' as const, ...s })),
    admm: z.object({
      rho: positive,
      c: f64,
      z: f64,
      dualVar: f64,
      sum: f64,
      a: f64,
      t: f64,
      slope: f64,
      curvature: f64,
      prevShares: z.array(f64),
      // null (or absent) without acceleration.
      anderson: z.preprocess((v) => v ?? undefined, andersonSchema.optional()),
    }),
    /** Each party's round `round` as it can be replayed to a rejoining party. */
    replay: z.object({ round: z.int().min(1), rho: positive, cs: z.array(f64), previousShares: z.array(f64), shares: z.array(f64) }),
    /** The last round as its trace line reports it, and whether it converged (a converged job only finishes). */
    last: checkpointedRoundSchema,
  })
  .superRefine((cp, ctx) => {
    // The lengths follow from the job: n samples, M parties.
    const n = cp.samples.labelRows.train.length;
    const M = cp.setup.parties;
    const bad = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    const length = (v: { length: number }, path: (string | number)[], want: number) => v.length !== want && bad(path, `has ${v.length} values, expected ${want}`);
    const lists = (v: { length: number }[], path: string[], count: number, each: number) =>
      v.length !== count ? bad(path, `is not a list of ${count} vectors`) : v.forEach((x, m) => length(x, [...path, m], each));
    if (n === 0) return bad(['samples', 'labelRows', 'train'], 'no training rows');
    const a = cp.admm;
    for (const k of ['c', 'z', 'dualVar', 'sum', 'a', 't', 'slope', 'curvature'] as const) length(a[k], ['admm', k], n);
    lists(a.prevShares, ['admm', 'prevShares'], M, n);
    if (a.anderson) {
      const st = a.anderson.state;
      const dim = (M + 2) * n;
      const count = st.dF.length;
      if (count > a.anderson.memory) bad(['admm', 'anderson', 'state'], `holds ${count} differences, more than its memory ${a.anderson.memory}`);
      for (const k of ['point', 'prevF', 'prevG'] as const) length(st[k], ['admm', 'anderson', 'state', k], dim);
      lists(st.dF, ['admm', 'anderson', 'state', 'dF'], count, dim);
      lists(st.dG, ['admm', 'anderson', 'state', 'dG'], count, dim);
      length(st.gram, ['admm', 'anderson', 'state', 'gram'], count * count);
      length(st.rhs, ['admm', 'anderson', 'state', 'rhs'], count);
    }
    for (const k of ['cs', 'previousShares', 'shares'] as const) lists(cp.replay[k], ['replay', k], M, n);
    if (cp.replay.round !== cp.round) bad(['replay', 'round'], `${cp.replay.round} is not the checkpoint's round ${cp.round}`);
  });

/** What the coordinator needs to continue a job after a crash, as it is written and read back. */
export type Checkpoint = z.output<typeof checkpointSchema>;

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
  /** The coordinator's key of the folder (created there by the first checkpoint of a new --out). */
  private key: Buffer | undefined;

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
    const slot = this.slotFor(packedBound(value) + MAC_BYTES);
    slot.writing = true;
    const bytes = packInto(packr, value, slot.buffer);
    this.queue = this.queue.then(() => this.land(bytes, slot, cp.round));
  }

  /** Write one encoded checkpoint, sealed with the key; a failure is kept for the next write or flush. */
  private async land(bytes: Buffer, slot: { buffer: Buffer; writing: boolean }, round: number): Promise<void> {
    try {
      this.key ??= coordinatorKey(dirname(this.path));
      await writeFileAtomicAsync(this.path, sealed(bytes, slot.buffer, this.key), 0o600);
    } catch (err) {
      this.failure ??= new DataError(this.path, undefined, `cannot write the checkpoint of round ${round} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
      return;
    } finally {
      slot.writing = false;
    }
    this.log?.debug({ round }, 'checkpoint written');
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
  const again = 'it cannot be resumed: start the job again without --resume';
  // An unsigned checkpoint (before format 6) is named as such, before its folder's key is looked for (an older --out has none).
  const older = /admm-share-checkpoint\/(\d+)/.exec(bytes.subarray(0, 64).toString('latin1'));
  if (older && Number(older[1]) < Number(FORMAT.split('/')[1]))
    throw new DataError(path, undefined, `checkpoint: format '${older[0]}' has no keyed digest, so a change to it cannot be detected; ${again}`);
  const body = bytes.subarray(0, Math.max(0, bytes.length - MAC_BYTES));
  const mac = bytes.subarray(body.length);
  if (mac.length !== MAC_BYTES || !timingSafeEqual(mac, macOf(signingKey(dirname(path), path), body)))
    throw new DataError(path, undefined, `checkpoint: its content does not match its keyed digest (corrupted, or changed after it was written, or signed with another folder's coordinator.key): ${again}`);
  let value: unknown;
  try {
    value = packr.unpack(body);
  } catch (err) {
    throw new DataError(path, undefined, `not a checkpoint (${(err as Error).message})`);
  }
  return parseWith(checkpointSchema, value, path, 'checkpoint');
}
