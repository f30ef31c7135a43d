// A coordinator scripted per connection, for the membership-probing tests (probe-*.test.ts):
// ws's WebSocketServer on port 0 with the protocol package's codec and validator. It sends the
// challenge and hands every validated message of each connection to the test's script, and
// records how each connection was closed. The party's data: the synthetic set's first block.
import { join } from 'node:path';
import { type WebSocket, WebSocketServer } from 'ws';
import { syntheticDataset } from '@admm-share/core';
import { type CoordinatorMessage, type PartyMessage, PROTOCOL_VERSION, decode, encode, validatePartyMessage } from '@admm-share/protocol';
import { writeVerticalSplit } from '../split.js';

export const JOB = 'probe-job';

export interface Conn {
  number: number;
  send(m: CoordinatorMessage): void;
  /** A message encoded once, sent again as it is (the same label points on a rejoin). */
  sendBytes(b: Uint8Array): void;
  close(code: number, reason: string): void;
  terminate(): void;
}

export interface ScriptedCoordinator {
  url: string;
  /** How each connection (from 1) was closed, by either side. */
  closes: Map<number, { code: number; reason: string }>;
  connections(): number;
  /** Resolves once connection `n` has closed. */
  closed(n: number): Promise<{ code: number; reason: string }>;
}

export async function scriptedCoordinator(t: { after(fn: () => unknown): void }, script: (conn: Conn, msg: PartyMessage) => void, port = 0): Promise<ScriptedCoordinator> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port, maxPayload: 16 << 20 });
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  t.after(() => {
    for (const c of wss.clients) c.terminate();
    wss.close();
  });
  const closes = new Map<number, { code: number; reason: string }>();
  const waiting = new Map<number, (c: { code: number; reason: string }) => void>();
  let connections = 0;
  wss.on('connection', (ws: WebSocket) => {
    ws.on('error', () => undefined);
    const number = ++connections;
    ws.on('close', (code, reason) => {
      const c = { code, reason: reason.toString() };
      closes.set(number, c);
      waiting.get(number)?.(c);
    });
    const conn: Conn = {
      number,
      send: (m) => ws.send(encode(m)),
      sendBytes: (b) => ws.send(b),
      close: (code, reason) => ws.close(code, reason),
      terminate: () => ws.terminate(),
    };
    ws.on('message', (data: Buffer) => script(conn, validatePartyMessage(decode(data))));
    conn.send({ type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce: new Uint8Array(32).fill(number) });
  });
  const { port: bound } = wss.address() as { port: number };
  return {
    url: `ws://127.0.0.1:${bound}`,
    closes,
    connections: () => connections,
    closed: (n) => {
      const c = closes.get(n);
      return c ? Promise.resolve(c) : new Promise((resolve) => waiting.set(n, resolve));
    },
  };
}

/** The party's files: 200 training rows of the synthetic set's first block. */
export function partyFiles(dir: string): { id: string; train: string } {
  const s = syntheticDataset({ trainRows: 200, testRows: 50, seed: 'probe' });
  return writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test).parties[0];
}

export function welcome(jobId = JOB): CoordinatorMessage {
  return { type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId };
}

/** `n` candidate ids no party holds, from `from` on. */
export function candidates(n: number, from = 0): string[] {
  return Array.from({ length: n }, (_, i) => `candidate-${from + i}`);
}
