// Worker threads that each take a part of a call while the calling thread does its own: they
// read and write shared memory and wait on an atomic call number between calls, so a call
// costs no message and the caller stays synchronous (it blocks for the milliseconds the others
// take) or awaits their part. Used by DenseTeam (a party's dense block) and by the
// coordinator's step (its passes over the samples and Anderson acceleration's).
import { MessageChannel, type MessagePort, Worker, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { InternalError } from '../errors.js';

/**
 * Slots of the control array: a call's number (the threads wait for it to change), its op,
 * threads still at it, a failure; then one a thread (ENTRY + t): the call's number while
 * thread t may still begin its part, STARTED once it has, SKIPPED once the caller has done
 * without it (waitOrSkip).
 */
const GEN = 0;
const OP = 1;
const PENDING = 2;
const FAILED = 3;
const ENTRY = 4;
const STARTED = -1;
const SKIPPED = -2;
/** The op that ends the threads. */
const EXIT = -1;
/** A call's number runs from 1 to this and starts again at 1 (an open ENTRY is never STARTED or SKIPPED). */
const LAST_GEN = 0x3fffffff;

/**
 * Longest wait for the threads' part of one call before they are taken for dead: a part takes
 * milliseconds, a block of a Cholesky factor tens of them. A thread that dies (out of memory)
 * cannot say so while the caller waits (its exit event needs the event loop), so this is how a
 * waiting caller learns of it; under the 30 s in which a coordinator would take a party for gone.
 */
const STALL_MS = 20_000;

/** What a team's thread gets besides its user's data: the control array, and a port for a call's message and a failure's. */
export interface TeamThreadData {
  ctrl: Int32Array;
  port: MessagePort;
  /** The thread's index in its team. */
  thread: number;
}

export interface TeamOptions {
  /** The thread's entry script, `<what>-thread.js` (it calls serveTeam). */
  script: URL;
  /** Thread t's data (shared memory is shared, not copied). */
  data: (t: number) => object;
  threads: number;
  /** What a thread is called when it exits: "<name> exited (code c)". */
  name: string;
  /** The error a failure's message makes, thrown by the call that meets it and every later one. */
  fail: (failure: string) => Error;
}

export class ThreadTeam {
  private readonly ctrl: Int32Array;
  private readonly workers: Worker[] = [];
  /** Whether the call under way posted messages (its threads cannot skip it: a message would be left for the next). */
  private posted = false;
  private readonly ports: MessagePort[] = [];
  private closed = false;
  /** Why a thread stopped, if one did. */
  private failure: string | undefined;

  constructor(private readonly opts: TeamOptions) {
    this.ctrl = new Int32Array(new SharedArrayBuffer((ENTRY + opts.threads) * Int32Array.BYTES_PER_ELEMENT));
    for (let t = 0; t < opts.threads; t++) {
      const { port1, port2 } = new MessageChannel();
      const data: TeamThreadData = { ...opts.data(t), ctrl: this.ctrl, port: port2, thread: t };
      const worker = new Worker(opts.script, { workerData: data, transferList: [port2] });
      // The threads never keep a process alive; close() ends them.
      worker.unref();
      // Either wakes a wait for the threads' part (waitAsync), which then reports it.
      worker.on('error', (e) => {
        this.failure ??= e.message;
        Atomics.notify(this.ctrl, PENDING);
      });
      worker.on('exit', (code) => {
        if (!this.closed) this.failure ??= `${opts.name} exited (code ${code})`;
        Atomics.notify(this.ctrl, PENDING);
      });
      this.workers.push(worker);
      this.ports.push(port1);
    }
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * Tell every thread to do `op` (an integer >= 0) on its part, once they are done with a call
   * left unfinished; `part(t)` is thread t's message for the call (its `message()`), posted
   * only then, so that a call that never began leaves none behind.
   */
  begin(op: number, part?: (t: number) => unknown): void {
    if (this.closed) throw this.opts.fail('closed');
    this.waitSync();
    if (part) for (let t = 0; t < this.opts.threads; t++) this.ports[t].postMessage(part(t));
    this.posted = part !== undefined;
    const last = Atomics.load(this.ctrl, GEN);
    const gen = last >= LAST_GEN ? 1 : last + 1;
    // A thread checks its ENTRY against the number it read, so one that read an earlier call's
    // op cannot begin this call with it: ENTRY, then the op, then the number.
    for (let t = 0; t < this.opts.threads; t++) Atomics.store(this.ctrl, ENTRY + t, gen);
    Atomics.store(this.ctrl, PENDING, this.opts.threads);
    Atomics.store(this.ctrl, OP, op);
    Atomics.store(this.ctrl, GEN, gen);
    Atomics.notify(this.ctrl, GEN);
  }

  /**
   * Block until every thread that has begun its part of the call is done; a thread that has not
   * begun it yet skips it. Only for calls whose work either side may do (chunks taken from a
   * shared counter until none is left, claimChunks): the caller has done what a late thread
   * would have. A thread whose core has been idle for a few milliseconds can take about a
   * millisecond to run again on a virtual machine; the caller need not wait for that.
   */
  waitOrSkip(): void {
    if (this.posted) throw new InternalError(`${this.opts.name}: a call with messages cannot be skipped`, 'waitOrSkip after begin(op, part)');
    const gen = Atomics.load(this.ctrl, GEN);
    for (let t = 0; t < this.opts.threads; t++) if (Atomics.compareExchange(this.ctrl, ENTRY + t, gen, SKIPPED) === gen) Atomics.sub(this.ctrl, PENDING, 1);
    this.waitSync();
  }

  /** Block until every thread has done its part (a thread that failed, died or stalled is an error from then on). */
  waitSync(): void {
    this.check();
    const t0 = performance.now();
    for (let p; (p = Atomics.load(this.ctrl, PENDING)) !== 0; ) {
      if (Atomics.wait(this.ctrl, PENDING, p, 1000) === 'timed-out' && performance.now() - t0 > STALL_MS) {
        this.failure ??= `the threads did not finish their part in ${STALL_MS / 1000} s (one died?)`;
        break;
      }
    }
    this.check();
  }

  /** Resolves when every thread has done its part, or the threads were closed (the event loop runs meanwhile). */
  async waitAsync(): Promise<void> {
    // A timer keeps the process alive while it waits (Atomics.waitAsync does not, nor does a thread that died).
    const alive = setInterval(() => {}, 1 << 30);
    try {
      // Closed meanwhile: the caller's work was abandoned (it sees so itself), nothing to wait for.
      for (let p; !this.closed && (p = Atomics.load(this.ctrl, PENDING)) !== 0; ) {
        const r = (Atomics as unknown as AtomicsWaitAsync).waitAsync(this.ctrl, PENDING, p, 1000);
        if (r.async) await r.value;
        this.check();
      }
    } finally {
      clearInterval(alive);
    }
    this.check();
  }

  /** Stop the threads (a call under way is not interrupted: call from the same thread as the calls). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    Atomics.store(this.ctrl, OP, EXIT);
    Atomics.add(this.ctrl, GEN, 1);
    Atomics.notify(this.ctrl, GEN);
    Atomics.notify(this.ctrl, PENDING); // a wait for the threads' part (waitAsync) ends now
    for (const p of this.ports) p.close();
    await Promise.all(this.workers.map((w) => w.terminate()));
  }

  private check(): void {
    if (Atomics.load(this.ctrl, FAILED) !== 0)
      for (const port of this.ports) {
        const m = receiveMessageOnPort(port)?.message as { failure?: string } | undefined;
        if (m?.failure !== undefined) this.failure ??= m.failure;
      }
    if (this.failure !== undefined) throw this.opts.fail(this.failure);
  }
}

/**
 * A team thread's loop (in its entry script, `<what>-thread.ts`): `start` makes the handler of the calls from the
 * thread's data; each call's op goes to it, with `message()` for the call's message. A handler
 * that throws, or a start that does, fails that call (and, for a start, every call) with its
 * message, which the caller throws.
 */
export function serveTeam<D extends TeamThreadData>(start: (data: D) => (op: number, message: () => unknown) => void): void {
  const data = workerData as D;
  const { ctrl, port } = data;
  let handle: ((op: number, message: () => unknown) => void) | undefined;
  let broken: unknown;
  try {
    handle = start(data);
  } catch (err) {
    broken = err;
  }
  // The call's message, posted before the call (a short wait in case it is not here yet).
  const message = (): unknown => {
    const nap = new Int32Array(new SharedArrayBuffer(4));
    for (let tries = 0; tries < 1000; tries++) {
      const m = receiveMessageOnPort(port);
      if (m) return m.message;
      Atomics.wait(nap, 0, 0, 1);
    }
    throw new Error(`a call (op ${Atomics.load(ctrl, OP)}) came without its message`);
  };
  // The call number starts at 0: a call begun before this thread got here is not missed.
  for (let gen = 0; ; ) {
    Atomics.wait(ctrl, GEN, gen);
    gen = Atomics.load(ctrl, GEN);
    const op = Atomics.load(ctrl, OP);
    if (op === EXIT) break;
    // The caller did without this thread (waitOrSkip), or a later call has begun: it counted
    // this thread out itself, or the thread takes the later call when it reads its number.
    if (Atomics.compareExchange(ctrl, ENTRY + data.thread, gen, STARTED) !== gen) continue;
    try {
      if (!handle) throw broken;
      handle(op, message);
    } catch (err) {
      port.postMessage({ failure: err instanceof Error ? err.message : String(err) });
      Atomics.store(ctrl, FAILED, 1);
    }
    if (Atomics.sub(ctrl, PENDING, 1) === 1) Atomics.notify(ctrl, PENDING);
  }
  port.close();
}

/** Atomics.waitAsync (Node 16 and later; not in the ES2022 library's types). */
interface AtomicsWaitAsync {
  waitAsync(a: Int32Array, index: number, value: number, timeout: number): { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
}
