#!/usr/bin/env node
// The cost of the private set intersection (docs/privacy.md, section 11.5): each side's
// work for one party whose n ids all match n label ids, with the real classes the processes
// run (LabelPsi at the coordinator, PartyPsi at a party) over every core, one side at a time
// (as on two machines). Prints seconds and ids per second per side, how far resident memory
// rose while the party answered, and each side's floor: what libsodium's own primitives cost
// for the same ids on the same cores (per id and side: SHA-512 of the id, two Elligator maps
// and an Edwards addition to hash it onto the group, and two X25519 to blind it and the other
// side's point), with the ratio of the measured time to it; asserts nothing.
//   npm run bench:psi [-- --sizes 100000,1000000]
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { PsiTeam, packIds } from '@admm-share/core';
import { LabelPsi } from '@admm-share/coordinator';
import { PartyPsi } from '@admm-share/party';

const { values } = parseArgs({ options: { sizes: { type: 'string', default: '100000,1000000' } } });
const quiet = () => () => undefined;
const seconds = (t0) => (performance.now() - t0) / 1000;
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
const sodium = createRequire(new URL('../packages/core/package.json', import.meta.url))('sodium-native');
const bytes = (n, fill) => Buffer.alloc(n, fill);
const [scalar, uniform, edwards, other, out, digest] = [bytes(32, 7), bytes(32, 9), bytes(32), bytes(32), bytes(32), bytes(64)];
sodium.crypto_core_ed25519_from_uniform(edwards, uniform);
sodium.crypto_core_ed25519_from_uniform(other, bytes(32, 3));
const montgomery = bytes(32);
sodium.crypto_scalarmult_base(montgomery, scalar);
const cost = {
  sha512: microseconds((i) => sodium.crypto_hash_sha512(digest, Buffer.from(`customer-${i}`))),
  map: microseconds(() => sodium.crypto_core_ed25519_from_uniform(out, uniform)),
  add: microseconds(() => sodium.crypto_core_ed25519_add(out, edwards, other)),
  x25519: microseconds(() => sodium.crypto_scalarmult(out, scalar, montgomery)),
};
const perId = cost.sha512 + 2 * cost.map + cost.add + 2 * cost.x25519;
console.log(
  `libsodium here, one thread: SHA-512 ${cost.sha512.toFixed(1)} us, Elligator map ${cost.map.toFixed(1)} us, Edwards add ${cost.add.toFixed(1)} us, X25519 ${cost.x25519.toFixed(1)} us; ` +
    `floor per id and side ${perId.toFixed(0)} us, ${((1e6 * perId) / 1e6 / cores).toFixed(1)} s for 1e6 ids on ${cores} cores`,
);
console.log(`ECDH PSI over X25519, ${cores} cores, one party, every id in the intersection`);
console.log('ids        coordinator: label points   party: answer   coordinator: match   per side (ids/s)');
for (const n of values.sizes.split(',').map(Number)) {
  const labels = Array.from({ length: n }, (_, i) => `customer-${i}`);
  const own = Array.from({ length: n }, (_, i) => `customer-${n - 1 - i}`);
  let t0 = performance.now();
  const coordinator = new LabelPsi(pool, { train: labels, test: undefined }, quiet);
  const points = await coordinator.points('train');
  const label = seconds(t0);
  t0 = performance.now();
  // Resident memory (this process and its worker threads) sampled while the party answers.
  const rss0 = process.memoryUsage().rss;
  let rssPeak = rss0;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 50);
  const answer = await new PartyPsi(pool, { train: packIds(own), test: undefined }, quiet).answer('train', points);
  clearInterval(sampler);
  const party = seconds(t0);
  t0 = performance.now();
  // The answer as the party sends it, read back from its temporary files.
  const whole = (b) => {
    const into = new Uint8Array(b.length);
    b.readAt(0, into);
    return into;
  };
  const { positions } = await coordinator.match('party', { type: 'ids', jobId: 'bench', set: 'train', points: whole(answer.points), labelPoints: whole(answer.labelPoints) }, () => undefined);
  const match = seconds(t0);
  if (positions.some((p) => p < 0)) throw new Error('an id did not match');
  const side = (s) => Math.round(n / s).toLocaleString('en');
  const floor = (n * perId) / 1e6 / cores;
  console.log(
    `${n.toExponential(0).padEnd(10)} ${label.toFixed(1).padStart(10)} s ${party.toFixed(1).padStart(20)} s ${match.toFixed(1).padStart(14)} s      ` +
      `party ${side(party)}, coordinator ${side(label + match)}; party's answer: resident memory up to ${((rssPeak - rss0) / 2 ** 20).toFixed(0)} MB above its start`,
  );
  console.log(`${''.padEnd(10)} floor of each side ${floor.toFixed(1)} s: party ${(party / floor).toFixed(2)}x, coordinator ${((label + match) / floor).toFixed(2)}x`);
}
