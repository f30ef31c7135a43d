// Seeded sparse data for the benchmarks (bench --scale, bench:predict): rows over 4 blocks of 100
// columns with about 6 non-zeros per block and row, labels from a fixed linear model, written
// once as LIBSVM (through a .partial file, renamed when complete).
import { createWriteStream, existsSync, renameSync } from 'node:fs';

/** A seeded generator (mulberry32): the data is the same on every run. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** LIBSVM rows over 4 blocks of 100 columns, ~6 non-zeros per block, labels from a fixed linear model; written as it goes. */
export async function writeRows(path, n, seed) {
  if (existsSync(path)) return;
  const r = rng(seed);
  const w = rng(7);
  const weights = Float64Array.from({ length: 400 }, () => 2 * w() - 1);
  const out = createWriteStream(path + '.partial');
  let chunk = '';
  for (let i = 0; i < n; i++) {
    const cols = new Set();
    for (let b = 0; b < 4; b++) for (let k = 0; k < 6; k++) cols.add(b * 100 + Math.floor(r() * 100));
    const sorted = [...cols].sort((x, y) => x - y);
    let score = 0;
    const entries = sorted.map((c) => {
      const v = Math.round((r() * 2 - 1) * 1000) / 1000;
      score += weights[c] * v;
      return `${c + 1}:${v}`;
    });
    chunk += `${r() < 1 / (1 + Math.exp(-score)) ? '+1' : '-1'} ${entries.join(' ')}\n`;
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await new Promise((res) => out.once('drain', res));
      chunk = '';
    }
  }
  out.end(chunk);
  await new Promise((res) => out.on('finish', res));
  renameSync(path + '.partial', path);
}

