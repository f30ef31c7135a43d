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
 * Rows from which a party also collects at each round (vectors of 1 MiB): a round leaves the
 * buffers its vector came in (the socket's reads and the frames ws joins them into: about twice
 * the vector's bytes, 16 MB at a million rows), which take next to no room in V8's own heap, so
 * V8 lets rounds of them pile up.
 */
export const ROUND_COLLECTION_ROWS = 1 << 17;

/**
 * A round's vector of n values came in: from ROUND_COLLECTION_ROWS, collect the young generation
 * (then true). The last round's buffers were made in it and are dead by now, so a young-generation
 * collection frees them, in a fraction of a millisecond. A full collection every other round was
 * used before: each marked the whole heap (about 10 MB), and V8, with its helper threads, started
 * one of its own as well about every round; the parties' collections then cost about a quarter of
 * their CPU at a million rows. The party's flags (--single-threaded-gc, admm-share's processes.ts)
 * keep V8 from starting those (docs/scaling.md).
 */
export function collectRoundGarbage(n: number): boolean {
  if (n < ROUND_COLLECTION_ROWS) return false;
  (globalThis as { gc?: (o: { type: 'minor' }) => void }).gc?.({ type: 'minor' });
  return true;
}
