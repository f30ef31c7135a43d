/**
 * What the two sensitivity attacks (sensitivity.test.ts for Theorem 1, release-sensitivity.test.ts
 * for Theorem 3) share: random rows of norm <= 1, the maps into the unit ball, and the adaptive
 * hill climbing that searches for the worst neighbour.
 */

/** A random row, often exactly on the unit sphere (the worst case), with about `sparsity` zeros. */
export function randomRow(rand: () => number, d: number, sparsity: number): number[] {
  const row = Array.from({ length: d }, () => (rand() < sparsity ? 0 : 2 * rand() - 1));
  const norm = Math.hypot(...row);
  const target = rand() < 0.5 ? 1 : rand();
  return norm === 0 ? row : row.map((v) => (v / norm) * target);
}

/** The row scaled into the unit ball (what normaliseRows does to a party's data). */
export function intoBall(row: number[]): number[] {
  const norm = Math.hypot(...row);
  return norm > 1 ? row.map((v) => v / norm) : row;
}

/** The row scaled to norm `r` (a zero row stays zero). */
export function toNorm(row: number[], r: number): number[] {
  const norm = Math.hypot(...row);
  return norm === 0 ? row : row.map((v) => (v / norm) * r);
}

/**
 * Hill climbing over `kinds` kinds of move, each with its own step size: doubled (up to 4)
 * when its move improves the score, shrunk by 0.9 (down to 1e-3) when it does not. Returns
 * the best score reached.
 */
export function hillClimb<S>(
  rand: () => number,
  start: S,
  score: (s: S) => number,
  kinds: number,
  move: (state: S, kind: number, step: number) => S,
  iterations: number,
): number {
  let state = start;
  let best = score(state);
  const steps = new Array<number>(kinds).fill(0.5);
  for (let it = 0; it < iterations; it++) {
    const kind = Math.floor(rand() * kinds);
    const s = steps[kind];
    const next = move(state, kind, s);
    const r = score(next);
    if (r > best) {
      best = r;
      state = next;
      steps[kind] = Math.min(2 * s, 4);
    } else steps[kind] = Math.max(0.9 * s, 1e-3);
  }
  return best;
}

/**
 * The moves on a neighbouring pair's rows that both attacks make, numbered 0 to 2: jitter the
 * replacement row, the replaced row (row 0), or about half of the other rows, each kept in the
 * unit ball. Any other move number is the caller's own (undefined here).
 */
export function rowMove<S extends { rows: number[][]; replacement: number[] }>(state: S, move: number, step: number, g: () => number, rand: () => number): S | undefined {
  const jitter = (r: number[]) => intoBall(r.map((v) => v + step * g()));
  if (move === 0) return { ...state, replacement: jitter(state.replacement) };
  if (move === 1) {
    const rows = state.rows.slice();
    rows[0] = jitter(rows[0]);
    return { ...state, rows };
  }
  if (move === 2) return { ...state, rows: state.rows.map((r, k) => (k > 0 && rand() < 0.5 ? jitter(r) : r)) };
  return undefined;
}
