// The party's collections at each round: a young-generation one from ROUND_COLLECTION_ROWS, none
// below; and, in a process started with the party's own flags, that it frees what a round's
// vector came in.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ROUND_COLLECTION_ROWS, ROUND_GARBAGE_BYTES, RoundGarbage } from '../session/gc.js';

test('RoundGarbage: a young-generation collection at each round from ROUND_COLLECTION_ROWS, none below; a full one once array buffers grew ROUND_GARBAGE_BYTES above their lowest', () => {
  const g = globalThis as { gc?: unknown };
  const before = g.gc;
  const calls: unknown[] = [];
  g.gc = (o: unknown) => calls.push(o ?? 'full');
  // What array buffers hold after each collection, in MiB: a full collection leaves `live`.
  let bytes = 0;
  let live = 11;
  const readings = [20, 12, 30, 35, 36, 14, 37];
  const garbage = new RoundGarbage(() => (calls.at(-1) === 'full' ? live << 20 : bytes));
  try {
    assert.equal(garbage.round(ROUND_COLLECTION_ROWS - 1), 'none');
    assert.deepEqual(calls, []);
    const got = readings.map((mib) => {
      bytes = mib << 20;
      return garbage.round(1e6);
    });
    // Lowest 12 MiB from the second round; 36 is 24 MiB above it; after the full one, 11.
    assert.deepEqual(got, ['young', 'young', 'young', 'young', 'full', 'young', 'full']);
    assert.equal(ROUND_GARBAGE_BYTES, 24 << 20);
    const minor = { type: 'minor' };
    assert.deepEqual(calls, [minor, minor, minor, minor, minor, 'full', minor, minor, 'full']);
    // A full collection that leaves more (the party holds more now) raises the mark.
    live = 40;
    assert.deepEqual([60, 45, 63, 64].map((mib) => ((bytes = mib << 20), garbage.round(1e6))), ['full', 'young', 'young', 'full']);
    assert.equal(new RoundGarbage(() => 0).round(ROUND_COLLECTION_ROWS), 'young');
  } finally {
    g.gc = before;
  }
});

test("with the party's flags, each round's collection frees the buffers the round before came in", () => {
  // The flags on the first line of the party's bin script (`node` and what follows it).
  const bin = fileURLToPath(new URL('../../bin/admm-party.js', import.meta.url));
  const flags = readFileSync(bin, 'utf8').split('\n')[0].split(' node ')[1].split(' ');
  assert.ok(flags.includes('--expose-gc'), flags.join(' '));
  const gc = new URL('../session/gc.js', import.meta.url).href;
  // A million-row round as the socket and ws leave it: 8 MB read 64 KiB at a time, joined into
  // frames of 512 KiB; then the next round's collection. What array buffers hold after it is
  // printed, and how many whole-heap collections ran.
  const script = `
    import { RoundGarbage } from ${JSON.stringify(gc)};
    import { PerformanceObserver, constants } from 'node:perf_hooks';
    let major = 0;
    new PerformanceObserver((l) => { for (const e of l.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) major++; }).observe({ entryTypes: ['gc'] });
    const after = [];
    const kinds = new Set();
    const garbage = new RoundGarbage();
    let sink = 0;
    for (let round = 0; round < 30; round++) {
      kinds.add(garbage.round(1e6));
      after.push(process.memoryUsage().arrayBuffers);
      const reads = Array.from({ length: 128 }, (_, i) => Buffer.alloc(65536, i));
      for (let f = 0; f < 16; f++) sink += Buffer.concat(reads.slice(8 * f, 8 * f + 8))[f];
      await new Promise((r) => setTimeout(r, 2));
    }
    await new Promise((r) => setTimeout(r, 50));
    console.log(JSON.stringify({ after, major, kinds: [...kinds], sink }));`;
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const { after, major, kinds } = JSON.parse(r.stdout) as { after: number[]; major: number; kinds: string[] };
  assert.deepEqual(kinds, ['young']);
  // Each round leaves 16 MB of buffers. Without the collections V8's own left 16-32 MiB after
  // each round here; with them 8 MiB (its young buffers are swept a collection late).
  assert.ok(Math.max(...after) < 12 << 20, `array buffers after the collections: ${after.map((b) => (b / 2 ** 20).toFixed(1)).join(', ')} MiB`);
  assert.equal(major, 0, 'no whole-heap collection during the rounds');
});
