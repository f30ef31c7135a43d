/**
 * A full garbage collection now, where Node runs with --expose-gc (the party's bin script and
 * simulate start it so; elsewhere nothing happens). Called after a step that leaves tens of MB
 * of garbage with little allocation to follow that would make V8 collect it: reading the data
 * file (its matrix, once spilled, and the reader's strings), and, at a set-up, the
 * intersection's buffers. Until a full collection that memory stays resident and adds to the
 * next step's peak (docs/scaling.md, a party's memory). With a party's small heap it takes
 * about a millisecond.
 */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/**
 * Rows from which a party also collects at the start of each round (vectors of 1 MiB): a round
 * leaves the buffers its parts came in and were decoded into and the frames its share went out
 * in (about 24 MB at a million rows), which take next to no room in V8's own heap, so V8 let
 * rounds of them pile up. A young-generation collection was tried instead (docs/scaling.md,
 * long vectors in parts): what a scavenge in the middle of a round promotes is left for V8's
 * own full collections, and one party's peak reached 301 MB in a million-row run.
 */
export const ROUND_COLLECTION_ROWS = 1 << 17;
