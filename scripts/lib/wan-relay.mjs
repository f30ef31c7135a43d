// A userspace TCP relay that makes loopback look like a wide-area link (the kernel here has no
// netem): each direction of each connection is its own link of `mbit` Mbit/s, and every byte
// arrives `delayMs` after it has been sent at that rate. A chunk of n bytes leaves once the link
// has sent what came before it (n x 8 / rate later), and is delivered delayMs after that, in
// order. Counts the bytes each way and the round trips each connection needed: the times its
// traffic turned from coordinator-to-party to party-to-coordinator (a request answered).
import { createConnection, createServer } from 'node:net';

/** One direction of a link: writes `buf` to `out` at the link's rate, `delayMs` late, in order. */
function pipe(out, bitsPerMs, delayMs) {
  /** When the link has sent everything queued so far (ms, performance.now()). */
  let busyUntil = 0;
  const queue = [];
  let timer;
  /** The sender has finished: end `out` once what is queued is delivered. */
  let ending = false;
  const pump = () => {
    timer = undefined;
    const now = performance.now();
    while (queue.length > 0 && queue[0].at <= now) out.write(queue.shift().buf);
    if (queue.length > 0) timer = setTimeout(pump, queue[0].at - now);
    else if (ending) out.end();
  };
  return {
    end() {
      ending = true;
      if (timer === undefined) out.end();
    },
    send(buf) {
      const now = performance.now();
      busyUntil = Math.max(now, busyUntil) + (buf.length * 8) / bitsPerMs;
      queue.push({ at: busyUntil + delayMs, buf });
      if (timer === undefined) timer = setTimeout(pump, Math.max(0, queue[0].at - now));
    },
  };
}

/**
 * Listens on 127.0.0.1 (a free port) and relays every connection to `target` on 127.0.0.1.
 * `up` is party to coordinator (what a connection's client sends), `down` the other way.
 */
export async function wanRelay(target, { mbit = 100, delayMs = 50 } = {}) {
  const bitsPerMs = mbit * 1000;
  const links = [];
  const sockets = new Set();
  // Half-open allowed: a side that has finished sending still gets what the link holds for it.
  const server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = createConnection({ port: target, host: '127.0.0.1', allowHalfOpen: true });
    const link = { up: 0, down: 0, roundTrips: 0 };
    links.push(link);
    let last = 'up';
    const toServer = pipe(upstream, bitsPerMs, delayMs);
    const toClient = pipe(client, bitsPerMs, delayMs);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.setNoDelay(true);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    client.on('end', () => toServer.end());
    upstream.on('end', () => toClient.end());
    // A reset on one side: the other goes once the link has delivered what it holds.
    client.on('close', () => toServer.end());
    upstream.on('close', () => toClient.end());
    client.on('data', (d) => {
      link.up += d.length;
      if (last === 'down') link.roundTrips++;
      last = 'up';
      toServer.send(d);
    });
    upstream.on('data', (d) => {
      link.down += d.length;
      last = 'down';
      toClient.send(d);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    links,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
