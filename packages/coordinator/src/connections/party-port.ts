/**
 * The port a job's parties join on, set up the same way by the training coordinator and the
 * prediction coordinator: the credentials checked against the parties, the coordinator's half
 * of the private set intersection, the registry of parties, and listening with admission.
 */
import type { Logger } from 'pino';
import { ConfigError, PeerError, type PsiProgress, PsiTeam } from '@admm-share/core';
import type { SampleSet } from '@admm-share/protocol';
import { type PsiCacheFlags, Progress } from '@admm-share/runtime';
import { LabelPsi } from '../alignment/psi.js';
import { CoordinatorPsiCaches } from '../alignment/psi-caches.js';
import { listenForParties } from './admission.js';
import type { AuthPolicy } from './auth.js';
import { Parties, type PartiesOptions } from './parties.js';
import type { Server, ServerTls } from './server.js';

/** Rows a party may declare beyond --max-rows-factor x the label (or id) rows, so that tiny files do not refuse real parties. */
export const SLACK_ROWS = 1024;

/** The most rows a party may declare when the coordinator holds `rows` ids: bounds its memory and the frames. */
export function maxRowsFor(factor: number, rows: number): number {
  return Math.ceil(factor * rows) + SLACK_ROWS;
}

/** Every party has a credential, or (none configured) the warning that anyone may join as one. */
export function checkCredentials(parties: readonly string[], credentials: Readonly<Record<string, string>> | undefined, log: Logger): void {
  if (credentials) {
    const missing = parties.filter((p) => !credentials[p]);
    if (missing.length) throw new ConfigError(`no credential for ${missing.join(', ')} in the credentials file`);
  } else log.warn('no credentials configured: anyone who can reach this port can join as a listed party (pass --credentials)');
}

export interface PartyPortOptions extends Omit<PartiesOptions, 'policy' | 'psi' | 'progress' | 'psiCaches'> {
  policy: Omit<AuthPolicy, 'parties'>;
  /** The ids the coordinator puts into the intersection, per set. */
  psiIds: { train: readonly string[]; test: readonly string[] | undefined };
  /** The job's secret the intersection's key and orders are derived from (alignment/psi.ts); none: fresh ones. */
  psiSecret?: () => Uint8Array;
  /** --psi-cache: keep the intersection's keys and points per party (alignment/psi-caches.ts). */
  psiCache?: PsiCacheFlags;
  /** How the progress lines name the hashing of a set of the coordinator's ids, and one party's intersection. */
  progressNames: { psi(set: SampleSet, what: string): string; party(party: string, set: SampleSet): string };
  /** Where else each step's progress goes, beside the terminal's bar (the job's monitor: monitoring/alignment.ts). */
  watch?(step: PsiStep): PsiProgress | undefined;
}

/** A step of the intersection: the coordinator's label ids (`party` null) or one party's ids, of one set. */
export interface PsiStep {
  set: SampleSet;
  what: string;
  party: string | null;
}

export interface ListenOptions {
  host: string;
  port: number;
  tls?: ServerTls;
  helloTimeoutMs: number;
  /** The largest frame any peer may send. */
  maxPayload: number;
  /** A connection refused before or at its hello (the job's monitor). */
  onRefused?: Parameters<typeof listenForParties>[0]['onRefused'];
}

export class PartyPort {
  readonly psi: LabelPsi;
  private readonly psiCaches: CoordinatorPsiCaches | undefined;
  readonly parties: Parties;
  private server: Server | undefined;

  constructor(private readonly opts: PartyPortOptions) {
    const progress = new Progress();
    const counter = (label: string, step: PsiStep): PsiProgress => {
      const bar = progress.counter(label);
      const watched = opts.watch?.(step);
      if (!watched) return bar;
      return (done, total) => {
        bar(done, total);
        watched(done, total);
      };
    };
    this.psi = new LabelPsi(new PsiTeam(), opts.psiIds, (set, what) => counter(opts.progressNames.psi(set, what), { set, what, party: null }), { jobSecret: opts.psiSecret });
    this.psiCaches = opts.psiCache ? new CoordinatorPsiCaches(opts.psiCache, opts.log) : undefined;
    this.parties = new Parties({
      ...opts,
      policy: { parties: opts.ids, ...opts.policy },
      psi: this.psi,
      psiCaches: this.psiCaches,
      progress: (party, set) => counter(opts.progressNames.party(party, set), { set, what: 'intersecting ids', party }),
    });
  }

  /**
   * Begins the label points of each party's cache that this coordinator holds, while the parties
   * start: a party whose hello names the same cache finds them made (any other is given a new
   * cache, and these are dropped). Without caches, the job's label points of each set.
   */
  prepare(sets: readonly SampleSet[], fail: (err: Error) => void): void {
    const caches = this.psiCaches;
    for (const set of sets) {
      if (!caches) {
        this.psi.points(set).catch(fail);
        continue;
      }
      for (const party of this.opts.ids) {
        const held = caches.held(party);
        if (!held) continue;
        this.psi.useCache(party, held);
        this.psi.psi(party, set).catch(fail);
      }
    }
  }

  /** Listen for the parties; resolves with the port once listening. */
  async listen(l: ListenOptions): Promise<number> {
    const { log, traffic, onFailure } = this.opts;
    this.server = await listenForParties({
      ...l,
      log,
      traffic,
      onHello: (ws, hello, nonce, connLog) => this.parties.onHello(ws, hello, nonce, connLog),
      psiCache: this.psiCaches?.name,
      onError: (err) => onFailure(new PeerError(`server error: ${err.message}`)),
    });
    return this.server.port;
  }

  close(): Promise<void> {
    return this.server?.close() ?? Promise.resolve();
  }
}
