/**
 * The registry of the job's parties: one PartyConnection per configured id, in job order.
 * It admits hellos (first join or rejoin, via auth.ts), runs the joining handshake (ids) and
 * the rejoin handshake (ids, setup, ready, resume, then whatever the party had not answered),
 * keeps the rejoin timers and the heartbeat, decides what a lost connection means in the
 * current phase, and sends one message to every party.
 */
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { PeerError } from '@admm-share/core';
import {
  type CoordinatorMessage,
  type Hello,
  type Resume,
  type SampleSet,
  type Setup,
  CloseCodes,
  PROTOCOL_VERSION,
  ProtocolError,
  encode,
} from '@admm-share/protocol';
import { type AuthPolicy, admitHello } from './auth.js';
import { AlignmentError, indexIds, rowsFor } from './alignment.js';
import { type PartyMessageType, type Reply, type Traffic, PartyConnection } from './party-connection.js';

/** What a lost connection means: before the job, the party may join again; during it, it may rejoin or the job fails. */
export type LossPolicy = 'may-join-again' | 'may-rejoin' | 'fatal';

/** How a rejoining party is brought back: its rows, the job's setup, and where to resume. */
export interface RejoinSource {
  keptKeys: { train: readonly string[]; test: readonly string[] | null };
  setup(party: string, rows: { train: Uint32Array; test: Uint32Array }): Setup;
  /** What brings the party back to where the job is (undefined: nothing, its outstanding request does). */
  resume(party: PartyConnection): Resume | undefined;
}

export interface PartiesOptions {
  ids: readonly string[];
  policy: AuthPolicy;
  hashKey: Uint8Array;
  /** Whether the coordinator has test labels (a party's test ids are aligned then). */
  hasTestLabels: boolean;
  rejoinTimeoutMs: number;
  roundTimeoutMs: number;
  heartbeatMs: number;
  log: Logger;
  traffic: Traffic;
  /** The job cannot go on. */
  onFailure(err: Error): void;
}

export class Parties {
  readonly list: PartyConnection[];
  /** Set by the phase machine as the job moves on. */
  lossPolicy: LossPolicy = 'may-join-again';
  /** After `finish`: a close with code `done` is the party's answer, not a loss. */
  private finishing = false;
  /** Set once the job exists; until then a rejoin is refused. */
  rejoinSource: RejoinSource | undefined;
  /** Each party's id hashes from its first join (cleared once aligned). */
  private readonly hashes = new Map<string, { train?: Uint8Array; test?: Uint8Array }>();
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
    p.attach(ws);
    p.send({ type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: this.opts.policy.jobId, hashKey: this.opts.hashKey });
    if (kind === 'join') {
      log.info({ party: p.id, features: hello.features, rows: hello.trainRows, testRows: hello.testRows }, 'party joined');
      this.receiveIds(p, (ids) => {
        this.hashes.set(p.id, ids);
        if (this.list.every((q) => this.hashes.has(q.id))) this.joinWaiter?.();
      });
    } else {
      log.info({ party: p.id }, 'party rejoining');
      this.receiveIds(p, (ids) => this.realign(p, ids));
    }
  }

  /** Resolves when every party has joined and sent its ids; returns them in job order. */
  async allJoined(): Promise<{ train: Uint8Array; test: Uint8Array | undefined }[]> {
    if (!this.list.every((q) => this.hashes.has(q.id))) await new Promise<void>((resolve) => (this.joinWaiter = resolve));
    const ids = this.list.map((p) => {
      const h = this.hashes.get(p.id)!;
      return { train: h.train!, test: h.test };
    });
    this.hashes.clear();
    return ids;
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
  requestAll<T extends PartyMessageType>(msg: CoordinatorMessage, types: readonly T[], ctx: (p: PartyConnection) => Parameters<PartyConnection['request']>[2]): Promise<Reply<T>>[] {
    const bytes = encode(msg);
    return this.list.map((p) => p.request(bytes, types, ctx(p)));
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

  stop(): void {
    clearInterval(this.heartbeat);
    for (const t of this.rejoinTimers.values()) clearTimeout(t);
  }

  /** The train ids, then the test ids if the party has a test set. */
  private receiveIds(p: PartyConnection, done: (ids: { train: Uint8Array; test?: Uint8Array }) => void): void {
    const ctx = { jobId: this.opts.policy.jobId, declaredRows: p.fileRows };
    const ids: { train?: Uint8Array; test?: Uint8Array } = {};
    const next = () =>
      p.expect(['ids'], ctx, (msg) => {
        if (ids[msg.set]) throw new ProtocolError('unexpected', `${msg.set} ids sent twice`);
        // Without test labels the coordinator aligns no test set.
        ids[msg.set] = msg.set === 'test' && !this.opts.hasTestLabels ? new Uint8Array(0) : msg.hashes;
        if (ids.train && (p.fileRows.test === 0 || ids.test)) done({ train: ids.train, ...(ids.test ? { test: ids.test } : {}) });
        else next();
      });
    next();
  }

  /**
   * A rejoining party's ids: its rows are aligned anew against the job's samples (its file
   * may have been reordered, not changed: every sample of the job must be there), it gets
   * the job's setup, and after its ready the round to resume from, then what it has not answered.
   */
  private realign(p: PartyConnection, ids: { train: Uint8Array; test?: Uint8Array }): void {
    const source = this.rejoinSource!;
    const rows = (set: SampleSet): Uint32Array => {
      const kept = source.keptKeys[set];
      const hashes = ids[set];
      if (!kept || kept.length === 0) return new Uint32Array(0);
      if (!hashes) throw new ProtocolError('alignment', `party ${p.id} rejoined without its ${set} set`);
      try {
        return rowsFor(p.id, set, kept, indexIds(p.id, set, hashes));
      } catch (err) {
        if (err instanceof AlignmentError) throw new ProtocolError('alignment', err.message);
        throw err;
      }
    };
    const aligned = { train: rows('train'), test: rows('test') };
    p.expect(['ready'], { jobId: this.opts.policy.jobId }, (ready) => {
      p.privacy = ready.privacy;
      const resume = source.resume(p);
      if (resume) p.send(resume);
      p.resendOutstanding();
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
        // Before the job starts a party may leave and join again (after fixing its data, say).
        log.warn({ party: p.id, code, reason }, 'party left before the job started');
        p.status = 'absent';
        this.hashes.delete(p.id);
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
