/**
 * The party's side of the private set intersection (docs/privacy.md, section 11). The party
 * hashes its ids onto the curve, blinds them with its key b and sends them in an order it
 * shuffled itself, and blinds the coordinator's label points again with b. Its key and its
 * order never leave this process; they last as long as it does, so a rejoin costs only the
 * second blinding of a label set it has not seen (a coordinator restarted with a new key).
 * The coordinator's setup names rows by their position in the shuffled order; `fileRows`
 * maps them back to rows of the party's file.
 *
 * The points kept for a repeat (32 bytes an id: 64 MB for both lists of a million-row party)
 * wait in a temporary file rather than in memory, through the set-up and every round
 * (SpilledBytes).
 *
 * With a PSI cache (--psi-cache, psi-caches.ts) the key b is the cache's, kept between jobs, and
 * the party's own points come from the cache where it blinded the same id before: only new ids
 * are hashed and blinded (docs/privacy.md, 11.7).
 */
import { createHash } from 'node:crypto';
import { type PackedIds, type PsiCache, type PsiTeam, type PsiProgress, POINT_BYTES, PSI_DIGEST_BYTES, PointError, SpilledBytes, cachedPoints, newPsiKey, randomPermutation, selectIds } from '@admm-share/core';
import { ProtocolError, type SampleSet } from '@admm-share/protocol';

interface OwnSet {
  /** order[i]: the file row at position i of the points sent. */
  order: Uint32Array;
  points: Promise<SpilledBytes>;
}

/** What the last intersection of a set cost: ids hashed and blinded, ids whose points came from the cache, and whether the cache was too full to keep the new ones. */
export interface OwnCost {
  blinded: number;
  reused: number;
  cacheFull?: true;
}

export class PartyPsi {
  /** This process's own key, used with a coordinator that keeps no cache. */
  private readonly processKey = newPsiKey();
  /** The key in use: this process's, or the cache's (useCache). */
  private key = this.processKey;
  private cache: PsiCache | undefined;
  private readonly own = new Map<SampleSet, OwnSet>();
  /** Per set, what its own points cost (once computed). */
  readonly costs = new Map<SampleSet, OwnCost>();
  /** Sets whose own points are being looked up in the cache's table. */
  private inFlight = 0;
  /** The last label set blinded, per set, by its digest. */
  private readonly answered = new Map<SampleSet, { digest: string; points: Promise<SpilledBytes> }>();

  constructor(
    private readonly pool: PsiTeam,
    private readonly ids: { train: PackedIds; test: PackedIds | undefined },
    private readonly progress: (set: SampleSet, what: string) => PsiProgress,
    /** Collects the garbage a set's own points leave (their digests, the cache's table): a full collection at a party. */
    private readonly collect: () => void = () => undefined,
  ) {}

  /**
   * This party's points of a set (computed once) and the coordinator's label points blinded
   * again, in place: `labelPoints` is overwritten (a message's array, not read again); `digest`
   * is its SHA-256 (hex), when the caller has it already. Both are
   * kept in temporary files, read a frame at a time into the answer as it is sent (encodeIdsSource).
   */
  async answer(set: SampleSet, labelPoints: Uint8Array, digest = createHash('sha256').update(labelPoints).digest('hex')): Promise<{ points: SpilledBytes; labelPoints: SpilledBytes }> {
    const own = this.ownSet(set);
    let reply = this.answered.get(set);
    if (reply?.digest !== digest) {
      // Blinded in place: the message's array is not read again.
      reply = { digest, points: this.pool.blind(labelPoints, this.key, true, this.progress(set, 'blinding label ids'), true).then((b) => new SpilledBytes(b)) };
      reply.points.catch(() => undefined);
      this.answered.set(set, reply);
    }
    try {
      return { points: await own.points, labelPoints: await reply.points };
    } catch (err) {
      if (err instanceof PointError) throw new ProtocolError('invalid', `psi.points: ${err.message}`);
      throw err;
    }
  }

  /**
   * Intersect with the key of `cache` from now on (its own points from the cache where it has
   * them), or, with none, with this process's own key: a change of key forgets the points and
   * answers made with the other.
   */
  useCache(cache: PsiCache | undefined): void {
    if (cache === this.cache) return;
    this.cache = cache;
    this.key = cache?.key ?? this.processKey;
    this.own.clear();
    this.answered.clear();
  }

  /**
   * The intersection is over (the set-up, or a first request to score, has come): whatever the
   * cache's table still holds is written and freed.
   */
  settle(): void {
    if (this.inFlight === 0 && this.cache) this.releaseCache(this.cache);
  }

  /** The cache's writes under way (written in the background: a million ids' table takes a fraction of a second and an fsync). */
  private readonly writes: Promise<unknown>[] = [];

  /** Writes what the cache's table gained, in the background, and frees it once written. */
  private releaseCache(cache: PsiCache): void {
    const written = cache.release();
    written.catch(() => undefined);
    this.writes.push(written);
  }

  /** Resolves once the cache's writes so far are on disk; rejects if one failed. */
  async written(): Promise<void> {
    await Promise.all(this.writes);
  }

  /**
   * Starts computing this party's points of a set before the coordinator asks for them (they
   * depend on its own ids and key only): a party then holds its own points, spilled, before the
   * label points come, rather than both at once.
   */
  prepare(set: SampleSet): void {
    this.ownSet(set).points.catch(() => undefined);
  }

  /** Points of the coordinator (online scoring: the ids of one request) blinded again with b, in their order; not cached. */
  async blindAgain(points: Uint8Array): Promise<Uint8Array> {
    try {
      return await this.pool.blind(points, this.key, true, this.progress('train', 'blinding looked-up ids'));
    } catch (err) {
      if (err instanceof PointError) throw new ProtocolError('invalid', `lookup.points: ${err.message}`);
      throw err;
    }
  }

  /** The file rows of the positions the coordinator names (validated to be below the row count). */
  fileRows(set: SampleSet, positions: Uint32Array): Uint32Array {
    const own = this.own.get(set);
    if (!own) {
      if (positions.length === 0) return positions;
      throw new ProtocolError('unexpected', `setup names ${set} rows, but this party was never asked to intersect its ${set} ids`);
    }
    return positions.map((i) => own.order[i]);
  }

  private ownSet(set: SampleSet): OwnSet {
    let own = this.own.get(set);
    if (!own) {
      const ids = this.ids[set];
      if (!ids) throw new ProtocolError('unexpected', `psi for the ${set} set, but this party has no ${set} set`);
      const order = randomPermutation(ids.length);
      const { key, cache } = this;
      const blind = async (some: PackedIds) => {
        const hashed = await this.pool.hash(some, this.progress(set, 'hashing ids'));
        return this.pool.blind(hashed, key, false, this.progress(set, 'blinding ids'), true);
      };
      const points = (async () => {
        if (!cache) {
          this.costs.set(set, { blinded: ids.length, reused: 0 });
          return new SpilledBytes(await blind(selectIds(ids, order)));
        }
        this.inFlight++;
        const spilled = await (async () => {
          try {
            // Digests made a slice at a time, in the order sent: a million ids' are never held at once.
            const digests = { count: order.length, slice: (a: number, b: number) => cache.digests(selectIds(ids, order.subarray(a, b))) };
            // The points go to their file as they are found: they are never all in memory beside the table.
            const file = SpilledBytes.writer(order.length * POINT_BYTES);
            const got = await cachedPoints(cache.table('own'), digests, PSI_DIGEST_BYTES, (missing) => blind(selectIds(ids, Uint32Array.from(missing, (j) => order[j]))), { sink: (from, points) => file.write(from * POINT_BYTES, points) });
            this.costs.set(set, { blinded: got.computed, reused: ids.length - got.computed, ...(got.full ? { cacheFull: true as const } : {}) });
            return file.done();
          } finally {
            // The table (48 bytes an id) is written and freed once no set is using it; a later set reads it again.
            if (--this.inFlight === 0) this.releaseCache(cache);
          }
        })();
        // The digests, the points now in their file and a freed table are garbage.
        this.collect();
        return spilled;
      })();
      own = { order, points };
      this.own.set(set, own);
    }
    return own;
  }
}
