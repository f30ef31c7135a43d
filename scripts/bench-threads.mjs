#!/usr/bin/env node
// A large dense block's x-update work on 1, 2, ... threads, in one process (docs/scaling.md,
// "Threads"): the two per-round products D x and D^T w (median of --calls each, alternating)
// and the set-up's Gram matrix D^T D (packed) and Cholesky factor of I + D^T D, for a --rows x
// --cols block of seeded random entries in shared memory. Threads are DenseTeam' workers
// beside the calling thread.
// Prints figures; asserts nothing.
//   npm run bench:threads [-- --rows 6000 --cols 2000 --threads 0,1 --calls 20]
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { DenseTeam, choleskyInPlace, denseGramRows, denseMatTVec, denseMatVec, gramPanel, packedAt, packedLength, sharedFloat64 } from '@admm-share/core';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '6000' },
    cols: { type: 'string', default: '2000' },
    threads: { type: 'string', default: '0,1' },
    calls: { type: 'string', default: '20' },
  },
});
const n = Number(values.rows);
const d = Number(values.cols);
const calls = Number(values.calls);
const counts = values.threads.split(',').map(Number);
for (const v of [n, d, calls, ...counts])
  if (!Number.isInteger(v) || v < 0) {
    console.error(`bench-threads: --rows, --cols, --calls and --threads take whole numbers, got ${v}`);
    process.exit(2);
  }

let seed = 1;
const data = sharedFloat64(n * d);
for (let i = 0; i < data.length; i++) data[i] = ((seed = (seed * 48271) % 2147483647) / 2147483647) * 2 - 1;
const A = { rows: n, cols: d, data };
const x = Float64Array.from({ length: d }, (_, j) => Math.sin(j));
const w = Float64Array.from({ length: n }, (_, i) => Math.cos(i));
const median = (a) => a.sort((p, q) => p - q)[a.length >> 1];

console.log(`block ${n} x ${d} dense (${((n * d * 8) / 2 ** 20).toFixed(1)} MiB), ${availableParallelism()} cores`);
const base = {};
for (const extra of counts) {
  const pool = extra > 0 ? DenseTeam.start(A, extra) : undefined;
  const ax = new Float64Array(n);
  const atw = new Float64Array(d);
  const tv = [];
  const tt = [];
  for (let c = 0; c < calls + 2; c++) {
    let t0 = performance.now();
    if (pool) pool.matVec(ax, x);
    else denseMatVec(ax, A, x);
    const a = performance.now() - t0;
    t0 = performance.now();
    if (pool) pool.matTVec(atw, w);
    else denseMatTVec(atw, A, w);
    const b = performance.now() - t0;
    if (c >= 2) (tv.push(a), tt.push(b)); // the first two calls start the threads and warm up
  }
  const g = sharedFloat64(packedLength(d));
  let t0 = performance.now();
  if (pool) {
    for (const step of pool.gram(g, 'primal', 2 ** 25)) if (step) await step;
  } else denseGramRows(A, g, 0, n, gramPanel(d));
  const gramMs = performance.now() - t0;
  for (let i = 0; i < d; i++) g[packedAt(i) + i] += 1;
  t0 = performance.now();
  let ok;
  if (pool) {
    const gen = pool.cholesky(g, d, 2 ** 25);
    let r;
    while (!(r = gen.next()).done);
    ok = r.value;
  } else ok = choleskyInPlace(g, d);
  const cholMs = performance.now() - t0;
  if (!ok) throw new Error('bench-threads: I + D^T D not positive definite?');
  const row = { products: median(tv) + median(tt), gram: gramMs, chol: cholMs };
  base[0] ??= row;
  console.log(
    `threads ${extra + 1}: D x ${median(tv).toFixed(2)} ms, D^T w ${median(tt).toFixed(2)} ms (median of ${calls}), ` +
      `Gram ${(gramMs / 1000).toFixed(2)} s, Cholesky ${(cholMs / 1000).toFixed(2)} s; ` +
      `speed-up ${(base[0].products / row.products).toFixed(2)}x products, ${(base[0].gram / row.gram).toFixed(2)}x Gram, ${(base[0].chol / row.chol).toFixed(2)}x Cholesky`,
  );
  await pool?.close();
}
