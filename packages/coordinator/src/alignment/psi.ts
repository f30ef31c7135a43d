/**
 * The coordinator's side of the private set intersection (docs/privacy.md, section 11). It
 * hashes its label ids onto the curve and blinds them with its key a, once per set and
 * process, in a shuffled order (`psi` message). A party answers with its own ids blinded with
 * its key b, shuffled by the party, and the coordinator's points blinded again with b (`ids`).
 * Blinding the party's points with a gives H(y)^(ab) for each of the party's ids, the party's
 * answer gives H(x)^(ab) for each label id, and equal values are the same id. So the
 * coordinator learns, for each of its label rows, whether the party holds that id and at
 * which position of the party's shuffled list; nothing about the party's other ids, and the
 * key a never leaves this process.
 *
 * A training job derives a and each set's order from a secret of the job kept at rest (the
 * coordinator's key and the job id, `jobSecret`): a coordinator restarted for the same job sends
 * every party exactly the points it sent before, so a party can refuse any other label set for
 * that job as a probe of its customers (docs/privacy.md, 11.6). Without one (a prediction
 * batch, a test) both are fresh from the CSPRNG.
 *
 * With PSI caches on both sides (--psi-cache, psi-caches.ts) the key a is the party's cache's,
 * the label ids whose H(id)^(ab) the party answered before are not sent again, and the party's
 * points blinded before are not blinded again (docs/privacy.md, 11.7).
 */
import { createHmac } from 'node:crypto';
import {
  type PsiCache,
  type PsiTeam,
  type PsiProgress,
  ByteTable,
  PointCache,
  POINT_BYTES,
  PSI_DIGEST_BYTES,
  PointError,
  cachedPoints,
  keyedStream,
  newPsiKey,
  pickRows,
  randomPermutation,
} from '@admm-share/core';
import { type Ids, type Psi, type SampleSet, ProtocolError } from '@admm-share/protocol';
import { AlignmentError } from './alignment.js';
import type { PartyCache } from './psi-caches.js';

interface LabelSet {
  /** The points sent: H(x)^a for the label ids sent, in the shuffled order sent. */
  points: Uint8Array;
  /** order[j]: the label row at position j of `points`. */
  order: Uint32Array;
  /** With a cache: each label row's digest, and H(x)^(ab) of the rows the party answered before (the others zero). */
  cached?: { digests: Uint8Array; ab: Uint8Array };
}

/** Ids the coordinator blinded (label ids and parties' points) and ids whose points came from a cache. */
export interface PsiCounts {
  blinded: number;
  reused: number;
}

/** An index of one party's list: H(id)^(ab) -> position. */
export type PartyIndex = ByteTable;

export class LabelPsi {
  /** Without a cache: the same label points for every party. */
  private readonly sets = new Map<SampleSet, Promise<LabelSet>>();
  /**
   * Per party with a cache: its cache, its label points, whether the cache was too full to keep
   * new points, and the answers to online lookups (kept in memory only: a lookup's answer is not
   * checked, so it never joins a cache that later jobs align from).
   */
  private readonly partners = new Map<string, PartyCache & { sets: Map<SampleSet, Promise<LabelSet>>; full: boolean; lookedUp: PointCache }>();
  /** Label ids per set (0: the coordinator has no such set). */
  readonly counts: { train: number; test: number };
  readonly work: PsiCounts = { blinded: 0, reused: 0 };

  constructor(
    private readonly pool: PsiTeam,
    private readonly ids: { train: readonly string[]; test: readonly string[] | undefined },
    private readonly progress: (set: SampleSet, what: string) => PsiProgress,
    /** A key a given (a test computes what a coordinator can), or the job's secret to derive a and the orders from; else both fresh. */
    private readonly source: { key?: Uint8Array; jobSecret?: () => Uint8Array } = {},
  ) {
    this.counts = { train: ids.train.length, test: ids.test?.length ?? 0 };
  }

  private keyA: Uint8Array | undefined;

  private get key(): Uint8Array {
    this.keyA ??= this.source.key ?? (this.source.jobSecret ? derived(this.source.jobSecret(), 'key') : newPsiKey());
    return this.keyA;
  }

  private keyOf(party: string): Uint8Array {
    return this.partners.get(party)?.cache.key ?? this.key;
  }

  private order(what: string, n: number): Uint32Array {
    const secret = this.source.jobSecret;
    return secret ? randomPermutation(n, keyedStream(derived(secret(), `order ${what}`))) : randomPermutation(n);
  }

  /**
   * From now on, intersect with `party` through this cache (a new one: what was sent to it
   * before is forgotten), or with none (the job's key, the same points as every such party).
   */
  useCache(party: string, c: PartyCache | undefined): void {
    const partner = this.partners.get(party);
    if (!c) this.partners.delete(party);
    else if (partner?.cache === c.cache) partner.warm = c.warm;
    else this.partners.set(party, { ...c, sets: new Map(), full: false, lookedUp: new PointCache(PSI_DIGEST_BYTES, 0, true) });
  }

  /** What the summary says of the intersection's work (output/summary.ts alignmentWork). */
  report(): { ids: PsiCounts; caches: Record<string, { id: string; warm: boolean; full?: true }> } {
    return { ids: { ...this.work }, caches: Object.fromEntries([...this.partners].map(([party, c]) => [party, { id: c.cache.id, warm: c.warm, ...(c.full ? { full: true as const } : {}) }])) };
  }

  /** Whether the cache used with `party` was too full to keep the points new in this job. */
  cacheFull(party: string): boolean {
    return this.partners.get(party)?.full ?? false;
  }

  /** The `psi` points of a set for every party without a cache (computed on first use, then the same for every rejoin). */
  points(set: SampleSet): Promise<Uint8Array> {
    return this.labelSet(set).then((s) => s.points);
  }

  /** The `psi` points of a set for `party`, and the cache they use: the same for every rejoin. */
  async psi(party: string, set: SampleSet): Promise<{ points: Uint8Array; cache?: Psi['cache'] }> {
    const partner = this.partners.get(party);
    if (!partner) return { points: (await this.labelSet(set)).points };
    let s = partner.sets.get(set);
    if (!s) {
      s = this.cachedLabelSet(party, partner.cache, set);
      partner.sets.set(set, s);
    }
    return { points: (await s).points, cache: { id: partner.cache.id, warm: partner.warm } };
  }

  private labelIds(set: SampleSet): readonly string[] {
    const ids = this.ids[set];
    if (!ids) throw new Error(`internal: no ${set} labels to align`);
    return ids;
  }

  private labelSet(set: SampleSet): Promise<LabelSet> {
    let s = this.sets.get(set);
    if (!s) {
      const ids = this.labelIds(set);
      s = (async () => {
        const order = this.order(set, ids.length);
        const points = await this.hashAndBlind(
          Array.from(order, (r) => ids[r]),
          this.key,
          set,
        );
        return { points, order };
      })();
      this.sets.set(set, s);
    }
    return s;
  }

  /** Only the label ids whose H(x)^(ab) this party's cache lacks are sent, in an order of their own. */
  private async cachedLabelSet(party: string, cache: PsiCache, set: SampleSet): Promise<LabelSet> {
    const ids = this.labelIds(set);
    const digests = await cache.digestsOn(this.pool, ids);
    const ab = new Uint8Array(ids.length * POINT_BYTES);
    const missing = cache.table('own').lookup(digests, ab);
    this.work.reused += ids.length - missing.length;
    const shuffle = this.order(`${set} ${party}`, missing.length);
    const order = Uint32Array.from(shuffle, (j) => missing[j]);
    const hashed = await this.hashedRows(set, order);
    this.work.blinded += order.length;
    const points = await this.pool.blind(hashed, cache.key, false, this.progress(set, 'blinding label ids'), true);
    return { points, order, cached: { digests, ab } };
  }

  /** Per set, H(x) of the label rows hashed so far (for parties with a cache, each blinding them with its own key). */
  private readonly hashed = new Map<SampleSet, { points: Uint8Array; done: Uint8Array; last: Promise<unknown> }>();

  /**
   * H(x) of these label rows, in this order: each row hashed once for every party with a cache
   * (the runs queue one after the other, so two parties never hash the same row twice).
   */
  private hashedRows(set: SampleSet, rows: Uint32Array): Promise<Uint8Array> {
    const ids = this.labelIds(set);
    let h = this.hashed.get(set);
    if (!h) {
      h = { points: new Uint8Array(ids.length * POINT_BYTES), done: new Uint8Array(ids.length), last: Promise.resolve() };
      this.hashed.set(set, h);
    }
    const state = h;
    const run = state.last.then(async () => {
      const todo = rows.filter((r) => !state.done[r]);
      if (todo.length > 0) {
        const fresh = await this.pool.hash(
          Array.from(todo, (r) => ids[r]),
          this.progress(set, 'hashing label ids'),
        );
        todo.forEach((r, j) => {
          state.points.set(fresh.subarray(j * POINT_BYTES, (j + 1) * POINT_BYTES), r * POINT_BYTES);
          state.done[r] = 1;
        });
      }
      return pickRows(state.points, POINT_BYTES, rows);
    });
    state.last = run.catch(() => undefined);
    return run;
  }

  private async hashAndBlind(ids: string[], key: Uint8Array, set: SampleSet): Promise<Uint8Array> {
    this.work.blinded += ids.length;
    const hashed = await this.pool.hash(ids, this.progress(set, 'hashing label ids'));
    return this.pool.blind(hashed, key, false, this.progress(set, 'blinding label ids'));
  }

  /**
   * One party's answer for one set: for each label row, the position in the party's list of
   * the same id, or -1; and the party's ids as H(id)^(ab) -> position (online scoring looks
   * each request's ids up in it). Every point the party sent is checked first: a point that
   * is not one is the party's fault (ProtocolError, close 4003), and so is a duplicated id.
   */
  async match(party: string, msg: Ids, progress: PsiProgress): Promise<{ positions: Int32Array; index: PartyIndex }> {
    const { set } = msg;
    const partner = this.partners.get(party);
    const labels = await (partner?.sets.get(set) ?? this.labelSet(set));
    const key = this.keyOf(party);
    const blind = (points: Uint8Array) => refusing('ids.points', this.pool.blind(points, key, true, progress));
    let blinded: Uint8Array;
    if (partner) {
      const got = await cachedPoints(partner.cache.table('peer'), msg.points, POINT_BYTES, (missing) => blind(pickRows(msg.points, POINT_BYTES, missing)));
      this.work.blinded += got.computed;
      this.work.reused += msg.points.length / POINT_BYTES - got.computed;
      if (got.full) partner.full = true;
      blinded = got.points;
      // The progress counted only the points blinded: all are in place now.
      progress(blinded.length / POINT_BYTES, blinded.length / POINT_BYTES);
    } else {
      this.work.blinded += msg.points.length / POINT_BYTES;
      blinded = await blind(msg.points);
    }
    await refusing('ids.labelPoints', this.pool.check(msg.labelPoints));
    const n = blinded.length / POINT_BYTES;
    // Over the blinded points themselves (no copy); keyed: H(y)^(ab) is blinded with this
    // side's key, which the party cannot steer. A repeated point is a repeated id.
    let index: ByteTable;
    try {
      index = ByteTable.adopt(POINT_BYTES, blinded, true);
    } catch (err) {
      if (err instanceof RangeError && /repeats/.test(err.message)) throw new AlignmentError(party, `the ${set} ids contain a duplicate`);
      throw err;
    }
    const positions = new Int32Array(this.counts[set]).fill(-1);
    const used = new Uint8Array(n);
    const place = (row: number, points: Uint8Array, off: number) => {
      const i = index.get(points, off);
      if (i < 0) return;
      if (used[i]) throw new ProtocolError('invalid', `ids.labelPoints: two label points match the party's ${set} id ${i}`);
      used[i] = 1;
      positions[row] = i;
    };
    labels.order.forEach((row, j) => place(row, msg.labelPoints, j * POINT_BYTES));
    if (partner && labels.cached) {
      // The rows not sent: their H(x)^(ab) from the cache; the answers join it.
      const sent = new Uint8Array(positions.length);
      for (const row of labels.order) sent[row] = 1;
      for (let row = 0; row < positions.length; row++) if (!sent[row]) place(row, labels.cached.ab, row * POINT_BYTES);
      if (!partner.cache.table('own').add(labels.cached.digests, msg.labelPoints, labels.order)) partner.full = true;
    }
    return { positions, index };
  }

  /**
   * Writes the cache used with `party` (after its intersection), in the background (its tables
   * are a few hundred MB at a million ids), and frees its tables once written when nothing more
   * will be looked up in them (a training job: a rejoin reads them again). Resolves with the
   * bytes written.
   */
  saveCache(party: string, release: boolean): Promise<number> {
    const cache = this.partners.get(party)?.cache;
    if (!cache) return Promise.resolve(0);
    return release ? cache.release() : cache.saveInBackground();
  }

  /**
   * Online scoring: one request's ids, to be looked up at each party; the points under the job's
   * key are made once, for every party without a cache.
   */
  lookups(ids: readonly string[]): (party: string, index: PartyIndex, ask: (points: Uint8Array) => Promise<Uint8Array>) => Promise<Int32Array> {
    let shared: Promise<Uint8Array> | undefined;
    return (party, index, ask) => {
      const partner = this.partners.get(party);
      if (partner) return this.cachedLookup(partner.cache, partner.lookedUp, index, ids, ask);
      shared ??= this.blindIds(ids, this.key);
      return shared.then(ask).then((found) => Int32Array.from(ids, (_, i) => index.get(found, i * POINT_BYTES)));
    };
  }

  /**
   * The positions in a party's list (its `index`) of one request's ids, or -1: ids whose
   * H(id)^(ab) its cache holds (from its intersections), or this process looked up before, are
   * found at once; the others are hashed, blinded with a and sent to the party (`ask`, a
   * `lookup`; nothing is sent when there are none), and its answer is kept in `lookedUp`.
   */
  private async cachedLookup(cache: PsiCache, lookedUp: PointCache, index: PartyIndex, ids: readonly string[], ask: (points: Uint8Array) => Promise<Uint8Array>): Promise<Int32Array> {
    const digests = cache.digests(ids);
    const known = await cachedPoints(cache.table('own'), digests, PSI_DIGEST_BYTES, async (missing) => {
      const more = await cachedPoints(lookedUp, pickRows(digests, PSI_DIGEST_BYTES, missing), PSI_DIGEST_BYTES, async (asked) =>
        ask(
          await this.blindIds(
            Array.from(asked, (j) => ids[missing[j]]),
            cache.key,
          ),
        ),
      );
      return more.points;
      // (Not kept in the cache's table, which later jobs align from.)
    }, { keep: false });
    this.work.reused += ids.length - known.computed;
    return Int32Array.from(ids, (_, i) => index.get(known.points, i * POINT_BYTES));
  }

  /** Ids hashed onto the curve and blinded with `key`, in their order. */
  private async blindIds(ids: readonly string[], key: Uint8Array): Promise<Uint8Array> {
    this.work.blinded += ids.length;
    return this.pool.blind(await this.pool.hash(ids), key, false);
  }
}

/** 32 bytes for one use (`what`) of the job's secret. */
function derived(secret: Uint8Array, what: string): Uint8Array {
  return createHmac('sha256', secret).update(`admm-share psi ${what}`).digest();
}

/** A PointError becomes the peer's fault, naming the field and the point. */
async function refusing<T>(field: string, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof PointError) throw new ProtocolError('invalid', `${field}: ${err.message}`);
    throw err;
  }
}
