#!/usr/bin/env node
// A real job over a wide-area network's bandwidth and latency: a9a (split among 2 or 3 parties)
// trained by a real coordinator and party processes whose every connection goes through a
// userspace relay (scripts/lib/wan-relay.mjs) of 100 Mbit/s with 50 ms each way (SecretFlow's
// WAN setting), each party's connection its own link. Prints the end-to-end time, the rounds,
// the bytes each way, and the floor: the busiest link's bytes over the bandwidth plus its round
// trips times the RTT; and the time over the floor. Prints figures; asserts nothing.
//   npm run bench:wan [-- --parties 3 --rounds 100 --mbit 100 --delay-ms 50]
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { binaryLabels, readLibsvm } from '../packages/core/dist/index.js';
import { writeVerticalSplit } from '../packages/admm-share/dist/index.js';
import { wanRelay } from './lib/wan-relay.mjs';

const { values } = parseArgs({
  options: {
    parties: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '100' },
    mbit: { type: 'string', default: '100' },
    'delay-ms': { type: 'string', default: '50' },
  },
});
const parties = Number(values.parties);
const mbit = Number(values.mbit);
const delayMs = Number(values['delay-ms']);
if (![2, 3].includes(parties) || !(mbit > 0) || !(delayMs >= 0)) {
  console.error('bench:wan: --parties 2 or 3, --mbit > 0, --delay-ms >= 0');
  process.exit(64);
}
const root = new URL('..', import.meta.url).pathname;
const a9a = [join(root, 'data', 'a9a', 'a9a'), join(root, '..', 'shared', 'data', 'a9a', 'a9a')].find(existsSync);
if (!a9a) {
  console.error('bench:wan: no a9a (data/a9a/a9a)');
  process.exit(66);
}
const bin = (pkg, name) => join(root, 'packages', pkg, 'bin', name);

const dir = mkdtempSync(join(tmpdir(), 'bench-wan-'));
const t = readLibsvm(a9a, { ids: 'auto', features: 123 });
const train = { ids: t.ids, X: t.X, y: binaryLabels({ file: a9a, ids: t.ids, raw: t.firstTokens, lines: t.lines }).y };
const split = parties === 2 ? [66, 57] : [41, 41, 41];
const files = writeVerticalSplit(join(dir, 'data'), split, train);

/** A process whose JSON log lines on stdout are passed to `onLine`. */
function start(file, args, onLine = () => undefined) {
  const child = spawn(process.execPath, [file, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  createInterface({ input: child.stdout }).on('line', (l) => {
    try {
      onLine(JSON.parse(l));
    } catch {
      // not a log line
    }
  });
  const exit = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exit, stderr: () => stderr };
}

const started = performance.now();
const out = join(dir, 'out');
let listening;
const port = new Promise((resolve) => (listening = resolve));
/** The relay's counts when the coordinator had aligned the samples: what the rounds moved is the rest. */
let aligned;
const coordinator = start(
  bin('coordinator', 'admm-coordinator.js'),
  ['--port', '0', '--labels', files.labels, '--parties', files.parties.map((p) => p.id).join(','), '--out', out, '--rounds', values.rounds, '--job', 'bench-wan'],
  (r) => {
    if (r.msg === 'listening') listening(r.port);
    else if (r.msg === 'samples aligned') aligned = relay.links.map((l) => ({ ...l }));
  },
);
// Assigned before any party connects: the coordinator's log only refers to it from then on.
const relay = await wanRelay(await Promise.race([port, coordinator.exit.then((c) => Promise.reject(new Error(`coordinator exited ${c}: ${coordinator.stderr()}`)))]), { mbit, delayMs });
const procs = files.parties.map((f) =>
  start(bin('party', 'admm-party.js'), ['--coordinator', `ws://127.0.0.1:${relay.port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--threads', '0', '--model', join(out, `model-${f.id}.json`)]),
);
const codes = await Promise.all([coordinator, ...procs].map((p) => p.exit));
const seconds = (performance.now() - started) / 1000;
await relay.close();
if (codes.some((c) => c !== 0)) {
  console.error(`bench:wan: exit codes ${codes.join(', ')}\n${[coordinator, ...procs].map((p) => p.stderr()).join('')}`);
  process.exit(70);
}
const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
rmSync(dir, { recursive: true, force: true });

const mb = (b) => `${(b / 1e6).toFixed(2)} MB`;
const up = relay.links.reduce((s, l) => s + l.up, 0);
const down = relay.links.reduce((s, l) => s + l.down, 0);
const busiest = relay.links.reduce((a, l) => (l.up + l.down > a.up + a.down ? l : a));
const rtt = (2 * delayMs) / 1000;
const transfer = ((busiest.up + busiest.down) * 8) / (mbit * 1e6);
const floor = transfer + busiest.roundTrips * rtt;
// After the alignment (set-up and rounds): the busiest link's bytes and round trips then, against the coordinator's time then.
const before = aligned?.[relay.links.indexOf(busiest)] ?? { up: 0, down: 0, roundTrips: 0 };
const roundBytes = busiest.up + busiest.down - before.up - before.down;
const roundTrips = busiest.roundTrips - before.roundTrips;
const roundsFloor = (roundBytes * 8) / (mbit * 1e6) + roundTrips * rtt;
console.log(`a9a (${train.ids.length} rows, split ${split.join(' | ')}), ${parties} parties, node ${process.version}; every connection through a relay of ${mbit} Mbit/s each way and ${delayMs} ms each way (RTT ${rtt * 1000} ms)`);
console.log(
  `end to end: ${seconds.toFixed(1)} s from starting the coordinator to the last exit (the coordinator's own: total ${summary.seconds.total.toFixed(1)} s, ` +
    `alignment ${summary.alignment.seconds?.toFixed(1)} s from its start, set-up ${summary.seconds.setup.toFixed(1)} s, training ${summary.seconds.training.toFixed(1)} s, ${(summary.seconds.perRound * 1000).toFixed(0)} ms a round)`,
);
console.log(`rounds: ${summary.rounds} (${summary.reason}); connections: ${relay.links.length}`);
console.log(`bytes: ${mb(up)} party to coordinator, ${mb(down)} coordinator to party (all links); busiest link ${mb(busiest.up)} up, ${mb(busiest.down)} down, ${busiest.roundTrips} round trips`);
console.log(`floor (busiest link): ${mb(busiest.up + busiest.down)} / ${mbit} Mbit/s = ${transfer.toFixed(2)} s + ${busiest.roundTrips} round trips x ${rtt * 1000} ms = ${(busiest.roundTrips * rtt).toFixed(2)} s: ${floor.toFixed(2)} s`);
console.log(`ratio: end to end ${(seconds / floor).toFixed(2)} x the floor; the coordinator's total ${(summary.seconds.total / floor).toFixed(2)} x`);
const afterAlignment = summary.seconds.total - (summary.alignment.seconds ?? 0);
console.log(
  `after the alignment (set-up and rounds): ${mb(roundBytes)} and ${roundTrips} round trips on the busiest link, floor ${roundsFloor.toFixed(2)} s; ` +
    `the coordinator took ${afterAlignment.toFixed(1)} s, ${(afterAlignment / roundsFloor).toFixed(2)} x`,
);
