/**
 * The PSI group operations over all cores: a set is cut into chunks, each worker thread
 * takes the next chunk, and progress is reported as chunks finish. A small set is done on
 * the calling thread (starting threads would cost more than it saves), and so is a check,
 * which only compares bytes. The team's threads outlive a run by IDLE_MS, so that the runs
 * of one alignment (a party hashes, blinds its ids, then the label points) share them, and
 * then end: a team holds nothing for long between calls.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { type PackedIds, sliceIds } from '../io/packed-ids.js';
import { POINT_BYTES, PointError, blindPoints, checkPoints, hashToPoints } from './psi.js';
import { PSI_DIGEST_BYTES } from './point-cache.js';
import { digestIds } from './psi-cache.js';

/**
 * Each worker thread's young generation, in MB. A chunk's garbage (its strings, hashes and
 * points) dies young, and V8's default young generation let each worker hold tens of MB of it:
 * a party's answer for 3e5 ids rose 204 MB above its resident memory at the start, against 99
 * MB with 2 MB, at the same speed (`npm run bench:psi -- --sizes 300000`; 1 MB and 8 MB gave
 * about 96 and 131 MB in a probe).
 */
const WORKER_YOUNG_MB = 2;

/** Items per chunk: a few tens of milliseconds of work, small enough for smooth progress. */
const CHUNK = 4096;

/**
 * Sets up to this many items run on the calling thread. Each worker thread costs about 20 MB
 * and a start-up: a party's answer for 6000 ids took 0.9 s and rose 42 MB above its starting
 * memory on two threads, against 0.8 s and nothing measurable on its own thread; at 16,000
 * ids the threads win (1.5 s against 2.0 s). `npm run bench:psi -- --sizes 6000,16000`.
 */
const INLINE_BELOW = 2 * CHUNK;

/**
 * How long a thread waits for the next run before it ends. Starting the two threads of a run
 * took 110-140 ms of CPU here (loading the module and libsodium), 6-9 % of a side's work for
 * 1e5 ids when each of its two or three runs started its own.
 */
const IDLE_MS = 1000;

/** Points checked per slice on the calling thread (about 3 ms each), the event loop served between slices. */
const CHECK_SLICE = 65536;

export type PsiTask =
  | { op: 'hash'; ids: string[] | PackedIds }
  | { op: 'blind'; points: Uint8Array; key: Uint8Array; check: boolean }
  | { op: 'check'; points: Uint8Array }
  | { op: 'digest'; ids: string[] | PackedIds; key: Uint8Array };

export function runPsiTask(task: PsiTask): Uint8Array {
  switch (task.op) {
    case 'hash':
      return hashToPoints(task.ids);
    case 'blind':
      if (task.check) checkPoints(task.points);
      return blindPoints(task.points, task.key);
    case 'check':
      checkPoints(task.points);
      return new Uint8Array(0);
    case 'digest':
      return digestIds(task.ids, task.key);
  }
}

/** Ids from..to-1, as a copy a worker thread can be sent. */
function idSlice(ids: readonly string[] | PackedIds, from: number, to: number): string[] | PackedIds {
  return Array.isArray(ids) ? ids.slice(from, to) : sliceIds(ids as PackedIds, from, to);
}

/** Called as chunks finish: items done of the total. */
export type PsiProgress = (done: number, total: number) => void;

export interface PsiTeamOptions {
  /** Worker threads (default: every core). */
  threads?: number;
  /** Sets up to this many items run on the calling thread (default: INLINE_BELOW). */
  inlineBelow?: number;
  /**
   * Called on the calling thread after each chunk's result is in place. A party collects its
   * young generation there: each chunk leaves its copy and its result (128 KiB each), and the
   * calling thread allocates little else meanwhile, so they piled up for 40 MB while a million
   * label points were blinded (docs/scaling.md).
   */
  afterChunk?: () => void;
}

export class PsiTeam {
  private readonly threads: number;
  private readonly inlineBelow: number;
  private readonly afterChunk: (() => void) | undefined;
  /**
   * The end of the last run asked for: runs go one after the other. One run's threads take
   * every core, so two side by side (a party's own ids and the label ids, a coordinator's
   * answers from several parties) are no faster, and each thread costs its memory.
   */
  private last: Promise<void> = Promise.resolve();
  /** Threads left by the last run, unref'd (they keep no process alive), and the timer that ends them. */
  private readonly idle: Worker[] = [];
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(opts: PsiTeamOptions = {}) {
    this.threads = Math.max(1, opts.threads ?? availableParallelism());
    this.inlineBelow = opts.inlineBelow ?? INLINE_BELOW;
    this.afterChunk = opts.afterChunk;
  }

  /** H(id) for every id, in order. */
  hash(ids: readonly string[] | PackedIds, progress?: PsiProgress): Promise<Uint8Array> {
    return this.run(ids.length, (a, b) => ({ op: 'hash', ids: idSlice(ids, a, b) }), progress);
  }

  /** A PSI cache's keyed digest of every id (psi-cache.ts digestIds), in order. */
  digest(ids: readonly string[] | PackedIds, key: Uint8Array, progress?: PsiProgress): Promise<Uint8Array> {
    return this.run(ids.length, (a, b) => ({ op: 'digest', ids: idSlice(ids, a, b), key }), progress, PSI_DIGEST_BYTES);
  }

  /**
   * Every point checked (if `check`: it came from a peer) and blinded with `key`, in order;
   * `inPlace`: written over `points` (no second array of their size), which must then not be
   * read meanwhile.
   */
  blind(points: Uint8Array, key: Uint8Array, check: boolean, progress?: PsiProgress, inPlace = false): Promise<Uint8Array> {
    return this.run(points.length / POINT_BYTES, (a, b) => ({ op: 'blind', points: points.slice(a * POINT_BYTES, b * POINT_BYTES), key, check }), progress, POINT_BYTES, inPlace ? points : undefined);
  }

  /**
   * Throws (rejects with) a PointError for the first invalid point. On the calling thread, so
   * not queued behind the team's runs (a coordinator checks one party's answer while the
   * threads blind another's points).
   */
  async check(points: Uint8Array, progress?: PsiProgress): Promise<void> {
    const n = points.length / POINT_BYTES;
    if (!Number.isInteger(n)) return checkPoints(points);
    for (let from = 0; from < n; from += CHECK_SLICE) {
      const to = Math.min(n, from + CHECK_SLICE);
      try {
        checkPoints(points.subarray(from * POINT_BYTES, to * POINT_BYTES));
      } catch (err) {
        throw err instanceof PointError ? new PointError(from + err.index, err.reason) : err;
      }
      progress?.(to, n);
      if (to < n) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private takeThread(): Worker {
    const w = this.idle.pop();
    if (w) {
      w.removeAllListeners('error').removeAllListeners('exit').ref();
      return w;
    }
    return new Worker(new URL('./psi-thread.js', import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_MB } });
  }

  private parkThread(w: Worker): void {
    w.unref();
    // A parked thread that fails or ends is dropped, never handed a chunk it would not answer.
    const drop = () => {
      const i = this.idle.indexOf(w);
      if (i >= 0) this.idle.splice(i, 1);
    };
    w.once('error', drop).once('exit', drop);
    this.idle.push(w);
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      for (const t of this.idle.splice(0)) void t.terminate();
    }, IDLE_MS).unref();
  }

  /**
   * Runs the chunks of n items, after the runs asked for before, and concatenates their results
   * (`width` bytes per item) into `out` (a new array by default). Each chunk's input is a copy,
   * so `out` may be the input itself.
   */
  private run(n: number, chunk: (from: number, to: number) => PsiTask, progress: PsiProgress | undefined, width = POINT_BYTES, out?: Uint8Array): Promise<Uint8Array> {
    const result = this.last.then(() => this.runNow(n, chunk, progress, width, out ?? new Uint8Array(n * width)));
    // Settled with nothing: a promise settled with the result would hold its array (32 MB for
    // a million points) until the next run.
    this.last = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  private async runNow(n: number, chunk: (from: number, to: number) => PsiTask, progress: PsiProgress | undefined, width: number, out: Uint8Array): Promise<Uint8Array> {
    if (n <= this.inlineBelow) {
      try {
        out.set(runPsiTask(chunk(0, n)));
      } finally {
        progress?.(n, n);
      }
      return out;
    }
    let next = 0;
    let done = 0;
    let failed: Error | undefined;
    const worker = async () => {
      const w = this.takeThread();
      // A thread that answered (a result, a bad point, an exception it caught) can run again; one that failed cannot.
      let healthy = true;
      try {
        while (next < n && !failed) {
          const from = next;
          const to = Math.min(n, from + CHUNK);
          next = to;
          const task = chunk(from, to);
          const answer = await new Promise<{ out?: Uint8Array; point?: { index: number; reason: string }; failure?: string }>((resolve, reject) => {
            w.once('message', resolve);
            w.once('error', (err) => {
              healthy = false;
              reject(err);
            });
            w.postMessage(task);
          }).finally(() => w.removeAllListeners('message').removeAllListeners('error'));
          if (answer.point) throw new PointError(from + answer.point.index, answer.point.reason);
          if (answer.failure !== undefined) throw new Error(answer.failure);
          out.set(answer.out!, from * width);
          this.afterChunk?.();
          done += to - from;
          progress?.(done, n);
        }
      } catch (err) {
        failed ??= err as Error;
      } finally {
        if (healthy) this.parkThread(w);
        else await w.terminate();
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.threads, Math.ceil(n / CHUNK)) }, worker));
    if (failed) throw failed;
    return out;
  }
}
