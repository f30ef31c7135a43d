// The private set intersection: what the coordinator sees of a party's ids (the party's and
// the coordinator's real code, in one process, with the coordinator's key known to the test
// so that it can compute everything a coordinator can), and hostile peers over real
// processes: every new message (psi, ids) with the wrong length, a point not canonically
// encoded, the identity, or sent twice, is refused by name and the job stops with an error; a
// point of Curve25519's twist is harmless (docs/privacy.md, section 11.4.2): it matches nothing,
// and the alignment goes on without it.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import { POINT_BYTES, PsiTeam, blindPoints, hashToPoints, newPsiKey, packIds, pointKeys, syntheticDataset } from '@admm-share/core';
import { LabelPsi } from '@admm-share/coordinator';
import { PartyPsi } from '@admm-share/party';
import { type Ids, type PartyMessage, type Setup, CloseCodes, PROTOCOL_VERSION, decode, encode, encodeIdsSource, validateCoordinatorMessage, validatePartyMessage } from '@admm-share/protocol';
import { readAll } from '@admm-share/core/test-support';
import { writeVerticalSplit } from '../split.js';
import { BIN, killAll, run, tempDir } from './procs.js';
import { psiAnswer, psiLabels } from './psi-peer.js';

after(killAll);

const quiet = () => () => undefined;
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `cust-${from + i}`);

test("a coordinator restarted for the same job sends the very points it sent before (a party refuses any other set), in an order and under a key no one without the job's secret can predict", async () => {
  const pool = new PsiTeam();
  const labels = range(0, 300);
  const secret = (b: number) => () => new Uint8Array(32).fill(b);
  const pointsOf = (source: ConstructorParameters<typeof LabelPsi>[3]) => new LabelPsi(pool, { train: labels, test: undefined }, quiet, source).points('train');
  const [first, restarted, otherJob, fresh] = await Promise.all([pointsOf({ jobSecret: secret(1) }), pointsOf({ jobSecret: secret(1) }), pointsOf({ jobSecret: secret(2) }), pointsOf({})]);
  assert.deepEqual(restarted, first);
  // Another secret (another job, or a coordinator that lost its key): no point in common, as for a fresh key.
  for (const other of [otherJob, fresh]) {
    const seen = new Set(pointKeys(first));
    assert.equal(pointKeys(other).filter((k) => seen.has(k)).length, 0);
  }
  // The order is a permutation of the label rows, not the file's order: the points of the ids in
  // file order, under the same key, are the same set in another sequence.
  const inFileOrder = blindPoints(hashToPoints(labels), createHmac('sha256', new Uint8Array(32).fill(1)).update('admm-share psi key').digest());
  assert.deepEqual(new Set(pointKeys(inFileOrder)), new Set(pointKeys(first)));
  assert.notDeepEqual(pointKeys(inFileOrder), pointKeys(first));
});

test("the coordinator's view of a party's ids: replacing an id outside the intersection gives a transcript of the same form and size, with nothing to match an id the coordinator picks", async () => {
  const pool = new PsiTeam();
  const labels = range(0, 200);
  const a = newPsiKey();
  const coordinator = new LabelPsi(pool, { train: labels, test: undefined }, quiet, { key: a });
  const points = await coordinator.points('train');
  const psi = { type: 'psi', jobId: 'j', set: 'train', total: points.length / 32, at: 0, points } as const;
  const held = range(100, 300); // the intersection is cust-100 .. cust-199
  const swapped = held.map((id) => (id === 'cust-250' ? 'cust-9999' : id));
  const views = [];
  for (const ids of [held, swapped]) {
    const answer = await new PartyPsi(pool, { train: packIds(ids), test: undefined }, quiet).answer('train', psi.points.slice());
    // The bytes the party sends: its answer read from its temporary files, as when it is sent.
    const bytes = readAll(encodeIdsSource({ jobId: 'j', set: 'train' }, answer.points, answer.labelPoints));
    const msg = validatePartyMessage(decode(bytes), {}) as Ids;
    const { positions } = await coordinator.match('p', msg, quiet());
    views.push({ msg, bytes, matched: [...positions.keys()].filter((r) => positions[r] >= 0) });
  }
  // Same form and size: the message's fields and length, and the intersection the coordinator learns.
  assert.equal(views[0].bytes.length, views[1].bytes.length);
  assert.deepEqual(Object.keys(views[0].msg), Object.keys(views[1].msg));
  assert.deepEqual(views[0].matched, Array.from({ length: 100 }, (_, i) => 100 + i));
  assert.deepEqual(views[1].matched, views[0].matched);
  // Everything the coordinator can compute from an id it picks (the one replaced, the one put
  // in its place, any other) with its own key: H(id) and H(id)^a. None of it is anywhere in
  // what it received, nor in the party's points blinded again with a.
  for (const { msg } of views) {
    const seen = new Set([...pointKeys(msg.points), ...pointKeys(msg.labelPoints), ...pointKeys(blindPoints(msg.points, a))]);
    // The party's points blinded with a equal its answer's label points exactly for the 100 ids in common.
    assert.equal(seen.size, 200 + 200 + 200 - 100);
    for (const id of ['cust-250', 'cust-9999', 'cust-150', 'cust-5']) {
      const h = hashToPoints([id]);
      for (const k of pointKeys(h).concat(pointKeys(blindPoints(h, a)))) assert.ok(!seen.has(k), `${id} can be matched`);
    }
  }
});

function files(dir: string) {
  const s = syntheticDataset({ trainRows: 120, testRows: 0, seed: 'psi-hostile' });
  return { s, files: writeVerticalSplit(join(dir, 'data'), s.blocks, s.train, s.test) };
}

/** A real coordinator, the real party-1, and `party-2` played by a socket that answers psi with `forge`. */
async function hostileParty(t: { after(fn: () => void): void }, forge: (honest: Ids, ws: WebSocket) => void, onSetup?: (msg: Setup, stop: () => void) => void) {
  const dir = tempDir(t);
  const { s, files: f } = files(dir);
  const out = join(dir, 'out');
  const coord = run(BIN.coordinator, ['--port', '0', '--labels', f.labels, '--parties', 'party-1,party-2', '--out', out, '--rounds', '5']);
  const { port } = (await coord.waitFor((r) => r.msg === 'listening')) as { port: number };
  const real = run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', 'party-1', '--data', f.parties[0].train, '--ids', 'first', '--mechanism', 'none', '--model', join(out, 'm.json'), '--connect-timeout', '2000']);
  const ws = new WebSocket(`ws://127.0.0.1:${port}`);
  ws.on('error', () => undefined);
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('message', (data: Buffer) => {
    const msg = validateCoordinatorMessage(decode(data));
    if (msg.type === 'challenge')
      ws.send(encode({ type: 'hello', protocolVersion: PROTOCOL_VERSION, partyId: 'party-2', jobId: null, features: 1, trainRows: s.train.ids.length, testRows: 0, proof: null, noise: false, model: null }));
    else if (msg.type === 'psi') forge(psiAnswer(s.train.ids, msg), ws);
    else if (msg.type === 'setup')
      onSetup?.(msg, () => {
        coord.kill();
        real.kill();
      });
  });
  const exit = await coord.exit;
  await real.exit;
  return { exit, stderr: coord.stderr(), close: await closed };
}

const onTwist = (() => {
  // u = 2 is on the twist of Curve25519 (2^3 + 486662 * 4 + 2 is not a square mod 2^255 - 19).
  const b = new Uint8Array(POINT_BYTES);
  b[0] = 2;
  return b;
})();
/** A point whose top bit is set: X25519 would ignore the bit, so a second encoding of a point. */
const topBitSet = (points: Uint8Array, at: number) => (points[at * POINT_BYTES + 31] |= 0x80);

for (const [what, forge, expect] of [
  ['a point of its ids not canonical', (m: Ids) => topBitSet(m.points, 5), /party party-2: ids\.points: point 5 is not canonical \(top bit set\)/],
  ['the identity among its label points', (m: Ids) => m.labelPoints.fill(0, 7 * POINT_BYTES, 8 * POINT_BYTES), /party party-2: ids\.labelPoints: point 7 is the identity/],
  ['points of the wrong length', (m: Ids) => (m.points = m.points.subarray(0, m.points.length - 3)), /party party-2: ids\.points: \d+ bytes is not a whole number of 32-byte points/],
  ['one id fewer than its hello declared', (m: Ids) => (m.points = m.points.subarray(0, m.points.length - POINT_BYTES)), /ids\.points: 119 train ids, the hello declared 120/],
] as const) {
  test(`a hostile party's ids with ${what}: refused by name (4003), the job stops`, async (t) => {
    const r = await hostileParty(t, (honest, ws) => {
      forge(honest);
      ws.send(encode(honest));
    });
    assert.equal(r.exit.code, 69, r.stderr);
    assert.match(r.stderr, expect);
    assert.equal(r.close.code, CloseCodes.invalid.code);
  });
}

test("a hostile party's ids sent twice (a replay): refused as unexpected, the job stops", async (t) => {
  const r = await hostileParty(t, (honest, ws) => {
    ws.send(encode(honest));
    ws.send(encode(honest));
  });
  assert.equal(r.exit.code, 69, r.stderr);
  assert.match(r.stderr, /party party-2: .*train ids sent twice|party party-2: .*'ids' while waiting|party party-2: a message when none was asked for/);
  assert.equal(r.close.code, CloseCodes.unexpected.code);
});

test("a hostile party's ids with a point of Curve25519's twist: accepted, it matches no label id, and the job is set up without that row", async (t) => {
  let setup: Setup | undefined;
  const r = await hostileParty(
    t,
    (honest, ws) => {
      honest.points.set(onTwist, 5 * POINT_BYTES);
      ws.send(encode(honest));
    },
    (msg, stop) => {
      setup = msg;
      stop();
    },
  );
  assert.ok(setup, `no setup: ${r.stderr}`);
  // All 120 ids are label ids and party-1's: every row but the one whose point was replaced.
  assert.equal(setup.trainRows.length, 119);
  assert.ok(!setup.trainRows.includes(5));
  assert.doesNotMatch(r.stderr, /party-2: ids\.points/);
});

/** A coordinator written here: challenge, welcome, then what `psi` sends; records the party's close. */
async function hostileCoordinator(t: { after(fn: () => void): void }, psi: (send: (m: unknown) => void, n: number) => void, onIds?: (msg: Ids) => void) {
  const dir = tempDir(t);
  const { files: f } = files(dir);
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  t.after(() => {
    for (const c of wss.clients) c.terminate();
    wss.close();
  });
  const received: PartyMessage['type'][] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    wss.on('connection', (ws) => {
      ws.on('error', () => undefined);
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
      const send = (m: unknown) => ws.send(encode(m as never));
      ws.on('message', (data: Buffer) => {
        const msg = validatePartyMessage(decode(data));
        received.push(msg.type);
        if (msg.type === 'ids' && onIds) {
          onIds(msg);
          ws.close();
        }
        if (msg.type === 'hello') {
          send({ type: 'welcome', protocolVersion: PROTOCOL_VERSION, jobId: 'psi-job' });
          psi(send, msg.trainRows);
        }
      });
      send({ type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce: new Uint8Array(32).fill(1) });
    }),
  );
  const port = (wss.address() as { port: number }).port;
  const party = run(BIN.party, ['--coordinator', `ws://127.0.0.1:${port}`, '--id', 'party-1', '--data', f.parties[0].train, '--ids', 'first', '--mechanism', 'none', '--model', join(dir, 'm.json')]);
  const exit = await party.exit;
  return { exit, stderr: party.stderr(), close: await closed, received };
}

const labelPoints = () => psiLabels('psi-job', range(0, 50));
for (const [what, psi, expect, code] of [
  ['a label point not canonical', (send: (m: unknown) => void) => {
    const m = labelPoints();
    topBitSet(m.points, 3);
    send(m);
  }, /psi\.points: point 3 is not canonical \(top bit set\)/, CloseCodes.invalid.code],
  ['the identity as a label point', (send: (m: unknown) => void) => {
    const m = labelPoints();
    m.points.fill(0, 0, POINT_BYTES);
    send(m);
  }, /psi\.points: point 0 is the identity/, CloseCodes.invalid.code],
  ['label points of the wrong length', (send: (m: unknown) => void) => send({ ...labelPoints(), points: new Uint8Array(33) }), /psi\.points: 33 bytes is not a whole number of 32-byte points/, CloseCodes.invalid.code],
  ['more label ids than the party accepts', (send: (m: unknown) => void) => send({ ...labelPoints(), total: 2300, points: blindPoints(hashToPoints(range(0, 2300)), newPsiKey()) }), /psi\.total: 2300 train label ids, more than this party accepts \(2224/, CloseCodes.invalid.code],
  ['its parts out of order', (send: (m: unknown) => void) => {
    const m = labelPoints();
    send({ ...m, total: 100 });
    send({ ...m, total: 100, at: 60, points: m.points.subarray(0, 40 * POINT_BYTES) });
  }, /psi\.at: label ids from 60 of 100 \(train\), expected 50 of 100 \(train\)/, CloseCodes.invalid.code],
  ['the same psi twice (a replay)', (send: (m: unknown) => void) => {
    const m = labelPoints();
    send(m);
    send(m);
  }, /psi for the train set twice on one connection/, CloseCodes.unexpected.code],
] as const) {
  test(`a hostile coordinator's psi with ${what}: the party refuses it by name and stops (exit 69)`, async (t) => {
    const r = await hostileCoordinator(t, (send) => psi(send));
    assert.equal(r.exit.code, 69, r.stderr);
    assert.match(r.stderr, expect);
    assert.equal(r.close.code, code);
    assert.ok(!r.received.includes('ids') || what.includes('twice'), `the party answered: ${r.received.join(', ')}`);
  });
}

test("a hostile coordinator's psi with a point of Curve25519's twist: the party blinds it like any other (to a point that matches none of its ids) and answers", async (t) => {
  let answer: Ids | undefined;
  const r = await hostileCoordinator(
    t,
    (send) => {
      const m = labelPoints();
      m.points.set(onTwist, 3 * POINT_BYTES);
      send(m);
    },
    (msg) => (answer = msg),
  );
  assert.ok(answer, `no answer: ${r.stderr}`);
  assert.equal(answer.labelPoints.length, 50 * POINT_BYTES);
  const own = new Set(pointKeys(answer.points));
  assert.ok(!own.has(pointKeys(answer.labelPoints.subarray(3 * POINT_BYTES, 4 * POINT_BYTES))[0]));
  assert.doesNotMatch(r.stderr, /psi\.points: point 3/);
});
