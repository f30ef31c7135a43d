// The party's collections between rounds: at a large size only, once the buffers the rounds
// before left (about twice their vectors' bytes) reach ROUND_GARBAGE_BYTES.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ROUND_COLLECTION_ROWS, ROUND_GARBAGE_BYTES, RoundGarbage } from '../gc.js';

test('RoundGarbage: a round collects once the rounds before it left ROUND_GARBAGE_BYTES (every other round at a million rows), never below ROUND_COLLECTION_ROWS', () => {
  const rounds = (n: number, count: number) => {
    const g = new RoundGarbage();
    return Array.from({ length: count }, () => g.round(n));
  };
  // 16 MB a round at a million rows: the third round finds 32 MB (above 24 MiB) left by the first two.
  assert.deepEqual(rounds(1e6, 7), [false, false, true, false, true, false, true]);
  // 4.8 MB a round at 3e5 rows: the seventh round finds 28.8 MB (five rounds' 24 MB is below), then every sixth.
  const at3e5 = rounds(3e5, 20);
  assert.deepEqual(at3e5.flatMap((due, i) => (due ? [i + 1] : [])), [7, 13, 19]);
  // The smallest size that collects, and one just below it.
  const perRound = 16 * ROUND_COLLECTION_ROWS;
  const every = Math.ceil(ROUND_GARBAGE_BYTES / perRound);
  assert.deepEqual(rounds(ROUND_COLLECTION_ROWS, 2 * every + 1).flatMap((due, i) => (due ? [i + 1] : [])), [every + 1, 2 * every + 1]);
  assert.deepEqual(rounds(ROUND_COLLECTION_ROWS - 1, 100).filter(Boolean), []);
});
