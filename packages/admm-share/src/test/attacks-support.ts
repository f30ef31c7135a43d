// What the attack tests share (attacks-admission.test.ts before a party is admitted,
// attacks-job.test.ts during the job): the coordinator under attack and the honest parties as
// real child processes on a synthetic data set, and a hostile party as a raw `ws` client.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { syntheticDataset } from '@admm-share/core';
import { PROTOCOL_VERSION, type Setup, decode, encode, validateCoordinatorMessage } from '@admm-share/protocol';
import { writeVerticalSplit } from '../split.js';
import { psiAnswer } from './psi-peer.js';
import { BIN, type Proc, run } from './procs.js';

export async function listening(coord: Proc): Promise<{ port: number; maxPayload: number; pid: number }> {
  const r = (await coord.waitFor((x) => x.msg === 'listening')) as { port: number; maxPayload: number };
  return { port: r.port, maxPayload: r.maxPayload, pid: coord.child.pid! };
}

// ---------------------------------------------------------------------------------------
// Real jobs: a synthetic data set split over three parties.

export function dataset(dir: string) {
  const s = syntheticDataset({ trainRows: 400, testRows: 100, seed: 'attacks-test' });
  return { s, files: writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test) };
}
export type Files = ReturnType<typeof dataset>['files'];

export const ROUNDS = '40';

export function coordinator(files: Files, out: string, extra: string[] = [], parties = files.parties.map((p) => p.id)) {
  return run(BIN.coordinator, ['--port', '0', '--labels', files.labels, '--parties', parties.join(','), '--out', out, '--rounds', ROUNDS, '--tol-abs', '0', '--tol-rel', '0', '--job', 'attack-job', ...extra]);
}

export function party(files: Files, m: number, port: number, out: string): Proc {
  const f = files.parties[m];
  return run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', f.id, '--data', f.train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, `model-${f.id}.json`), '--reconnect-timeout', '30000']);
}

export async function cleanObjective(dir: string, files: Files): Promise<number> {
  const out = join(dir, 'clean');
  const coord = coordinator(files, out);
  const { port } = await listening(coord);
  const parties = files.parties.map((_, m) => party(files, m, port, out));
  for (const p of [coord, ...parties]) assert.equal((await p.exit).code, 0, p.stderr());
  return JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).objective;
}

// ---------------------------------------------------------------------------------------
// A hostile party: a raw client that joins like a party and then does what it likes.

export interface HostileOptions {
  id: string;
  ids: readonly string[];
  /** The first bytes it sends (default: its hello, from a regular encoding). */
  hello?: (nonce: Uint8Array) => Uint8Array;
  onSetup?(ws: WebSocket, setup: Setup): void;
  onRound?(ws: WebSocket, round: number, n: number): void;
}

export function hostileParty(port: number, o: HostileOptions) {
  const ws = new WebSocket(`ws://127.0.0.1:${port}`);
  ws.on('error', () => undefined);
  let jobId = '';
  let n = 0;
  const closed = new Promise<{ code: number; reason: string; at: number }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString(), at: performance.now() })));
  ws.on('message', (data: Buffer) => {
    const msg = validateCoordinatorMessage(decode(data));
    switch (msg.type) {
      case 'challenge':
        ws.send(o.hello ? o.hello(msg.nonce) : encode({ type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: o.id, jobId: null, features: 1, trainRows: o.ids.length, testRows: 0, proof: null, noise: false, model: null }));
        break;
      case 'welcome':
        jobId = msg.jobId;
        break;
      case 'psi':
        ws.send(encode(psiAnswer(o.ids, msg)));
        break;
      case 'setup':
        n = msg.trainRows.length;
        o.onSetup?.(ws, msg);
        break;
      case 'round':
        o.onRound?.(ws, msg.round, n);
        break;
      default:
        break;
    }
  });
  return { ws, closed, jobId: () => jobId };
}
