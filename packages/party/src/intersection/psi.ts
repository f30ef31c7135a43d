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
 */
import { createHash } from 'node:crypto';
import { type PackedIds, type PsiTeam, type PsiProgress, PointError, SpilledBytes, newPsiKey, randomPermutation, selectIds } from '@admm-share/core';
import { ProtocolError, type SampleSet } from '@admm-share/protocol';

interface OwnSet {
  /** order[i]: the file row at position i of the points sent. */
  order: Uint32Array;
  points: Promise<SpilledBytes>;
}

export class PartyPsi {
  private readonly key = newPsiKey();
  private readonly own = new Map<SampleSet, OwnSet>();
  /** The last label set blinded, per set, by its digest. */
  private readonly answered = new Map<SampleSet, { digest: string; points: Promise<SpilledBytes> }>();

  constructor(
    private readonly pool: PsiTeam,
    private readonly ids: { train: PackedIds; test: PackedIds | undefined },
    private readonly progress: (set: SampleSet, what: string) => PsiProgress,
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
      const points = (async () => {
        const hashed = await this.pool.hash(selectIds(ids, order), this.progress(set, 'hashing ids'));
        return new SpilledBytes(await this.pool.blind(hashed, this.key, false, this.progress(set, 'blinding ids'), true));
      })();
      own = { order, points };
      this.own.set(set, own);
    }
    return own;
  }
}
