#!/usr/bin/env node
// The cost of the private set intersection (docs/privacy.md, section 11.5): each side's
// work for one party whose n ids all match n label ids, with the real classes the processes
// run (LabelPsi at the coordinator, PartyPsi at a party) over every core, one side at a time
// (as on two machines). Prints seconds and ids per second per side, how far resident memory
// rose while the party answered, and each side's floor: libsodium's own primitives for the
// same ids over the same cores, run just before the side itself (so that both see the same
// load on a shared machine), and the ratio of the side's time to it. The floor per id: at a
// party SHA-512, one Elligator map and two X25519 (its own id and a label id); at the
// coordinator SHA-512, one map and one X25519 per label id, and one X25519 per party id. It
// leaves out what any implementation adds (the Edwards-to-Montgomery conversion, the point
// checks, the threads' messages), which is what the ratio measures. Asserts nothing.
// Each side and its floor run in turn `--repeat` times (default 2), and each keeps its least
// wall and least CPU time: on a machine shared with other work, a run that got fewer cores
// than the other says nothing about the code.
//   npm run bench:psi [-- --sizes 100000,1000000 --repeat 2]
// --psi-warm: then, with PSI caches (docs/privacy.md 11.7) in a temporary folder, a first job
// that fills them and a second on the same ids plus 1 % new ones on both sides, each side
// opening its cache from disk as a new process would: each side's seconds, the whole second
// alignment (with the party's own points beside the coordinator's label points, as the
// processes run it, and one side after the other), and the caches' size on disk.
//   npm run bench:psi -- --sizes 1000000 --psi-warm
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PsiCache, PsiTeam, packIds } from '@admm-share/core';
import { LabelPsi } from '@admm-share/coordinator';
import { PartyPsi } from '@admm-share/party';

const { values } = parseArgs({ options: { sizes: { type: 'string', default: '100000,1000000' }, repeat: { type: 'string', default: '2' }, 'psi-warm': { type: 'boolean', default: false } } });
const quiet = () => () => undefined;
const seconds = (t0) => (performance.now() - t0) / 1000;
/** Seconds of `fn`: wall and CPU (every thread of this process: the worker threads are in it). */
async function timed(fn) {
  const [t0, c0] = [performance.now(), process.cpuUsage()];
  const value = await fn();
  const c = process.cpuUsage(c0);
  return { value, wall: seconds(t0), cpu: (c.user + c.system) / 1e6 };
}
const pool = new PsiTeam();
const cores = availableParallelism();

/** Microseconds one call of `op` takes (median of 5 runs of `reps` calls), on one thread. */
function microseconds(op, reps = 4000) {
  const runs = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < reps; i++) op(i);
    runs.push(((performance.now() - t0) * 1000) / reps);
  }
  return runs.sort((a, b) => a - b)[2];
}

// libsodium through the core package's own dependency.
const sodiumPath = createRequire(new URL('../packages/core/package.json', import.meta.url)).resolve('sodium-native');
const sodium = createRequire(import.meta.url)(sodiumPath);
const bytes = (n, fill) => Buffer.alloc(n, fill);
const [scalar, uniform, out, digest] = [bytes(32, 7), bytes(32, 9), bytes(32), bytes(64)];
const montgomery = bytes(32);
sodium.crypto_scalarmult_base(montgomery, scalar);
const cost = {
  sha512: microseconds((i) => sodium.crypto_hash_sha512(digest, Buffer.from(`customer-${i}`))),
  map: microseconds(() => sodium.crypto_core_ed25519_from_uniform(out, uniform)),
  x25519: microseconds(() => sodium.crypto_scalarmult(out, scalar, montgomery)),
};
console.log(
  `libsodium here, one thread: SHA-512 ${cost.sha512.toFixed(1)} us, Elligator map ${cost.map.toFixed(1)} us, X25519 ${cost.x25519.toFixed(1)} us; ` +
    `floor per id: a party ${(cost.sha512 + cost.map + 2 * cost.x25519).toFixed(0)} us, ${((cost.sha512 + cost.map + 2 * cost.x25519) / cores).toFixed(1)} s for 1e6 ids on ${cores} cores; ` +
    `the coordinator ${(cost.sha512 + cost.map + cost.x25519).toFixed(0)} us per label id and ${cost.x25519.toFixed(0)} us per party id`,
);

/**
 * What the primitives alone take for n ids over every core (wall and CPU seconds, threads'
 * start included as a side's are): each thread hashes (SHA-512 of a tag and the id, one map)
 * if `hash`, then does `x25519` scalar multiplications per id, over its share of the ids.
 */
function floor(n, hash, x25519) {
  return timed(() => floorRun(n, hash, x25519));
}

/** The side's run and its floor's, in turn `--repeat` times; each with its least wall and CPU seconds (and the side's last value). */
async function best(n, hash, x25519, side) {
  let f;
  let s;
  const least = (a, b) => (a ? { value: b.value, wall: Math.min(a.wall, b.wall), cpu: Math.min(a.cpu, b.cpu) } : b);
  for (let r = 0; r < Number(values.repeat); r++) {
    f = least(f, await floor(n, hash, x25519));
    s = least(s, await timed(side));
  }
  return [f, s];
}

async function floorRun(n, hash, x25519) {
  const code = `
    const { parentPort, workerData: { path, from, to, hash, x25519 } } = require('node:worker_threads');
    const sodium = require(path);
    const tag = Buffer.from('admm-share psi v2 X25519 ELL2 single-map SHA-512\\0', 'latin1');
    const msg = Buffer.alloc(tag.length + 64);
    tag.copy(msg);
    const digest = Buffer.alloc(64), key = Buffer.alloc(32, 7);
    const points = [Buffer.alloc(32), Buffer.alloc(32), Buffer.alloc(32)];
    sodium.crypto_scalarmult_base(points[0], key);
    for (let i = from; i < to; i++) {
      if (hash) {
        const len = msg.write('customer-' + i, tag.length);
        sodium.crypto_hash_sha512(digest, msg.subarray(0, tag.length + len));
        // Read as a u-coordinate the map's output is as good an input as any: X25519 takes constant time.
        sodium.crypto_core_ed25519_from_uniform(points[0], digest.subarray(0, 32));
      }
      for (let k = 0; k < x25519; k++) sodium.crypto_scalarmult(points[k + 1], key, points[k]);
    }
    parentPort.postMessage(0);`;
  const share = Math.ceil(n / cores);
  await Promise.all(
    Array.from({ length: cores }, (_, t) => {
      const w = new Worker(code, { eval: true, workerData: { path: sodiumPath, from: t * share, to: Math.min(n, (t + 1) * share), hash, x25519 } });
      return new Promise((resolve, reject) => w.once('message', resolve).once('error', reject)).finally(() => w.terminate());
    }),
  );
}

console.log(`ECDH PSI over X25519, ${cores} cores, one party, every id in the intersection`);
console.log('ids        coordinator: label points   party: answer   coordinator: match   per side (ids/s)');
for (const n of values.sizes.split(',').map(Number)) {
  const labels = Array.from({ length: n }, (_, i) => `customer-${i}`);
  const own = Array.from({ length: n }, (_, i) => `customer-${n - 1 - i}`);
  let coordinator;
  const [labelFloor, label] = await best(n, true, 1, () => {
    coordinator = new LabelPsi(pool, { train: labels, test: undefined }, quiet);
    return coordinator.points('train');
  });
  // The party blinds the label points in place: each run gets its own copy, made beforehand.
  const copies = Array.from({ length: Number(values.repeat) }, () => label.value.slice());
  // Resident memory (this process and its worker threads) sampled while the party answers, the first time.
  let rise;
  const [partyFloor, party] = await best(n, true, 2, async () => {
    const rss0 = process.memoryUsage().rss;
    let rssPeak = rss0;
    const sampler = rise === undefined ? setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 50) : undefined;
    const answer = await new PartyPsi(pool, { train: packIds(own), test: undefined }, quiet).answer('train', copies.pop());
    if (sampler) {
      clearInterval(sampler);
      rise = rssPeak - rss0;
    }
    return answer;
  });
  // The answer as the party sends it, read back from its temporary files.
  const whole = (b) => {
    const into = new Uint8Array(b.length);
    b.readAt(0, into);
    return into;
  };
  const msg = { type: 'ids', jobId: 'bench', set: 'train', points: whole(party.value.points), labelPoints: whole(party.value.labelPoints) };
  const [matchFloor, match] = await best(n, false, 1, () => coordinator.match('party', msg, () => undefined));
  if (match.value.positions.some((p) => p < 0)) throw new Error('an id did not match');
  const side = (s) => Math.round(n / s).toLocaleString('en');
  const row = (name, a, b, c) => `${name.padEnd(10)} ${a.toFixed(1).padStart(10)} s ${b.toFixed(1).padStart(20)} s ${c.toFixed(1).padStart(14)} s      `;
  console.log(
    row(n.toExponential(0), label.wall, party.wall, match.wall) +
      `party ${side(party.wall)}, coordinator ${side(label.wall + match.wall)}; party's answer: resident memory up to ${(rise / 2 ** 20).toFixed(0)} MB above its start`,
  );
  const ratios = (k) =>
    `party ${(party[k] / partyFloor[k]).toFixed(2)}x its floor, coordinator ${((label[k] + match[k]) / (labelFloor[k] + matchFloor[k])).toFixed(2)}x ` +
    `(label points ${(label[k] / labelFloor[k]).toFixed(2)}x, match ${(match[k] / matchFloor[k]).toFixed(2)}x)`;
  console.log(row('floor', labelFloor.wall, partyFloor.wall, matchFloor.wall) + ratios('wall'));
  // CPU seconds of the same runs: the per-id overhead, whatever else the machine runs meanwhile.
  console.log(row('CPU', label.cpu, party.cpu, match.cpu) + `of a floor of ${labelFloor.cpu.toFixed(1)}, ${partyFloor.cpu.toFixed(1)} and ${matchFloor.cpu.toFixed(1)} s: ` + ratios('cpu'));
}

/**
 * One party's alignment through PSI caches: a first job fills them; a second, each side opening
 * its cache from disk, on the same ids and `extra` new ones at both sides.
 */
async function warm(n, extra) {
  const dir = mkdtempSync(join(tmpdir(), 'admm-bench-psi-cache-'));
  try {
    const [cDir, pDir] = [join(dir, 'coordinator'), join(dir, 'party')];
    const id = 'b'.repeat(32);
    const job = async (count, opened) => {
      const labels = Array.from({ length: count }, (_, i) => `customer-${i}`);
      const own = Array.from({ length: count }, (_, i) => `customer-${count - 1 - i}`);
      const c = await timed(() => {
        const cache = opened ? PsiCache.open(cDir, { tables: ['own', 'peer'], maxAgeDays: 1 }).cache : PsiCache.create(cDir, { tables: ['own', 'peer'], id });
        const coordinator = new LabelPsi(pool, { train: labels, test: undefined }, quiet);
        coordinator.useCache('party', { cache, warm: opened });
        return coordinator.psi('party', 'train').then((psi) => ({ coordinator, psi }));
      });
      const rss0 = process.memoryUsage().rss;
      let rssPeak = rss0;
      const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 20);
      // The party's own points first (a party begins them at the hello, while the coordinator
      // makes its label points), then its answer to the label points.
      const ownPart = await timed(async () => {
        const cache = opened ? PsiCache.open(pDir, { tables: ['own'], maxAgeDays: 1 }).cache : PsiCache.create(pDir, { tables: ['own'], id });
        const psi = new PartyPsi(pool, { train: packIds(own), test: undefined }, quiet);
        psi.useCache(cache);
        await psi.answer('train', new Uint8Array(0));
        return psi;
      });
      const labelPart = await timed(async () => {
        const psi = ownPart.value;
        const answer = await psi.answer('train', c.value.psi.points.slice());
        psi.settle();
        return { answer, cost: psi.costs.get('train') };
      });
      const p = { value: labelPart.value, wall: ownPart.wall + labelPart.wall, cpu: ownPart.cpu + labelPart.cpu, own: ownPart.wall, label: labelPart.wall };
      clearInterval(sampler);
      const { coordinator } = c.value;
      const m = await timed(async () => {
        const whole = (b) => {
          const into = new Uint8Array(b.length);
          b.readAt(0, into);
          return into;
        };
        return coordinator.match('party', { type: 'ids', jobId: 'bench', set: 'train', points: whole(p.value.answer.points), labelPoints: whole(p.value.answer.labelPoints) }, () => undefined);
      });
      if (m.value.positions.some((q) => q < 0)) throw new Error('an id did not match');
      // The coordinator writes its cache once the job has its rows (after the alignment).
      const save = await timed(() => coordinator.saveCache('party', true));
      return { c, p, m, save, rise: rssPeak - rss0, work: coordinator.report().ids };
    };
    await job(n, false);
    const w = await job(n + extra, true);
    const total = w.c.wall + w.p.wall + w.m.wall;
    // As the processes run it, on two machines: the party's own points beside the coordinator's label points.
    const critical = Math.max(w.c.wall, w.p.own) + w.p.label + w.m.wall;
    console.log(
      `PSI caches warm, ${n.toExponential(0)} ids known and ${extra.toLocaleString('en')} new at both sides: coordinator label points ${w.c.wall.toFixed(2)} s, party ${w.p.wall.toFixed(2)} s ` +
        `(its own points ${w.p.own.toFixed(2)} s, blinding the label points ${w.p.label.toFixed(2)} s; blinded ${w.p.value.cost.blinded.toLocaleString('en')}, reused ${w.p.value.cost.reused.toLocaleString('en')}; resident memory up to ${(w.rise / 2 ** 20).toFixed(0)} MB above its start), ` +
        `coordinator match ${w.m.wall.toFixed(2)} s (the coordinator in all blinded ${w.work.blinded.toLocaleString('en')} ids and reused ${w.work.reused.toLocaleString('en')})`,
    );
    console.log(`  the alignment: ${critical.toFixed(2)} s with the party's own points beside the coordinator's label points (as the processes run it), ${total.toFixed(2)} s one side after another; CPU ${(w.c.cpu + w.p.cpu + w.m.cpu).toFixed(1)} s; then the coordinator writes its cache in ${w.save.wall.toFixed(2)} s`);
    const size = (d) => PsiCache.open(d, { tables: d === cDir ? ['own', 'peer'] : ['own'], maxAgeDays: 1 }).cache.bytesOnDisk();
    console.log(`caches on disk for ${(n + extra).toLocaleString('en')} ids: the party's ${(size(pDir) / 2 ** 20).toFixed(1)} MiB, the coordinator's for this party ${(size(cDir) / 2 ** 20).toFixed(1)} MiB`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (values['psi-warm']) for (const n of values.sizes.split(',').map(Number)) await warm(n, Math.round(n / 100));
