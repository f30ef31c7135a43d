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
 */
import { createHmac } from 'node:crypto';
import { type PsiTeam, type PsiProgress, POINT_BYTES, PointError, keyedStream, newPsiKey, pointKeys, randomPermutation } from '@admm-share/core';
import { type Ids, type SampleSet, ProtocolError } from '@admm-share/protocol';
import { AlignmentError } from './alignment.js';

interface LabelSet {
  /** H(x)^a for the label ids, in the shuffled order sent. */
  points: Uint8Array;
  /** order[j]: the label row at position j of `points`. */
  order: Uint32Array;
}

export class LabelPsi {
  private readonly sets = new Map<SampleSet, Promise<LabelSet>>();
  /** Label ids per set (0: the coordinator has no such set). */
  readonly counts: { train: number; test: number };

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

  private order(set: SampleSet, n: number): Uint32Array {
    const secret = this.source.jobSecret;
    return secret ? randomPermutation(n, keyedStream(derived(secret(), `order ${set}`))) : randomPermutation(n);
  }

  /** The `psi` points of a set: computed on first use, then the same for every party and rejoin. */
  points(set: SampleSet): Promise<Uint8Array> {
    return this.labelSet(set).then((s) => s.points);
  }

  private labelSet(set: SampleSet): Promise<LabelSet> {
    let s = this.sets.get(set);
    if (!s) {
      const ids = this.ids[set];
      if (!ids) throw new Error(`internal: no ${set} labels to align`);
      s = (async () => {
        const order = this.order(set, ids.length);
        const hashed = await this.pool.hash(
          Array.from(order, (r) => ids[r]),
          this.progress(set, 'hashing label ids'),
        );
        return { points: await this.pool.blind(hashed, this.key, false, this.progress(set, 'blinding label ids')), order };
      })();
      this.sets.set(set, s);
    }
    return s;
  }

  /**
   * One party's answer for one set: for each label row, the position in the party's list of
   * the same id, or -1; and the party's ids as H(id)^(ab) -> position (online scoring looks
   * each request's ids up in it). Every point the party sent is checked first: a point that
   * is not one is the party's fault (ProtocolError, close 4003), and so is a duplicated id.
   */
  async match(party: string, msg: Ids, progress: PsiProgress): Promise<{ positions: Int32Array; index: Map<string, number> }> {
    const { set } = msg;
    const labels = await this.labelSet(set);
    const blinded = await refusing('ids.points', this.pool.blind(msg.points, this.key, true, progress));
    await refusing('ids.labelPoints', this.pool.check(msg.labelPoints));
    const index = new Map<string, number>();
    pointKeys(blinded).forEach((k, i) => {
      if (index.has(k)) throw new AlignmentError(party, `the ${set} ids contain a duplicate`);
      index.set(k, i);
    });
    const positions = new Int32Array(labels.order.length).fill(-1);
    const used = new Uint8Array(blinded.length / POINT_BYTES);
    pointKeys(msg.labelPoints).forEach((k, j) => {
      const i = index.get(k);
      if (i === undefined) return;
      if (used[i]) throw new ProtocolError('invalid', `ids.labelPoints: two label points match the party's ${set} id ${i}`);
      used[i] = 1;
      positions[labels.order[j]] = i;
    });
    return { positions, index };
  }

  /** Online scoring: the ids of one request hashed onto the curve and blinded with a, in their order (a `lookup`). */
  async blindIds(ids: readonly string[]): Promise<Uint8Array> {
    return this.pool.blind(await this.pool.hash(ids), this.key, false);
  }

  /**
   * A party's `found` answer: for each id of the request, its position in the party's list (by
   * `index`), or -1. The points are only compared with the index, never blinded with the key,
   * so they need no check: one that is not a point, or not the right one, matches nothing or
   * another of the party's own rows, as a party could claim by its scores anyway.
   */
  lookup(index: ReadonlyMap<string, number>, found: Uint8Array): Int32Array {
    return Int32Array.from(pointKeys(found), (k) => index.get(k) ?? -1);
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
