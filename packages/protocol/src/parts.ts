// Long vectors in parts (PROTOCOL.md, "Long vectors"): a `round` or `share` whose vector holds
// more than PARTS_ABOVE values is sent as `part` messages of PART_VALUES values each, in order,
// then the message itself with an empty vector. Whole, a million-row vector is an 8 MB message:
// the receiving WebSocket joins its frames into a fresh 8 MB buffer, the decoder copies the
// vector out of it into another, and a party collected them every round to stay within its
// memory. In parts, nothing larger than a part is allocated, and the receiver decodes each
// part's values into their place in an array it keeps (PartAssembler).
import type { VectorInto } from './codec.js';
import { ProtocolError } from './errors.js';
import { type Part, PART_VALUES, PARTS_ABOVE, POINT_BYTES, type Psi, PSI_PART_POINTS, type Round, type Share } from './messages.js';
import type { SampleSet } from './names.js';

/** The messages that may be sent in parts, and the field that holds each one's vector. */
export type PartedMessage = Round | Share;

const EMPTY = new Float64Array(0);

/** Whether part p's values were decoded where they belong in `into`. */
function inPlace(p: Part, into: Float64Array): boolean {
  return p.values.buffer === into.buffer && p.values.byteOffset === into.byteOffset + p.at * Float64Array.BYTES_PER_ELEMENT;
}

/** The vector field of `msg`, and its name. */
function vectorOf(msg: PartedMessage): [Float64Array, string] {
  return msg.type === 'round' ? [msg.c, 'c'] : [msg.share, 'share'];
}

/** `msg` with `v` for its vector. */
function withVector<T extends PartedMessage>(msg: T, v: Float64Array): T {
  return msg.type === 'round' ? { ...msg, c: v } : { ...msg, share: v };
}

/** Whether a vector of `length` values is sent in parts. */
export function sentInParts(length: number): boolean {
  return length > PARTS_ABOVE;
}

/**
 * `msg` as it is sent: [msg] when its vector is not sentInParts; otherwise its parts (views of the
 * vector, not copies: made one at a time as they are sent) and, last, `msg` with an empty vector.
 */
export function* inParts<T extends PartedMessage>(msg: T): Generator<Part | T> {
  const [v] = vectorOf(msg);
  if (!sentInParts(v.length)) {
    yield msg;
    return;
  }
  for (let at = 0; at < v.length; at += PART_VALUES) yield { type: 'part', jobId: msg.jobId, round: msg.round, at, values: v.subarray(at, at + PART_VALUES) };
  yield withVector(msg, EMPTY);
}

/**
 * A set's label points (`points`, POINT_BYTES each) as the `psi` messages they are sent in:
 * PSI_PART_POINTS points each (views, not copies), in order; one message for a set of at most
 * that many, or none.
 */
export function* psiInParts(jobId: string, set: SampleSet, points: Uint8Array, cache?: Psi['cache']): Generator<Psi> {
  const total = points.length / POINT_BYTES;
  for (let at = 0; at < total || at === 0; at += PSI_PART_POINTS) {
    const part: Psi = { type: 'psi', jobId, set, total, at, points: points.subarray(at * POINT_BYTES, Math.min(total, at + PSI_PART_POINTS) * POINT_BYTES) };
    // Every part names the cache: the party checks that they agree.
    if (cache) part.cache = cache;
    yield part;
  }
}

/**
 * The receiving side: the parts of one message, validated one by one (validate-fields.ts, part: job, round,
 * place, length and values), put in order into an array, then given to the message they
 * came before. Anything else (a part out of order, parts of another round, a message with an
 * empty vector and missing parts, parts that no message follows) is a ProtocolError.
 */
export class PartAssembler {
  private into: Float64Array | undefined;
  private round = 0;
  private next = 0;

  /**
   * Where `decode` puts the vector of a message of type `parted` of n values (VectorInto):
   * whole, into `into()`; in parts, each part's values straight into their place in the array
   * the first part chooses (`into()`), after the parts before them. A part that turns out to
   * belong elsewhere (another round, another place) is refused by `add`, and the values it left
   * lie where no part before it was. n is 0 when no vector is expected (then undefined: every
   * vector is a copy of its own).
   */
  vectorInto(parted: PartedMessage['type'], n: number, into: () => Float64Array): VectorInto | undefined {
    if (n === 0) return undefined;
    if (sentInParts(n)) return { type: 'part', key: 'values', array: (length) => this.place(length, n, into) };
    return { type: parted, key: parted === 'round' ? 'c' : 'share', array: (length) => (length === n ? into() : undefined) };
  }

  /** The next part's place, for `length` values of n (undefined, so a copy, for a part too long to be one). */
  private place(length: number, n: number, into: () => Float64Array): Float64Array | undefined {
    if (length > PART_VALUES || this.next + length > n) return undefined;
    if (this.next === 0) this.into = into();
    return this.into!.length === n ? this.into!.subarray(this.next, this.next + length) : undefined;
  }

  /** Part `p` of a vector of n values, copied into `into` (the array the first part chooses; every part of the message goes there) unless it was decoded in place. */
  add(p: Part, n: number, into: () => Float64Array): void {
    if (p.at !== this.next) throw new ProtocolError('invalid', `part.at: ${p.at}, expected ${this.next} (parts come in order)`);
    if (p.at === 0) {
      this.round = p.round;
      if (!(this.into && inPlace(p, this.into))) this.into = into();
      if (this.into.length !== n) throw new Error(`internal: parts of ${n} values into an array of ${this.into.length}`);
    } else if (p.round !== this.round) throw new ProtocolError('invalid', `part of round ${p.round} among the parts of round ${this.round}`);
    if (!inPlace(p, this.into!)) this.into!.set(p.values, p.at);
    this.next = p.at + p.values.length;
  }

  /** Whether a message's parts are under way (some arrived, the message not yet). */
  get pending(): boolean {
    return this.next > 0;
  }

  /**
   * `msg` with its vector: as it came when not empty (no parts may be pending), else the
   * parts' array, which must hold all n values of the same round.
   */
  complete<T extends PartedMessage>(msg: T, n: number): T {
    const [v, key] = vectorOf(msg);
    const { into, next, round } = this;
    this.reset();
    if (v.length > 0) {
      if (next > 0) throw new ProtocolError('invalid', `${msg.type}: a whole ${key} after parts of one`);
      return msg;
    }
    if (n === 0) return msg;
    if (next === 0) throw new ProtocolError('invalid', `${msg.type}.${key}: empty, and no parts came before it`);
    if (next !== n) throw new ProtocolError('invalid', `${msg.type}.${key}: its parts hold ${next} of ${n} values`);
    if (round !== msg.round) throw new ProtocolError('invalid', `${msg.type} of round ${msg.round} after parts of round ${round}`);
    return withVector(msg, into!);
  }

  /**
   * A validated message as its receiver takes it: a part is added (undefined: the message it
   * belongs to is still to come); a message of type `parted` gets its vector from the parts
   * before it (complete); any other is returned as it is, but not while parts are under way.
   * n is the vectors' length, 0 when no vector is expected (a part is then unexpected, and
   * `when` says why, as "while waiting for ...").
   */
  take<M extends { type: string }>(got: M, parted: PartedMessage['type'], n: number, into: () => Float64Array, when: string): Exclude<M, Part> | undefined {
    if (got.type === 'part') {
      if (n === 0) throw new ProtocolError('unexpected', `a part of a vector ${when}`);
      this.add(got as unknown as Part, n, into);
      return undefined;
    }
    if (got.type === parted) return this.complete(got as unknown as PartedMessage, n) as unknown as Exclude<M, Part>;
    if (this.pending) throw new ProtocolError('invalid', `'${got.type}' among the parts of a ${parted}'s vector`);
    return got as Exclude<M, Part>;
  }

  /** Forget parts under way (a new connection starts afresh). */
  reset(): void {
    this.into = undefined;
    this.next = 0;
    this.round = 0;
  }
}
