#!/usr/bin/env node
// The cost of the private set intersection (docs/privacy.md, section 11.5): each side's
// work for one party whose n ids all match n label ids, with the real classes the processes
// run (LabelPsi at the coordinator, PartyPsi at a party) over every core, one side at a time
// (as on two machines). Prints seconds and ids per second per side, and how far resident
// memory rose while the party answered; asserts nothing.
//   npm run bench:psi [-- --sizes 100000,1000000]
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { PsiTeam } from '@admm-share/core';
import { LabelPsi } from '@admm-share/coordinator';
import { PartyPsi } from '@admm-share/party';

const { values } = parseArgs({ options: { sizes: { type: 'string', default: '100000,1000000' } } });
const quiet = () => () => undefined;
const seconds = (t0) => (performance.now() - t0) / 1000;
const pool = new PsiTeam();
console.log(`ECDH PSI over X25519, ${availableParallelism()} cores, one party, every id in the intersection`);
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
  const answer = await new PartyPsi(pool, { train: own, test: undefined }, quiet).answer('train', points);
  clearInterval(sampler);
  const party = seconds(t0);
  t0 = performance.now();
  const { positions } = await coordinator.match('party', { type: 'ids', jobId: 'bench', set: 'train', ...answer }, () => undefined);
  const match = seconds(t0);
  if (positions.some((p) => p < 0)) throw new Error('an id did not match');
  const side = (s) => Math.round(n / s).toLocaleString('en');
  console.log(
    `${n.toExponential(0).padEnd(10)} ${label.toFixed(1).padStart(10)} s ${party.toFixed(1).padStart(20)} s ${match.toFixed(1).padStart(14)} s      ` +
      `party ${side(party)}, coordinator ${side(label + match)}; party's answer: resident memory up to ${((rssPeak - rss0) / 2 ** 20).toFixed(0)} MB above its start`,
  );
}
