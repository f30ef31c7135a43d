/**
 * A full garbage collection now, where Node runs with --expose-gc (the party's bin script and
 * simulate start it so; elsewhere nothing happens). Called after a step that leaves tens of MB
 * of garbage with little allocation to follow that would make V8 collect it: reading the data
 * file (its matrix, once spilled, and the reader's strings), at a set-up the intersection's
 * buffers, and, at a large size, the buffers rounds leave (RoundGarbage). Until a full
 * collection that memory stays resident and adds to the next step's peak (docs/scaling.md, a
 * party's memory).
 */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/**
 * Rows from which a party also collects between rounds (vectors of 1 MiB): a round leaves the
 * buffers its vector came in (the socket's reads and the frames ws joins them into: about twice
 * the vector's bytes, 16 MB at a million rows), which take next to no room in V8's own heap, so
 * V8 lets rounds of them pile up.
 */
export const ROUND_COLLECTION_ROWS = 1 << 17;

/**
 * Bytes of such buffers a party lets rounds leave before it collects. A collection every round
 * cost more than the party's own products (each 22-41 ms with five processes on two cores):
 * without any, a round of 3e5 rows and four parties took 68.4 ms against 91.6, one of a
 * million rows 237 against 269-294 ms. A million-row party now collects every other round
 * (258.8 ms, its rounds at 209-223 MB; docs/scaling.md).
 */
export const ROUND_GARBAGE_BYTES = 24 << 20;

/** The garbage of a party's rounds: counted from their vectors' lengths, collected once it reaches ROUND_GARBAGE_BYTES. */
export class RoundGarbage {
  private bytes = 0;

  /** A round's vector of n values came in: collect first if the rounds before left enough (then true). */
  round(n: number): boolean {
    if (n < ROUND_COLLECTION_ROWS) return false;
    const due = this.bytes >= ROUND_GARBAGE_BYTES;
    if (due) {
      collectGarbage();
      this.bytes = 0;
    }
    this.bytes += 2 * 8 * n;
    return due;
  }
}
