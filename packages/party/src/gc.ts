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
 * A young-generation collection now (with --expose-gc): the buffers a round's messages leave
 * die young, and a young collection frees them (ArrayBuffers included) without marking the
 * old generation, as a full one does (0.5 ms in a small process).
 */
export function collectYoung(): void {
  (globalThis as { gc?: (options?: { type: 'minor' }) => void }).gc?.({ type: 'minor' });
}

/**
 * Rows from which a party also collects the young generation at the start of each round
 * (vectors of 1 MiB): a round leaves the buffers its parts came in and were decoded into and
 * the frames its share went out in (about 24 MB at a million rows), which take next to no room
 * in V8's own heap, so V8 let rounds of them pile up. They are young, so a young-generation
 * collection frees them. A full one was needed while a round left whole 8 MB buffers, which
 * outlived the young generation; in a skeleton of a million-row round (four parties on two
 * cores) it took 9 ms of CPU (docs/scaling.md, long vectors in parts).
 */
export const ROUND_COLLECTION_ROWS = 1 << 17;
