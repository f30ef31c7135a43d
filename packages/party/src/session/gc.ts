/**
 * A full garbage collection now, where Node runs with --expose-gc (the party's bin script and
 * simulate start it so; elsewhere nothing happens). Called after a step that leaves tens of MB
 * of garbage with little allocation to follow that would make V8 collect it: reading the data
 * file (its matrix, once spilled, and the reader's strings) and, at a set-up, the
 * intersection's buffers. Until a full collection that memory stays resident and adds to the
 * next step's peak (docs/scaling.md, a party's memory).
 */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/**
 * A young-generation collection now, where Node runs with --expose-gc: frees the buffers a
 * message just came in (the socket's reads and the frame joined from them) while they are young,
 * in a fraction of a millisecond, without marking the old generation.
 */
export function collectYoungGarbage(): void {
  (globalThis as { gc?: (o: { type: 'minor' }) => void }).gc?.({ type: 'minor' });
}

/**
 * Rows from which a party also collects at each round (vectors of 1 MiB): a round leaves the
 * buffers its vector came in (the socket's reads and the frames ws joins them into: about twice
 * the vector's bytes, 16 MB at a million rows), which take next to no room in V8's own heap, so
 * V8 lets rounds of them pile up.
 */
export const ROUND_COLLECTION_ROWS = 1 << 17;

/**
 * Bytes of array buffers above the lowest seen after a round's collection (or what the last full
 * collection left) at which a party collects the whole heap instead. A buffer still alive when V8 collected the young generation
 * during a round (its reads waiting for their frame) is moved to the old one, which only a full
 * collection frees: in one million-row run on a busy machine, two parties peaked at 252 and 263 MB
 * with young-generation collections alone.
 */
export const ROUND_GARBAGE_BYTES = 24 << 20;

/**
 * A party's collection at each round, from ROUND_COLLECTION_ROWS: its young generation. The
 * last round's buffers were made in it and are dead by now, so that frees them in a fraction of
 * a millisecond, without marking the old generation (about 10 MB). A full collection every other
 * round was used before: with V8's helper threads, V8 then also started one of its own about
 * every round, and the parties' collections cost about a quarter of their CPU at a million rows;
 * the party's flags (--single-threaded-gc, admm-share's processes.ts) keep V8 from starting
 * those. A full collection still runs when array buffers have grown ROUND_GARBAGE_BYTES above
 * their lowest after a round's collection (docs/scaling.md).
 */
export class RoundGarbage {
  private lowest = Infinity;

  /** `arrayBuffers`: the bytes array buffers hold now (process.memoryUsage's, by default). */
  constructor(private readonly arrayBuffers: () => number = () => process.memoryUsage().arrayBuffers) {}

  /** A round's vector of n values came in: which collection ran. */
  round(n: number): 'none' | 'young' | 'full' {
    if (n < ROUND_COLLECTION_ROWS) return 'none';
    collectYoungGarbage();
    const bytes = this.arrayBuffers();
    if (bytes - this.lowest < ROUND_GARBAGE_BYTES) {
      this.lowest = Math.min(this.lowest, bytes);
      return 'young';
    }
    // What a full collection leaves is live: the mark from now on (the party may hold more now).
    collectGarbage();
    this.lowest = this.arrayBuffers();
    return 'full';
  }
}
