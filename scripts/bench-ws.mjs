#!/usr/bin/env node
// What moving a round's vectors costs with nothing else: a WebSocket server process that sends
// every message back, and a client process (this one) that sends one message of the size of a
// round's vector and waits for it, over loopback, with the product's settings (no compression;
// the client's frames with a zero masking key, as a party's). Prints the median round trip and
// the CPU time both processes spent on it: the least a job's processes spend a round to move
// the same bytes, whatever the job does besides (docs/scaling.md, "The floor on two cores").
// Prints figures; asserts nothing.
//   npm run bench:ws [-- --sizes 260488,8000000 --trips 50]
import { fork } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { WebSocket, WebSocketServer } from 'ws';

const { values } = parseArgs({
  options: {
    serve: { type: 'boolean', default: false },
    // a9a's vector (32,561 values) and a million rows' (8 bytes a value)
    sizes: { type: 'string', default: '260488,8000000' },
    trips: { type: 'string', default: '50' },
  },
});

const cpuMs = (since) => {
  const u = process.cpuUsage(since);
  return (u.user + u.system) / 1000;
};

if (values.serve) {
  // The server: every message back; its CPU time since the last 'cpu' request on demand.
  const server = createServer();
  const wss = new WebSocketServer({ server, perMessageDeflate: false, maxPayload: 1 << 30 });
  let since = process.cpuUsage();
  wss.on('connection', (ws) => ws.on('message', (data) => ws.send(data)));
  process.on('message', (m) => {
    if (m === 'cpu') {
      process.send({ cpu: cpuMs(since) });
      since = process.cpuUsage();
    } else if (m === 'exit') process.exit(0);
  });
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
} else {
  const child = fork(fileURLToPath(import.meta.url), ['--serve']);
  const next = () => new Promise((res) => child.once('message', res));
  const { port } = await next();
  const ws = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false, maxPayload: 1 << 30, generateMask: (mask) => mask.fill(0) });
  await new Promise((res, rej) => ws.once('open', res).once('error', rej));
  const trip = (buf) => new Promise((res) => ws.once('message', res).send(buf));
  const trips = Number(values.trips);
  console.log(`one WebSocket client and one server process over loopback, node ${process.version}; ${trips} round trips a size, after 5 of warm-up`);
  for (const size of values.sizes.split(',').map(Number)) {
    const buf = Buffer.alloc(size, 1);
    for (let i = 0; i < 5; i++) await trip(buf);
    child.send('cpu');
    await next();
    const since = process.cpuUsage();
    const ms = [];
    for (let i = 0; i < trips; i++) {
      const t0 = performance.now();
      await trip(buf);
      ms.push(performance.now() - t0);
    }
    const client = cpuMs(since) / trips;
    child.send('cpu');
    const server = (await next()).cpu / trips;
    ms.sort((a, b) => a - b);
    const mb = size / 1e6;
    console.log(
      `${mb.toFixed(2)} MB each way: median ${ms[ms.length >> 1].toFixed(2)} ms a round trip; CPU a round trip: client ${client.toFixed(2)} ms, server ${server.toFixed(2)} ms, ` +
        `both ${(client + server).toFixed(2)} ms (${((client + server) / (2 * mb)).toFixed(2)} ms a MB moved)`,
    );
  }
  ws.close();
  child.send('exit');
}
