// Long vectors in parts: a round or share longer than PARTS_ABOVE goes as parts then the message
// with an empty vector; through the wire and the validators, the assembler gives back the same
// bits, and refuses every way the parts can be wrong.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  type Part,
  PART_VALUES,
  PARTS_ABOVE,
  type PartedMessage,
  PartAssembler,
  ProtocolError,
  type Round,
  type Share,
  type ValidationContext,
  decode,
  encode,
  inParts,
  MAX_SHARE_MAGNITUDE,
  validateCoordinatorMessage,
  validatePartyMessage,
} from '../index.js';
import { seeded } from './support.js';

const JOB = 'job-1';
const N = 2 * PART_VALUES + 123;

function values(n: number, seed: string): Float64Array {
  const r = seeded(seed);
  return Float64Array.from({ length: n }, () => (r() - 0.5) * 1e3);
}

const share = (v: Float64Array, round = 3): Share => ({ type: 'share', jobId: JOB, round, share: v, penaltySq: 1.5, epsilonSpent: 0, solver: null });
const roundMsg = (v: Float64Array, round = 3): Round => ({ type: 'round', jobId: JOB, round, rho: 0.5, c: v });

/** Each message through the wire and its validator, as a peer receives them. */
function received<T extends PartedMessage>(msgs: Iterable<Part | T>, validate: (v: unknown, ctx: ValidationContext) => unknown, ctx: ValidationContext): (Part | T)[] {
  return [...msgs].map((m) => validate(decode(encode(m)), ctx) as Part | T);
}

/** Feed received messages to an assembler as a receiver does (take); returns the completed message. */
function assemble<T extends PartedMessage>(msgs: (Part | T)[], n: number, into = new Float64Array(n)): T {
  const a = new PartAssembler();
  let out: T | undefined;
  for (const m of msgs) {
    const got = a.take(m, m.type === 'part' ? 'share' : m.type, n, () => into, 'in this test');
    assert.equal(got === undefined, m.type === 'part', 'a part gives nothing yet, the message itself');
    out = got ?? out;
  }
  assert.ok(out, 'a message completed');
  return out;
}

function throwsProtocol(fn: () => unknown, kind: string, message: RegExp): void {
  assert.throws(fn, (err: unknown) => err instanceof ProtocolError && err.kind === kind && message.test(err.message));
}

test('a share and a round of more than PARTS_ABOVE values go as parts of PART_VALUES values, then the message with an empty vector; reassembled, the same bits', () => {
  const v = values(N, 'parts');
  for (const [msg, validate] of [
    [share(v), validatePartyMessage],
    [roundMsg(v), validateCoordinatorMessage],
  ] as const) {
    const sent = [...inParts<PartedMessage>(msg)];
    assert.deepEqual(
      sent.map((m) => (m.type === 'part' ? [m.at, m.values.length] : m.type)),
      [[0, PART_VALUES], [PART_VALUES, PART_VALUES], [2 * PART_VALUES, 123], msg.type],
    );
    const last = sent[sent.length - 1] as PartedMessage;
    assert.equal(last.type === 'round' ? last.c.length : (last as Share).share.length, 0, 'the message itself carries no values');
    const into = new Float64Array(N);
    const out = assemble(received(sent, validate, { jobId: JOB, n: N, round: 3 }), N, into);
    const got = out.type === 'round' ? out.c : out.share;
    assert.equal(got, into, 'the vector is the array the parts were put into');
    assert.deepEqual(new Uint8Array(got.buffer), new Uint8Array(v.buffer), 'bit for bit');
    assert.equal(out.round, 3);
  }
});

test('a vector of at most PARTS_ABOVE values goes whole, and a whole vector passes the assembler as it came', () => {
  assert.ok(N > PARTS_ABOVE && PARTS_ABOVE > PART_VALUES);
  const v = values(PARTS_ABOVE, 'short');
  const msg = share(v);
  const sent = [...inParts(msg)];
  assert.deepEqual(sent, [msg]);
  assert.equal(sent[0], msg, 'the message itself');
  const out = assemble(received(sent, validatePartyMessage, { jobId: JOB, n: PARTS_ABOVE }), PARTS_ABOVE);
  assert.deepEqual(out.share, v);
});

test("vectorInto: decoded as a receiver does, each part's values land in their place in the receiver's array, a whole vector in it too; the same bits either way", () => {
  for (const n of [N, PARTS_ABOVE]) {
    const v = values(n, `into-${n}`);
    for (const [msg, validate] of [
      [share(v), validatePartyMessage],
      [roundMsg(v), validateCoordinatorMessage],
    ] as const) {
      const a = new PartAssembler();
      const into = new Float64Array(n);
      const ctx = { jobId: JOB, n, round: 3 };
      let asked = 0;
      const intoOnce = () => (asked++, into);
      let out: PartedMessage | undefined;
      for (const m of inParts<PartedMessage>(msg)) {
        const got = validate(decode(encode(m), a.vectorInto(msg.type, n, intoOnce)), ctx) as Part | PartedMessage;
        if (got.type === 'part') {
          assert.equal(got.values.buffer, into.buffer, `n ${n}, part at ${got.at}: decoded into the receiver's array`);
          assert.equal(got.values.byteOffset, 8 * got.at, `n ${n}, part at ${got.at}: in its place`);
        }
        out = a.take(got, msg.type, n, intoOnce, 'in this test') ?? out;
      }
      assert.ok(out);
      const vector = out.type === 'round' ? out.c : out.share;
      assert.equal(vector, into, `n ${n}, ${msg.type}: the receiver's array`);
      assert.deepEqual(new Uint8Array(vector.buffer), new Uint8Array(v.buffer), `n ${n}, ${msg.type}: bit for bit`);
      assert.equal(asked, 1, `n ${n}, ${msg.type}: the array asked for once`);
    }
  }
  assert.equal(new PartAssembler().vectorInto('share', 0, () => new Float64Array(0)), undefined, 'no vector expected');
});

test("vectorInto: a part refused after it was decoded in place (out of order, another round) leaves the parts before it as they were, and the parts sent again complete the vector", () => {
  const v = values(N, 'refused');
  const ctx = { jobId: JOB, n: N };
  const bytes = [...inParts(share(v))].map((m) => encode(m));
  const other = [...inParts(share(values(N, 'other')))].map((m) => encode({ ...m, round: 4 }));
  const a = new PartAssembler();
  const into = new Float64Array(N);
  const take = (b: Uint8Array) => a.take(validatePartyMessage(decode(b, a.vectorInto('share', N, () => into)), ctx) as Part | Share, 'share', N, () => into, 'in this test');
  take(bytes[0]);
  const first = into.slice(0, PART_VALUES);
  throwsProtocol(() => take(bytes[2]), 'invalid', /part\.at: 131072, expected 65536/);
  throwsProtocol(() => take(other[1]), 'invalid', /part of round 4 among the parts of round 3/);
  assert.deepEqual(into.subarray(0, PART_VALUES), first, 'the first part untouched');
  a.reset();
  let out: Share | undefined;
  for (const b of bytes) out = (take(b) as Share | undefined) ?? out;
  assert.equal(out?.share, into);
  assert.deepEqual(new Uint8Array(into.buffer), new Uint8Array(v.buffer));
});

test('parts out of order, of another round, missing, followed by a whole vector, or an empty vector with no parts, are refused', () => {
  const v = values(N, 'wrong');
  const ctx = { jobId: JOB, n: N };
  const [p0, p1, p2, msg] = received([...inParts(share(v))], validatePartyMessage, ctx) as [Part, Part, Part, Share];
  const into = () => new Float64Array(N);
  const feed = (...ms: (Part | Share)[]) => {
    const a = new PartAssembler();
    for (const m of ms) a.take(m, 'share', N, into, 'in this test');
  };
  throwsProtocol(() => feed(p1), 'invalid', /part\.at: 65536, expected 0/);
  throwsProtocol(() => feed(p0, p2), 'invalid', /expected 65536 \(parts come in order\)/);
  throwsProtocol(() => feed(p0, p0), 'invalid', /part\.at: 0, expected 65536/);
  throwsProtocol(() => feed(p0, { ...p1, round: 4 }), 'invalid', /part of round 4 among the parts of round 3/);
  throwsProtocol(() => feed(p0, p1, msg), 'invalid', /share\.share: its parts hold 131072 of 131195 values/);
  throwsProtocol(() => feed(p0, p1, p2, { ...msg, round: 4 }), 'invalid', /share of round 4 after parts of round 3/);
  throwsProtocol(() => feed(p0, share(v)), 'invalid', /a whole share after parts of one/);
  throwsProtocol(() => feed(msg), 'invalid', /share\.share: empty, and no parts came before it/);
  // After a refusal, and after reset, the assembler starts afresh.
  const a = new PartAssembler();
  a.add(p0, N, into);
  assert.equal(a.pending, true);
  a.reset();
  assert.equal(a.pending, false);
  throwsProtocol(() => a.complete(msg, N), 'invalid', /no parts came before it/);
});

test('take: a message of another type passes as it is, but not among parts; a part when no vector is expected is refused with the reason given', () => {
  const v = values(N, 'take');
  const [p0] = received([...inParts(share(v))], validatePartyMessage, { jobId: JOB, n: N }) as Part[];
  const exhausted = { type: 'exhausted' as const, jobId: JOB, round: 3 };
  const a = new PartAssembler();
  assert.equal(a.take(exhausted, 'share', N, () => new Float64Array(N), 'in this test'), exhausted);
  throwsProtocol(() => a.take(p0, 'share', 0, () => new Float64Array(N), "while waiting for 'ready'"), 'unexpected', /a part of a vector while waiting for 'ready'/);
  assert.equal(a.pending, false, 'a refused part is not kept');
  assert.equal(a.take(p0, 'share', N, () => new Float64Array(N), 'in this test'), undefined);
  throwsProtocol(() => a.take(exhausted, 'share', N, () => new Float64Array(N), 'in this test'), 'invalid', /'exhausted' among the parts of a share's vector/);
});

test('a part is validated on its own: place, length, values and bound, job and round', () => {
  const ctx: ValidationContext = { jobId: JOB, n: N, round: 3 };
  const part = (patch: Partial<Part>): unknown => decode(encode({ type: 'part', jobId: JOB, round: 3, at: 0, values: new Float64Array(PART_VALUES), ...patch } as Part));
  const last = 2 * PART_VALUES;
  assert.equal((validatePartyMessage(part({ at: last, values: new Float64Array(123) }), ctx) as Part).at, last);
  assert.equal((validateCoordinatorMessage(part({}), ctx) as Part).values.length, PART_VALUES);
  throwsProtocol(() => validatePartyMessage(part({ at: 5 }), ctx), 'invalid', /part\.at: 5 is not a multiple of 65536/);
  throwsProtocol(() => validatePartyMessage(part({ at: 3 * PART_VALUES }), ctx), 'invalid', /part\.at: 196608, but the vector has 131195 values/);
  throwsProtocol(() => validatePartyMessage(part({ values: new Float64Array(PART_VALUES - 1) }), ctx), 'invalid', /part\.values: length 65535, expected 65536/);
  throwsProtocol(() => validatePartyMessage(part({ at: last, values: new Float64Array(PART_VALUES) }), ctx), 'invalid', /part\.values: length 65536, expected 123/);
  throwsProtocol(() => validateCoordinatorMessage(part({ values: new Float64Array(PART_VALUES).fill(Number.NaN) }), ctx), 'invalid', /part\.values\[0\] is NaN/);
  // From a party, the bound on what it sends per sample; from the coordinator, finite is enough.
  const big = new Float64Array(PART_VALUES).fill(2 * MAX_SHARE_MAGNITUDE);
  throwsProtocol(() => validatePartyMessage(part({ values: big }), ctx), 'invalid', /exceeds the bound/);
  assert.equal((validateCoordinatorMessage(part({ values: big }), ctx) as Part).values[0], 2 * MAX_SHARE_MAGNITUDE);
  throwsProtocol(() => validatePartyMessage(part({ round: 2 }), ctx), 'unexpected', /part for round 2, expected round 3 \(stale\)/);
  throwsProtocol(() => validatePartyMessage(part({ jobId: 'other' }), ctx), 'wrongJob', /part for job 'other'/);
  throwsProtocol(() => validatePartyMessage({ ...(part({}) as object), extra: 1 }, ctx), 'invalid', /part: unexpected field 'extra'/);
  // A round or share with an empty vector passes the validator (the assembler checks its parts); any other wrong length does not.
  assert.equal((validatePartyMessage(decode(encode(share(new Float64Array(0)))), ctx) as Share).share.length, 0);
  throwsProtocol(() => validateCoordinatorMessage(decode(encode(roundMsg(new Float64Array(7)))), ctx), 'invalid', /round\.c: length 7, expected 131195/);
});
