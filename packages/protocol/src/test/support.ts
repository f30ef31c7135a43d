// Helpers shared by the protocol package's tests. The protocol package may not import core
// (where the other packages' test helpers live), so its tests keep their own here.
import seedrandom from 'seedrandom';
import type { PrivacyInfo } from '../index.js';

/** A seeded generator of floats in [0, 1), so failures reproduce. */
export function seeded(seed: number | string): () => number {
  return seedrandom(String(seed));
}

/** The privacy field of a party without noise. */
export const NO_PRIVACY = { mechanism: 'none', epsilon: null, delta: null, rounds: 100, sigma: 0, sensitivity: 0, accountant: null, seeded: false } as const satisfies PrivacyInfo;
