/**
 * A full garbage collection now, where Node runs with --expose-gc (the party's bin script and
 * simulate start it so; elsewhere nothing happens). Called after a step that leaves tens of MB
 * of garbage with little allocation to follow that would make V8 collect it: reading the data
 * file (its matrix, once spilled, and the reader's strings), and, at a set-up, the
 * intersection's buffers. Until a full collection that memory stays resident and adds to the
 * next step's peak (docs/scaling.md, a party's memory).
 */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}
