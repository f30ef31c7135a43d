// What an attacker on the network, never admitted to the job, can do to a running coordinator
// (a real child process), with the attackers as raw `net` and `ws` clients in this test: hold
// memory before saying hello, flood the log, lock real parties out of the pending slots, hang
// plain HTTP requests, learn the configured party ids, and slip a msgpackr record past the
// decoder. The memory and flood tests report the coordinator's RSS (VmRSS) before and after.
// What a party inside the job can do: attacks-job.test.ts.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { type Socket, createConnection } from 'node:net';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import {
  HTTP_HEADERS_TIMEOUT_MS,
  HTTP_TIMEOUT_CHECK_MS,
  MAX_PENDING_CONNECTIONS,
  PRE_HELLO_MAX_BYTES,
  UNAUTHENTICATED_MAX_BYTES,
  WARNINGS_PER_SECOND,
} from '@admm-share/coordinator';
import { CloseCodes, PROTOCOL_VERSION, encode } from '@admm-share/protocol';
import { ROUNDS, cleanObjective, coordinator, dataset, hostileParty, listening, party } from './attacks-support.js';
import { BIN, killAll, run, tempDir } from './procs.js';

after(killAll);

const MiB = 1024 * 1024;

function rssKiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]);
}

// ---------------------------------------------------------------------------------------
// Raw WebSocket clients: the handshake by hand, then whatever bytes the attacker likes.

/** A TCP connection that has completed the WebSocket upgrade (the 101 response is read). */
function rawUpgrade(port: number, localAddress?: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createConnection({ port, host: '127.0.0.1', ...(localAddress ? { localAddress } : {}) });
    s.setNoDelay(true);
    s.on('error', () => undefined);
    s.write(`GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${Buffer.alloc(16, 7).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    let head = '';
    const onData = (d: Buffer) => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      s.off('data', onData);
      if (head.startsWith('HTTP/1.1 101')) resolve(s);
      else reject(new Error(`upgrade refused: ${head.split('\r\n')[0]}`));
    };
    s.on('data', onData);
  });
}

/** A client frame header (binary, final) for a payload of `length` bytes, masked with the zero key. */
function frameHeader(length: number): Buffer {
  const h = Buffer.alloc(14);
  h[0] = 0x82;
  h[1] = 0x80 | 127;
  h.writeBigUInt64BE(BigInt(length), 2);
  return h; // bytes 10-13: the mask, zero, so the payload goes as it is
}

const frame = (payload: Buffer): Buffer => Buffer.concat([frameHeader(payload.length), payload]);

const CHUNK = Buffer.alloc(MiB, 0x41);

/**
 * Send the header of a `length`-byte frame and all of it but the last byte, as fast as the
 * coordinator reads. Resolves 'cut off' if the coordinator drops the connection first, or
 * 'sent' when every byte has been handed to the kernel.
 */
function almostCompleteFrame(s: Socket, length: number): Promise<'cut off' | 'sent'> {
  return new Promise((resolve) => {
    s.once('close', () => resolve('cut off'));
    s.write(frameHeader(length));
    let left = length - 1;
    const pump = () => {
      while (left > 0 && !s.destroyed) {
        const n = Math.min(left, CHUNK.length);
        left -= n;
        const last = left === 0;
        const ok = s.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n), last ? () => resolve('sent') : undefined);
        if (!ok && !last) return void s.once('drain', pump);
      }
    };
    pump();
  });
}

/**
 * Resolves when the socket closes, or with 'open' after `ms` (a deadline, not a pause: it only
 * bounds the wait). What still arrives is read and dropped, so that the end is seen.
 */
function closedWithin(s: Socket, ms: number): Promise<'closed' | 'open'> {
  if (s.destroyed) return Promise.resolve('closed');
  s.resume();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('open'), ms);
    s.once('close', () => {
      clearTimeout(timer);
      resolve('closed');
    });
  });
}

function labelsFile(dir: string, rows: number): string {
  const path = join(dir, 'labels.csv');
  const lines = ['id,label'];
  for (let i = 0; i < rows; i++) lines.push(`${i},${i % 2}`);
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

test('unauthenticated memory is bounded on the raw socket: almost complete maxPayload frames before hello, and beyond the pending cap', async (t) => {
  const dir = tempDir(t);
  // 100k label rows: a maxPayload of about 16 MB, the frame size ws would buffer before hello.
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', labelsFile(dir, 100_000), '--parties', 'a,b', '--out', join(dir, 'out'), '--hello-timeout', '60000']);
  t.after(() => coord.kill());
  const { port, maxPayload, pid } = await listening(coord);
  assert.ok(maxPayload > 15 * MiB, `maxPayload ${maxPayload}`);
  const sockets: Socket[] = [];
  t.after(() => sockets.forEach((s) => s.destroy()));
  const connect = async (n: number) => {
    const batch = await Promise.all(Array.from({ length: n }, () => rawUpgrade(port)));
    sockets.push(...batch);
    return batch;
  };

  const before = rssKiB(pid);
  // 20 connections waiting for their hello, each sending a frame of maxPayload - 64 bytes but its last byte.
  const pending = await Promise.all((await connect(20)).map((s) => almostCompleteFrame(s, maxPayload - 64)));
  const afterPending = rssKiB(pid);
  // Every slot taken by a silent connection, then 20 more connections with large frames.
  const silent = await connect(MAX_PENDING_CONNECTIONS);
  const beyond = await Promise.all((await connect(20)).map((s) => almostCompleteFrame(s, maxPayload - 64)));
  const afterBeyond = rssKiB(pid);
  t.diagnostic(`coordinator RSS: ${before} KiB before, ${afterPending} KiB after 20 pending connections with almost complete ${maxPayload}-byte frames, ${afterBeyond} KiB after ${MAX_PENDING_CONNECTIONS} silent ones and 20 more with large frames (bound ${UNAUTHENTICATED_MAX_BYTES} bytes)`);

  assert.deepEqual(new Set(pending), new Set(['cut off']), 'every pending connection is cut off at its byte limit');
  assert.deepEqual(new Set(beyond), new Set(['cut off']), 'every connection beyond the cap is cut off too');
  // The bound on what unauthenticated peers can hold, plus room for the process's own
  // allocations (connection objects, heap growth between two readings).
  const allowanceKiB = (UNAUTHENTICATED_MAX_BYTES + 24 * MiB) / 1024;
  assert.ok(afterPending - before < allowanceKiB, `RSS grew by ${afterPending - before} KiB with 20 pending connections (allowed ${allowanceKiB})`);
  assert.ok(afterBeyond - before < allowanceKiB, `RSS grew by ${afterBeyond - before} KiB beyond the cap (allowed ${allowanceKiB})`);
  // 20 large frames got in beyond the cap: 20 silent connections gave way (and were dropped).
  const evicted = await Promise.all(silent.map((s) => closedWithin(s, 2000)));
  assert.equal(evicted.filter((e) => e === 'closed').length, 20);
  const refusals = coord.records.filter((r) => r.msg === 'closing connection');
  assert.ok(refusals.some((r) => r.close === CloseCodes.invalid.code && /bytes before hello \(limit 2048\)/.test(String(r.detail))), 'the byte limit is named in the log');
  assert.equal(PRE_HELLO_MAX_BYTES, 2048);
});

test('a refused connection is dropped at once and nothing more it sends is read; a flood of refusals is a few log lines', async (t) => {
  const dir = tempDir(t);
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', labelsFile(dir, 1000), '--parties', 'a,b', '--out', join(dir, 'out'), '--hello-timeout', '60000']);
  t.after(() => coord.kill());
  const { port, pid } = await listening(coord);

  // One connection: a bad frame before hello, then 20,000 frames of 8 bytes, never answering the close.
  const s = await rawUpgrade(port);
  t.after(() => s.destroy());
  const started = performance.now();
  s.write(frame(Buffer.from([0x93, 1, 2, 3])));
  const tiny = frame(Buffer.from([0x93, 1, 2, 3, 4, 5, 6, 7]));
  s.write(Buffer.concat(Array.from({ length: 20_000 }, () => tiny)));
  assert.equal(await closedWithin(s, 5000), 'closed', 'the coordinator drops a refused connection (a polite close waits 30 s for the reply)');
  t.diagnostic(`refused connection dropped after ${Math.round(performance.now() - started)} ms`);
  await coord.waitFor((r) => r.msg === 'closing connection');

  // 2,000 connections, each sending one bad frame.
  const CONNECTIONS = 2000;
  const before = rssKiB(pid);
  const floodStart = performance.now();
  const bad = [Buffer.from([0x93, 1, 2, 3]), Buffer.from([0xc1]), encode({ type: 'evaluate', jobId: 'x', round: 1 })];
  for (let wave = 0; wave < CONNECTIONS / 100; wave++)
    await Promise.all(
      Array.from(
        { length: 100 },
        (_, i) =>
          new Promise<void>((resolve) => {
            const ws = new WebSocket(`ws://127.0.0.1:${port}`);
            ws.on('error', () => undefined);
            ws.on('open', () => ws.send(bad[i % bad.length]));
            ws.on('close', () => resolve());
          }),
      ),
    );
  const floodSeconds = (performance.now() - floodStart) / 1000;
  const after = rssKiB(pid);
  // Every refusal is accounted for: logged, or counted in a 'warnings suppressed' line.
  let accounted = 0;
  await coord.waitFor((r) => {
    if (r.msg === 'closing connection') accounted++;
    if (r.msg === 'warnings suppressed') accounted += r.suppressed as number;
    return accounted >= CONNECTIONS + 1;
  }, 'every refusal logged or counted');
  const logged = coord.records.filter((r) => r.msg === 'closing connection').length;
  const summaries = coord.records.filter((r) => r.msg === 'warnings suppressed');
  t.diagnostic(`coordinator RSS: ${before} KiB before, ${after} KiB after ${CONNECTIONS} refused connections in ${floodSeconds.toFixed(1)} s: ${logged} warnings logged, ${summaries.length} summary lines`);
  // Per kind (here: the close codes of the bad frames) and second, WARNINGS_PER_SECOND lines and one summary.
  const kinds = new Set(coord.records.filter((r) => r.msg === 'closing connection').map((r) => r.close)).size;
  const windows = Math.ceil(floodSeconds) + 2;
  assert.ok(logged <= WARNINGS_PER_SECOND * windows * kinds, `${logged} 'closing connection' lines of ${kinds} kinds for ${CONNECTIONS} refusals in ${floodSeconds} s`);
  assert.ok(summaries.length > 0 && summaries.length <= windows * kinds, `${summaries.length} summary lines`);
  // Nothing is kept per refused connection; the growth is 2,000 connections' objects awaiting collection.
  assert.ok(after - before < 64 * 1024, `RSS grew by ${after - before} KiB`);
});

// ---------------------------------------------------------------------------------------
// The pending slots held by silent connections, while real parties join a real job.

/**
 * `count` WebSocket clients that never say hello, each resolving `ready` once it has its
 * challenge (it then holds a pending slot). With `refill`, one that is made to give way
 * connects again `refill` ms later, so the slots stay full.
 */
function silentFlood(port: number, count: number, opts: { localAddress?: string; refill?: number } = {}) {
  let stopped = false;
  const closes: number[] = [];
  const open = new Set<WebSocket>();
  const connect = (): Promise<void> =>
    new Promise((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}`, opts.localAddress ? { localAddress: opts.localAddress } : {});
      open.add(ws);
      ws.on('error', () => undefined);
      ws.once('message', () => resolve());
      ws.on('close', (code) => {
        open.delete(ws);
        closes.push(code);
        resolve();
        if (!stopped && opts.refill !== undefined) setTimeout(() => void connect(), opts.refill);
      });
    });
  const ready = Promise.all(Array.from({ length: count }, connect));
  return {
    ready,
    closes,
    stop() {
      stopped = true;
      for (const ws of open) ws.terminate();
    },
  };
}

test(`${MAX_PENDING_CONNECTIONS} silent connections in every pending slot do not lock the parties out: the oldest gives way and the job completes with the clean objective`, async (t) => {
  const dir = tempDir(t);
  const { files } = dataset(dir);
  const expected = await cleanObjective(dir, files);
  const out = join(dir, 'flooded');
  const coord = coordinator(files, out, ['--hello-timeout', '120000']);
  const { port } = await listening(coord);
  // From the parties' own address: only age tells them apart.
  const flood = silentFlood(port, MAX_PENDING_CONNECTIONS);
  t.after(() => flood.stop());
  await flood.ready;
  const parties = files.parties.map((_, m) => party(files, m, port, out));
  // The parties first: a party that is locked out exits (69) while the coordinator waits on.
  for (const p of [...parties, coord]) assert.equal((await p.exit).code, 0, p.stderr());
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.objective, expected, 'the same job, the same result');
  // The first party took the oldest silent connection's slot (4014); once it had said hello that slot was free again for the next.
  assert.ok(flood.closes.filter((c) => c === CloseCodes.busy.code).length >= 1, `closes: ${flood.closes.join(',')}`);
});

test('parties join, and one killed with -9 rejoins, while a flood that refills itself holds every pending slot; the job ends with the uninterrupted objective', async (t) => {
  const dir = tempDir(t);
  const { files } = dataset(dir);
  const expected = await cleanObjective(dir, files);
  const out = join(dir, 'rejoin');
  const coord = coordinator(files, out, ['--hello-timeout', '120000']);
  const { port } = await listening(coord);
  // Another address (all of 127/8 is loopback): it may hold every slot, but it only ever
  // displaces itself, however fast it comes back.
  const flood = silentFlood(port, MAX_PENDING_CONNECTIONS, { localAddress: '127.0.0.2', refill: 20 });
  t.after(() => flood.stop());
  await flood.ready;
  const parties = files.parties.map((_, m) => party(files, m, port, out));
  // A party that was locked out exits: fail then, rather than wait for a round that never comes.
  const lockedOut = Promise.race(parties.map((p) => p.exit.then(({ code }) => assert.fail(`a party exited (${code}) before round 5: ${p.stderr()}`))));
  await Promise.race([coord.waitFor((r) => r.msg === 'round' && (r.round as number) >= 5, 'round 5'), lockedOut]);
  parties[1].child.kill('SIGKILL');
  await parties[1].exit;
  await coord.waitFor((r) => r.msg === 'party disconnected; waiting for it to rejoin', 'the coordinator noticing');
  const restarted = party(files, 1, port, out);
  for (const p of [restarted, parties[0], parties[2], coord]) assert.equal((await p.exit).code, 0, p.stderr());
  flood.stop();
  await coord.waitFor((r) => r.msg === 'party rejoined');
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
  assert.equal(summary.rounds, Number(ROUNDS));
  assert.ok(Math.abs(summary.objective - expected) <= 1e-9 * expected, `objective ${summary.objective} vs ${expected}`);
  // The parties' connections took slots from the flood (at least the rejoin: by then it had refilled).
  assert.ok(flood.closes.filter((c) => c === CloseCodes.busy.code).length >= 1, `closes: ${flood.closes.join(',')}`);
});

test('a plain HTTP request gets 426 Upgrade Required at once; a client that never finishes its headers is cut off', async (t) => {
  const dir = tempDir(t);
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', labelsFile(dir, 100), '--parties', 'a,b', '--out', join(dir, 'out')]);
  t.after(() => coord.kill());
  const { port } = await listening(coord);
  const started = performance.now();
  const res = await new Promise<{ status: number; body: string; upgrade: string | undefined }>((resolve, reject) => {
    const req = httpGet(`http://127.0.0.1:${port}/`, (r) => {
      let body = '';
      r.on('data', (d: Buffer) => (body += d.toString()));
      r.on('end', () => resolve({ status: r.statusCode!, body, upgrade: r.headers.upgrade }));
    });
    req.on('error', reject);
    // A deadline, not a pause: before, the request was held for Node's 300 s.
    req.setTimeout(5000, () => req.destroy(new Error('no answer within 5 s')));
  });
  assert.equal(res.status, 426);
  assert.equal(res.upgrade, 'websocket');
  assert.match(res.body, /WebSocket/);
  assert.ok(performance.now() - started < 5000);
  // Half a request, never finished: dropped after the headers timeout (and one check interval).
  const slow = createConnection({ port, host: '127.0.0.1' });
  t.after(() => slow.destroy());
  slow.on('error', () => undefined);
  slow.write('GET / HTTP/1.1\r\nHost: x\r\n');
  const limit = HTTP_HEADERS_TIMEOUT_MS + 2 * HTTP_TIMEOUT_CHECK_MS + 2000;
  const slowStart = performance.now();
  assert.equal(await closedWithin(slow, limit), 'closed', `half a request still open after ${limit} ms`);
  t.diagnostic(`incomplete request dropped after ${Math.round(performance.now() - slowStart)} ms`);
});

/** MessagePack by hand, for the bytes msgpackr writes with records on (this package does not depend on msgpackr). */
function packRecordHello(fields: Record<string, string | number | boolean | null>): Buffer {
  const str = (v: string) => Buffer.concat([Buffer.from([0xa0 | v.length]), Buffer.from(v)]);
  const value = (v: string | number | boolean | null) =>
    v === null ? Buffer.from([0xc0]) : typeof v === 'boolean' ? Buffer.from([v ? 0xc3 : 0xc2]) : typeof v === 'string' ? str(v) : Buffer.from([v]);
  const keys = Object.keys(fields);
  // fixext 1, type 0x72 ('r'): a record definition with id 0x40, its keys, then the first record's values.
  return Buffer.concat([Buffer.from([0xd4, 0x72, 0x40, 0x90 | keys.length]), ...keys.map(str), ...Object.values(fields).map(value)]);
}

test('an unknown party id is refused with 4005 without learning the configured ids; a hello made of a msgpackr record is malformed (4002)', async (t) => {
  const dir = tempDir(t);
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', labelsFile(dir, 100), '--parties', 'alice-bank,bob-insurer', '--out', join(dir, 'out')]);
  t.after(() => coord.kill());
  const { port } = await listening(coord);
  const unknown = await hostileParty(port, { id: 'mallory', ids: ['0'] }).closed;
  assert.equal(unknown.code, CloseCodes.unknownParty.code);
  assert.match(unknown.reason, /'mallory' is not a party of this job/);
  assert.doesNotMatch(unknown.reason, /alice|bob/);
  assert.doesNotMatch(JSON.stringify(coord.records.filter((r) => r.msg === 'closing connection')), /alice|bob/);

  const hello = { type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: 'alice-bank', jobId: null, features: 3, trainRows: 10, testRows: 0, proof: null, noise: false, model: null };
  const recorded = await hostileParty(port, { id: 'alice-bank', ids: ['0'], hello: () => packRecordHello(hello) }).closed;
  assert.equal(recorded.code, CloseCodes.malformed.code, recorded.reason);
  assert.match(recorded.reason, /record definition/);
  assert.ok(!coord.records.some((r) => r.msg === 'party joined'), 'nobody joined');
});
