/** Node's collector, where it runs with --expose-gc (the party's bin script and simulate start it so). */
const gc = (globalThis as { gc?: (options?: { type: 'minor' | 'major' }) => void }).gc;

/**
 * A full garbage collection now (without --expose-gc nothing happens). Called after a step
 * that leaves tens of MB of garbage with little allocation to follow that would make V8
 * collect it: reading the data file (its matrix, once spilled, and the reader's strings), and,
 * at a set-up, the intersection's buffers. Until a full collection that memory stays resident
 * and adds to the next step's peak (docs/scaling.md, a party's memory).
 */
export function collectGarbage(): void {
  gc?.();
}

/** Rows from which a party collects young garbage at the start of each round (vectors of 1 MiB). */
export const YOUNG_COLLECTION_ROWS = 1 << 17;

/**
 * A young-generation collection now (a millisecond or less): frees the buffers a round leaves,
 * the message received and its vector decoded, and the frames sent (24 MB a round at a million
 * rows). They are young objects but take next to no room in V8's own heap, so V8 would let
 * rounds of them pile up before it collected (docs/scaling.md).
 */
export function collectYoungGarbage(): void {
  gc?.({ type: 'minor' });
}
