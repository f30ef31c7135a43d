/**
 * The PSI group operations over all cores: a set is cut into chunks, each worker thread
 * takes the next chunk, and progress is reported as chunks finish. A small set is done on
 * the calling thread (starting threads would cost more than it saves). The team's threads
 * end when the work does, so a team holds nothing between calls.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { type PackedIds, sliceIds } from '../io/packed-ids.js';
import { POINT_BYTES, PointError, blindPoints, checkPoints, hashToPoints } from './psi.js';

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

export type PsiTask =
  | { op: 'hash'; ids: string[] | PackedIds }
  | { op: 'blind'; points: Uint8Array; key: Uint8Array; check: boolean }
  | { op: 'check'; points: Uint8Array };

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
  }
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

  constructor(opts: PsiTeamOptions = {}) {
    this.threads = Math.max(1, opts.threads ?? availableParallelism());
    this.inlineBelow = opts.inlineBelow ?? INLINE_BELOW;
    this.afterChunk = opts.afterChunk;
  }

  /** H(id) for every id, in order. */
  hash(ids: readonly string[] | PackedIds, progress?: PsiProgress): Promise<Uint8Array> {
    const chunk = Array.isArray(ids) ? (a: number, b: number) => ids.slice(a, b) : (a: number, b: number) => sliceIds(ids as PackedIds, a, b);
    return this.run(ids.length, (a, b) => ({ op: 'hash', ids: chunk(a, b) }), progress);
  }

  /**
   * Every point checked (if `check`: it came from a peer) and blinded with `key`, in order;
   * `inPlace`: written over `points` (no second array of their size), which must then not be
   * read meanwhile.
   */
  blind(points: Uint8Array, key: Uint8Array, check: boolean, progress?: PsiProgress, inPlace = false): Promise<Uint8Array> {
    return this.run(points.length / POINT_BYTES, (a, b) => ({ op: 'blind', points: points.slice(a * POINT_BYTES, b * POINT_BYTES), key, check }), progress, POINT_BYTES, inPlace ? points : undefined);
  }

  /** Throws (rejects with) a PointError for the first invalid point. */
  async check(points: Uint8Array, progress?: PsiProgress): Promise<void> {
    await this.run(points.length / POINT_BYTES, (a, b) => ({ op: 'check', points: points.slice(a * POINT_BYTES, b * POINT_BYTES) }), progress, 0);
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
      const w = new Worker(new URL('./psi-thread.js', import.meta.url), { resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_MB } });
      try {
        while (next < n && !failed) {
          const from = next;
          const to = Math.min(n, from + CHUNK);
          next = to;
          const task = chunk(from, to);
          const answer = await new Promise<{ out?: Uint8Array; point?: { index: number; reason: string }; failure?: string }>((resolve, reject) => {
            w.once('message', resolve);
            w.once('error', reject);
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
        await w.terminate();
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.threads, Math.ceil(n / CHUNK)) }, worker));
    if (failed) throw failed;
    return out;
  }
}
