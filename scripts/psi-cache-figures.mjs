#!/usr/bin/env node
// Figures of the PSI cache (core psi/psi-cache.ts) for N entries (default 1e6): the time to
// digest N ids, save, open and verify, look up and add 1 % new, the size on disk and the
// memory of a loaded table. Run `npx tsc -b` first; `node --expose-gc scripts/psi-cache-figures.mjs [N]`
// (without --expose-gc the memory figures include garbage not yet collected).
import { spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PsiCache, packIds } from '../packages/core/dist/index.js';

const n = Number(process.argv[2] ?? 1e6);
const root = process.argv[3] === 'read' ? '' : mkdtempSync(join(tmpdir(), 'psi-cache-figures-'));
const dir = process.argv[4] ?? join(root, 'cache');
// Wall time and this process's CPU time: on a shared machine the second is the steadier figure.
const now = () => ({ wall: performance.now(), cpu: process.cpuUsage() });
const ms = (t0) => {
  const cpu = process.cpuUsage(t0.cpu);
  return `${(performance.now() - t0.wall).toFixed(0)} ms (CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms)`;
};
const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
const gc = () => globalThis.gc?.();
const line = (what, value) => console.log(`${what.padEnd(44)} ${value}`);

/** The ids and their points, written as a party's and a coordinator's caches would be. */
function write() {
  const ids = Array.from({ length: n }, (_, i) => `customer-${String(i).padStart(8, '0')}`);
  const packed = packIds(ids);
  const cache = PsiCache.create(dir, { tables: ['own', 'peer'], partner: 'figures' });
  let t0 = now();
  const digests = cache.digests(packed);
  line(`digests of ${n} packed ids`, ms(t0));
  t0 = now();
  cache.digests(ids);
  line(`digests of ${n} ids as strings`, ms(t0));
  const points = randomFillSync(new Uint8Array(n * 32));
  const peerKeys = randomFillSync(new Uint8Array(n * 32));
  t0 = now();
  cache.table('own').add(digests, points);
  cache.table('peer').add(peerKeys, points);
  line(`add ${n} to own and to peer`, ms(t0));
  t0 = now();
  const written = cache.save();
  line('save both', `${ms(t0)}, ${mib(written)}`);
  line('on disk (key, meta, own, peer)', `${mib(cache.bytesOnDisk())}, ${(cache.bytesOnDisk() / n).toFixed(1)} bytes per id`);
}

/** Opening, in a process of its own so that the memory figures count the tables only. */
function read() {
  gc();
  const base = process.memoryUsage();
  let t0 = now();
  const opened = PsiCache.open(dir, { tables: ['own'], maxAgeDays: 30 });
  if (!opened.cache) throw new Error(opened.why);
  line(`open and verify own (${n})`, ms(t0));
  gc();
  const own = process.memoryUsage();
  line('  own in memory (array buffers)', `${mib(own.arrayBuffers - base.arrayBuffers)}; (16 + 32) n + 8 n = ${mib(56 * n)}`);
  t0 = now();
  const peer = opened.cache.table('peer');
  line(`load and verify peer (${n})`, ms(t0));
  gc();
  line('  peer in memory (array buffers)', `${mib(process.memoryUsage().arrayBuffers - own.arrayBuffers)}; (32 + 32) n + 8 n = ${mib(72 * n)}`);
  line('peak resident set after opening both', mib(process.resourceUsage().maxRSS * 1024));
  const ids = Array.from({ length: n }, (_, i) => `customer-${String(i).padStart(8, '0')}`);
  const digests = opened.cache.digests(ids);
  const peerKeys = peer.entries().keys.slice();
  const out = new Uint8Array(n * 32);
  t0 = now();
  let misses = opened.cache.table('own').lookup(digests, out);
  line(`lookup ${n} in own, all hits`, `${ms(t0)} (${misses.length} misses)`);
  t0 = now();
  misses = peer.lookup(peerKeys, out);
  line(`lookup ${n} in peer, all hits`, `${ms(t0)} (${misses.length} misses)`);
  const fresh = randomFillSync(new Uint8Array(n * 16));
  t0 = now();
  misses = opened.cache.table('own').lookup(fresh, out);
  line(`lookup ${n} in own, all misses`, `${ms(t0)} (${misses.length} misses)`);
  const k = Math.floor(n / 100);
  t0 = now();
  opened.cache.table('own').add(fresh.subarray(0, k * 16), out.subarray(0, k * 32));
  line(`add ${k} new (1 %) to own`, ms(t0));
  t0 = now();
  const written = opened.cache.save();
  line('save own after that', `${ms(t0)}, ${mib(written)}`);
}

if (process.argv[3] === 'read') read();
else
  try {
    write();
    const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), String(n), 'read', dir], { stdio: 'inherit' });
    if (r.status !== 0) process.exitCode = 1;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
