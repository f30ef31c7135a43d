/**
 * What a restarted party needs to get back to where the job is: for each party, its last
 * two answered ADMM rounds as (round, rho, c sent to it in that round (the same for every
 * party unless Anderson acceleration gives each its own), the share it released
 * the round before, the share it released in it). Replaying the round's x-update from these
 * gives the party the same x_m it had, so it never reports from x = 0 (protocol `resume`).
 */
import type { Resume } from '@admm-share/protocol';

interface Answered {
  round: number;
  rho: number;
  c: Float64Array;
  previousShare: Float64Array;
  share: Float64Array;
}

/** Round `round` of every party, as a checkpoint stores it. */
export interface ReplayPoint {
  round: number;
  rho: number;
  /** What each party was sent. */
  cs: Float64Array[];
  previousShares: Float64Array[];
  shares: Float64Array[];
}

const EMPTY = new Float64Array(0);

export class ReplayLog {
  /** Per party: its answered rounds, oldest first, at most two. */
  private readonly answered: Answered[][];
  /**
   * Per party, three arrays for the vectors it is sent, used in turn by round (sentCopy): the
   * log keeps at most two answered rounds a party, and every party answers a round before the
   * next is sent, so the third is never held.
   */
  private readonly copies: Float64Array[][];
  /** Per party, four arrays its shares are decoded into (whole or in parts), used in turn by round (receivedInto). */
  private readonly received: Float64Array[][];

  constructor(
    parties: number,
    private readonly n: number,
    private readonly initialRho: number,
    from?: ReplayPoint,
  ) {
    this.answered = Array.from({ length: parties }, (_, m) =>
      from ? [{ round: from.round, rho: from.rho, c: from.cs[m], previousShare: from.previousShares[m], share: from.shares[m] }] : [],
    );
    this.copies = Array.from({ length: parties }, () => []);
    this.received = Array.from({ length: parties }, () => []);
  }

  /**
   * `c` copied for party m's round `round`, to be recorded with its answer, into an array the
   * log reuses three rounds later (a fresh array a party a round costs page faults as it is
   * written: 3.7 ms for the 8 MB of a million rows, against 0.3 ms into one already touched).
   */
  sentCopy(m: number, round: number, c: Float64Array): Float64Array {
    const slot = (this.copies[m][round % 3] ??= new Float64Array(this.n));
    slot.set(c);
    return slot;
  }

  /**
   * The array party m's share of round `round` is decoded into, whole or in parts (the
   * protocol's decode and parts.ts), instead of a fresh one a round. The log holds a party's shares of
   * the last three rounds at most (its two answered rounds' shares, and the share before the
   * older one as that round's previous share), so with four used in turn the next is never held.
   */
  receivedInto(m: number, round: number): Float64Array {
    return (this.received[m][round % 4] ??= new Float64Array(this.n));
  }

  /** Party m answered round `round` (sent with `rho` and `c`; `c` must not change afterwards). */
  record(m: number, round: number, rho: number, c: Float64Array, share: Float64Array): void {
    const list = this.answered[m];
    const last = list[list.length - 1];
    const previousShare = last && last.round === round - 1 ? last.share : new Float64Array(this.n);
    list.push({ round, rho, c, previousShare, share });
    if (list.length > 2) list.shift();
  }

  /** The resume for party m at its latest answered round not after `atMost`. */
  resume(m: number, jobId: string, atMost = Infinity): Resume {
    const list = this.answered[m];
    const a = [...list].reverse().find((x) => x.round <= atMost);
    if (!a) return { type: 'resume', jobId, round: 0, rho: this.initialRho, c: EMPTY, previousShare: EMPTY, share: EMPTY };
    return { type: 'resume', jobId, round: a.round, rho: a.rho, c: a.c, previousShare: a.previousShare, share: a.share };
  }

  /** Every party at round `round` (all have answered it), for a checkpoint. */
  point(round: number): ReplayPoint {
    const at = this.answered.map((list, m) => {
      const a = list.find((x) => x.round === round);
      if (!a) throw new Error(`internal: party ${m} has no record of round ${round}`);
      return a;
    });
    return { round, rho: at[0].rho, cs: at.map((a) => a.c), previousShares: at.map((a) => a.previousShare), shares: at.map((a) => a.share) };
  }
}
