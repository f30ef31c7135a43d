/**
 * The registry of the job's parties: one PartyConnection per configured id, in job order.
 * It admits hellos (first join or rejoin, via auth.ts), runs the joining handshake (the
 * private set intersection: psi, ids) and the rejoin handshake (psi, ids, setup, ready,
 * resume, then whatever the party had not answered),
 * keeps the rejoin timers and the heartbeat, decides what a lost connection means in the
 * current phase, and sends one message to every party.
 */
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { type PsiProgress, PeerError } from '@admm-share/core';
import {
  type CoordinatorMessage,
  type Hello,
  type Ids,
  type Resume,
  type SampleSet,
  type Setup,
  type ValidationContext,
  CloseCodes,
  PROTOCOL_VERSION,
  POINT_BYTES,
  ProtocolError,
  encode,
  psiInParts,
} from '@admm-share/protocol';
import { type AuthPolicy, admitHello } from './auth.js';
import { AlignmentError, rowsFor } from '../alignment/alignment.js';
import type { LabelPsi, PartyIndex } from '../alignment/psi.js';
import type { CoordinatorPsiCaches } from '../alignment/psi-caches.js';
import type { Traffic } from '../bytes.js';
import { type ConnectionDeps, type PartyMessageType, type Reply, PartyConnection, encodeShared } from './party-connection.js';

/**
 * What a lost connection means: before every party has joined (the intersection), the party
 * may join again (its ids are intersected anew); from the set-up on, it may rejoin or the job fails.
 */
export type LossPolicy = 'may-join-again' | 'may-rejoin' | 'fatal';

/** How a rejoining party is brought back: its rows, the job's setup, and where to resume. */
export interface RejoinSource {
  /** The job's samples: rows of the label files (test: empty when the job does not evaluate). */
  labelRows: { train: Uint32Array; test: Uint32Array };
  /** The party's set the test rows are matched in: its test file's, or (held out) its training file's. */
  testFrom: SampleSet;
  setup(party: string, rows: { train: Uint32Array; test: Uint32Array }): Setup;
  /** What brings the party back to where the job is (undefined: nothing, its outstanding request does). */
  resume(party: PartyConnection): Resume | undefined;
}

export interface PartiesOptions {
  ids: readonly string[];
  policy: AuthPolicy;
  /** The coordinator's half of the private set intersection (a party's test ids are aligned when it has test labels). */
  psi: LabelPsi;
  /** Progress of the intersection with one party, for a terminal. */
  progress(party: string, set: SampleSet): PsiProgress;
  rejoinTimeoutMs: number;
  roundTimeoutMs: number;
  heartbeatMs: number;
  log: Logger;
  traffic: Traffic;
  /** The job cannot go on. */
  onFailure(err: Error): void;
  /** --psi-cache: the coordinator's caches of the intersection, one per party. */
  psiCaches?: CoordinatorPsiCaches;
  /** Online scoring: a party's ids, as H(id)^(ab) -> position, once intersected on its current connection (the PSI caches' tables then stay in memory for the lookups). */
  onIndex?(p: PartyConnection, index: PartyIndex): void;
  /** Each answered request (the job's monitor). */
  onReply?: ConnectionDeps['onReply'];
}

/** One party's intersection with the labels, per set: label row -> position in the party's list, or -1. */
export type Matched = Partial<Record<SampleSet, Int32Array>>;

export class Parties {
  readonly list: PartyConnection[];
  /** Set by the phase machine as the job moves on. */
  lossPolicy: LossPolicy = 'may-join-again';
  /** After `finish`: a close with code `done` is the party's answer, not a loss. */
  private finishing = false;
  /** Set once the job exists; until then a rejoin is refused. */
  rejoinSource: RejoinSource | undefined;
  /** Each party's intersection from its first join, per set: label row -> position in the party's list (cleared once aligned). */
  private readonly matched = new Map<string, Matched>();
  private readonly rejoinTimers = new Map<string, NodeJS.Timeout>();
  private readonly heartbeat: NodeJS.Timeout;
  private joinWaiter: (() => void) | undefined;
  private rejoinWaiter: (() => void) | undefined;
  private closeWaiter: (() => void) | undefined;

  constructor(private readonly opts: PartiesOptions) {
    const deps = {
      log: opts.log,
      traffic: opts.traffic,
      roundTimeoutMs: opts.roundTimeoutMs,
      onFailure: (err: Error) => opts.onFailure(err),
      onClose: (p: PartyConnection, code: number, reason: string) => this.lost(p, code, reason),
      onReply: opts.onReply,
    };
    this.list = opts.ids.map((id, m) => new PartyConnection(id, m, deps));
    this.heartbeat = setInterval(() => {
      for (const p of this.list) p.heartbeat(opts.heartbeatMs);
    }, opts.heartbeatMs);
    this.heartbeat.unref();
  }

  byId(id: string): PartyConnection | undefined {
    return this.list.find((p) => p.id === id);
  }

  /** Parties whose PSI cache has points to write (saveCaches). */
  private readonly cacheToSave = new Set<string>();

  /** The PSI caches' writes under way (saveCaches). */
  private cacheWrites: Promise<unknown>[] = [];

  /**
   * Writes the PSI caches used since the last time, in the background, and frees their tables
   * unless online scoring looks ids up in them. A job waits for the writes before it ends
   * (cachesWritten).
   */
  private saveCaches(): void {
    for (const party of this.cacheToSave) {
      const written = this.opts.psi.saveCache(party, !this.opts.onIndex);
      written.catch((err: unknown) => this.opts.log.error({ party, err: (err as Error).message }, 'psi cache: could not be written'));
      this.cacheWrites.push(written);
      if (this.opts.psi.cacheFull(party)) this.opts.log.warn({ party }, 'psi cache: full, the new points are not kept (--psi-rotate starts a new cache)');
    }
    this.cacheToSave.clear();
  }

  /** Resolves once the PSI caches written so far are on disk; rejects if one could not be written. */
  async cachesWritten(): Promise<void> {
    await Promise.all(this.cacheWrites);
  }

  /** A hello passed admission: authenticate it and start the party's handshake (or throw). */
  onHello(ws: WebSocket, hello: Hello, nonce: Uint8Array, log: Logger): void {
    const p = this.byId(hello.partyId);
    const status = p?.status === 'connected' || p?.status === 'closed' ? 'connected' : (p?.status ?? 'absent');
    const kind = admitHello(hello, nonce, this.opts.policy, {
      status,
      features: p?.features ?? 0,
      joinOpen: this.lossPolicy === 'may-join-again',
    });
    if (!p) throw new ProtocolError('unknownParty', `'${hello.partyId}' is not a party of this job`);
    if (kind === 'rejoin' && !this.rejoinSource) throw new ProtocolError('unexpected', 'the job cannot take a rejoining party now');
    clearTimeout(this.rejoinTimers.get(p.id));
    p.features = hello.features;
    p.noise = hello.noise;
    p.fileRows = { train: hello.trainRows, test: hello.testRows };
    // Both sides keep caches: the one the party named, or a new one (a party that named none keeps none).
    const caches = this.opts.psiCaches;
    this.opts.psi.useCache(p.id, caches && hello.psiCache !== undefined ? caches.forParty(p.id, hello.psiCache) : undefined);
    p.attach(ws);
    p.send({ type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: this.opts.policy.jobId });
    if (kind === 'join') {
      log.info({ party: p.id, features: hello.features, rows: hello.trainRows, testRows: hello.testRows, ...(hello.model ? { modelJob: hello.model.jobId, modelDigest: hello.model.digest } : {}) }, 'party joined');
      this.intersect(p, (m) => {
        this.matched.set(p.id, m);
        if (this.list.every((q) => this.matched.has(q.id))) this.joinWaiter?.();
      });
    } else {
      p.rejoins++;
      log.info({ party: p.id }, 'party rejoining');
      this.intersect(p, (m) => this.realign(p, m));
    }
  }

  /** Resolves when every party has joined and its ids are intersected with the labels; returns them in job order. */
  async allJoined(): Promise<Matched[]> {
    if (!this.list.every((q) => this.matched.has(q.id))) await new Promise<void>((resolve) => (this.joinWaiter = resolve));
    const matched = this.list.map((p) => this.matched.get(p.id)!);
    this.matched.clear();
    return matched;
  }

  /** A resumed coordinator: every party is away until it rejoins (within the rejoin window). */
  awaitRejoins(windowMs: number): Promise<void> {
    for (const p of this.list) {
      p.status = 'away';
      this.startRejoinTimer(p, windowMs, `party ${p.id} did not rejoin the resumed job within ${windowMs} ms`);
    }
    return new Promise((resolve) => (this.rejoinWaiter = resolve));
  }

  /** The same request to every party, encoded once; replies in job order. */
  requestAll<T extends PartyMessageType>(msg: CoordinatorMessage, types: readonly T[], ctx: (p: PartyConnection) => ValidationContext, shareInto?: (m: number) => Float64Array): Promise<Reply<T>>[] {
    const out = encodeShared(msg);
    return this.list.map((p, m) => p.request(out, types, ctx(p), shareInto && (() => shareInto(m))));
  }

  /** Party m (in job order) is sent msgFor(m), encoded into its connection's reusable buffer (encodeForSend); replies in job order. */
  requestEach<T extends PartyMessageType>(msgFor: (m: number) => CoordinatorMessage, types: readonly T[], ctx: (p: PartyConnection) => ValidationContext, shareInto?: (m: number) => Float64Array): Promise<Reply<T>>[] {
    return this.list.map((p, m) => p.request(p.encodeForSend(msgFor(m)), types, ctx(p), shareInto && (() => shareInto(m))));
  }

  /** The job's last message; resolves when every party has closed after it (or after `graceMs` for connected ones). */
  async finish(msg: CoordinatorMessage, graceMs: number): Promise<void> {
    const bytes = encode(msg);
    this.finishing = true;
    for (const p of this.list) p.sendFinal(bytes);
    const allClosed = () => this.list.every((p) => p.status === 'closed');
    if (allClosed()) return;
    await new Promise<void>((resolve) => {
      this.closeWaiter = resolve;
      // A party that stays connected is closed for it after the grace period; one that is
      // away still has its rejoin window to come back and take its `done`.
      const timer = setTimeout(() => {
        for (const p of this.list) if (p.status === 'connected') p.close('done', 'closed by the coordinator');
      }, graceMs);
      timer.unref();
    });
  }

  abort(err: Error): void {
    this.stop();
    for (const p of this.list) p.abort(err, err.message);
  }

  /** The coordinator is going away but the job can be resumed: parties keep trying to rejoin. */
  goingAway(reason: string, err: Error): void {
    this.stop();
    for (const p of this.list) {
      p.close('goingAway', reason);
      p.abort(err, reason);
    }
  }

  /** A prediction job is over: every party is closed with 'done' (which is then not a loss). */
  closeAll(detail: string): void {
    this.finishing = true;
    for (const p of this.list) p.close('done', detail);
  }

  stop(): void {
    clearInterval(this.heartbeat);
    for (const t of this.rejoinTimers.values()) clearTimeout(t);
  }

  /**
   * The private set intersection with one party: the label points of the training set (and
   * of the test set, when both sides have one) go out, and each `ids` answer is matched off
   * the main thread. `done` gets the result if the party is still on this connection.
   */
  private intersect(p: PartyConnection, done: (m: Matched) => void): void {
    const { psi, policy } = this.opts;
    const sets: SampleSet[] = psi.counts.test > 0 && p.fileRows.test > 0 ? ['train', 'test'] : ['train'];
    const generation = p.generation;
    const current = () => p.generation === generation && p.connected;
    const matched: Matched = {};
    // Read when an answer comes: a set's count is in place before its psi is sent.
    const labelIds = { train: 0, test: 0 };
    const work = async () => {
      for (const set of sets) {
        const { points, cache } = await psi.psi(p.id, set);
        labelIds[set] = points.length / POINT_BYTES;
        if (current()) p.sendEach(psiInParts(policy.jobId, set, points, cache));
      }
    };
    const received = new Set<SampleSet>();
    const next = () =>
      p.expect(['ids'], { jobId: policy.jobId, declaredRows: p.fileRows, labelIds }, (msg) => {
        if (!sets.includes(msg.set)) throw new ProtocolError('unexpected', `${msg.set} ids, but no ${msg.set} set was asked for`);
        if (received.has(msg.set)) throw new ProtocolError('unexpected', `${msg.set} ids sent twice`);
        received.add(msg.set);
        if (received.size < sets.length) next();
        this.match(p, msg, ({ positions, index }) => {
          if (current()) this.opts.onIndex?.(p, index);
          matched[msg.set] = positions;
          if (!sets.every((s) => matched[s])) return;
          if (current()) done(matched);
          // Written once every party is aligned (each party's in turn would hold up the others').
          this.cacheToSave.add(p.id);
          if (this.lossPolicy !== 'may-join-again' || this.list.every((q) => this.matched.has(q.id))) this.saveCaches();
        });
      });
    next();
    work().catch((err: unknown) => this.opts.onFailure(err as Error));
  }

  /** Match one answer off the main thread; a fault of the party closes its connection and fails the job. */
  private match(p: PartyConnection, msg: Ids, deliver: (m: { positions: Int32Array; index: PartyIndex }) => void): void {
    const generation = p.generation;
    this.opts.psi
      .match(p.id, msg, this.opts.progress(p.id, msg.set))
      .then((m) => {
        if (p.generation === generation) deliver(m);
      })
      .catch((err: unknown) => {
        if (p.generation !== generation) return;
        if (err instanceof ProtocolError || err instanceof AlignmentError) {
          p.close(err instanceof ProtocolError ? err.kind : 'alignment', err.message);
          this.opts.onFailure(new PeerError(`party ${p.id}: ${err.message}`));
        } else this.opts.onFailure(err as Error);
      });
  }

  /**
   * A rejoining party's intersection: its rows are aligned anew against the job's samples
   * (its file may have been reordered, not changed: every sample of the job must be there),
   * it gets the job's setup, and after its ready the round to resume from, then what it has
   * not answered.
   */
  private realign(p: PartyConnection, matched: Matched): void {
    const source = this.rejoinSource!;
    const rows = (set: SampleSet, from: SampleSet = set): Uint32Array => {
      const kept = source.labelRows[set];
      const positions = matched[from];
      if (kept.length === 0) return new Uint32Array(0);
      if (!positions) throw new ProtocolError('alignment', `party ${p.id} rejoined without its ${from} set`);
      try {
        return rowsFor(p.id, from, kept, positions);
      } catch (err) {
        if (err instanceof AlignmentError) throw new ProtocolError('alignment', err.message);
        throw err;
      }
    };
    const aligned = { train: rows('train'), test: rows('test', source.testFrom) };
    p.expect(['ready'], { jobId: this.opts.policy.jobId }, (ready) => {
      p.privacy = ready.privacy;
      // During the set-up this ready answers the set-up request itself (its rows are the ones just aligned).
      if (!p.answerPending(ready)) {
        const resume = source.resume(p);
        if (resume) p.send(resume);
        p.resendOutstanding();
      }
      this.opts.log.info({ party: p.id }, 'party rejoined');
      if (this.list.every((q) => q.status === 'connected' && q.privacy !== undefined)) {
        const w = this.rejoinWaiter;
        this.rejoinWaiter = undefined;
        w?.();
      }
    });
    p.send(source.setup(p.id, aligned));
  }

  private lost(p: PartyConnection, code: number, reason: string): void {
    const why = `party ${p.id} disconnected (code ${code}${reason ? `: ${reason}` : ''})`;
    const log = this.opts.log;
    if (this.finishing && code === CloseCodes.done.code) {
      p.status = 'closed';
      log.debug({ party: p.id, code }, 'party closed');
      if (this.list.every((q) => q.status === 'closed')) this.closeWaiter?.();
      return;
    }
    switch (this.lossPolicy) {
      case 'may-join-again':
        // Before every party has joined (or while scoring) a party may leave and join again:
        // a connection lost during the intersection, a party restarted after fixing its data,
        // a scoring party that did not answer a request in time (4016, which the party retries).
        if (code === CloseCodes.timeout.code) log.warn({ party: p.id, code, reason }, 'party timed out (no answer in time); it may join again');
        else log.warn({ party: p.id, code, reason }, 'party disconnected; it may join again');
        p.status = 'absent';
        this.matched.delete(p.id);
        // Online scoring: a request waiting for this party fails now rather than at its deadline.
        p.failPending(new PeerError(why));
        return;
      case 'may-rejoin':
        if (this.opts.rejoinTimeoutMs > 0) {
          // A lost connection during ADMM training: the party may reconnect (or be restarted)
          // and resume; the job waits for it up to --rejoin-timeout.
          p.status = 'away';
          p.privacy = undefined;
          log.warn({ party: p.id, code, rejoinTimeoutMs: this.opts.rejoinTimeoutMs }, 'party disconnected; waiting for it to rejoin');
          this.startRejoinTimer(p, this.opts.rejoinTimeoutMs, `${why}, and did not rejoin within ${this.opts.rejoinTimeoutMs} ms`);
          return;
        }
        this.opts.onFailure(new PeerError(why));
        return;
      case 'fatal':
        this.opts.onFailure(new PeerError(why));
        return;
    }
  }

  private startRejoinTimer(p: PartyConnection, ms: number, why: string): void {
    clearTimeout(this.rejoinTimers.get(p.id));
    this.rejoinTimers.set(
      p.id,
      setTimeout(() => this.opts.onFailure(new PeerError(why)), ms),
    );
  }
}
