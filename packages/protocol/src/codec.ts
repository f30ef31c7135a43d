import { Packr, addExtension } from 'msgpackr';
import { ProtocolError } from './errors.js';
import type { Ids, Message } from './messages.js';

/**
 * One configured Packr for every message. The bare msgpackr `pack` turns a Float64Array
 * into truncated bytes; `moreTypes` makes typed arrays round-trip (decoded as below);
 * `useRecords: false` keeps plain maps, readable by any MessagePack peer.
 */
const packr = new Packr({ moreTypes: true, useRecords: false });

/**
 * The one MessagePack extension type the protocol uses: msgpackr's typed array ("t"), for
 * every vector. `useRecords: false` only stops msgpackr from writing records: its decoder
 * still honours a record definition (extension "r", 0x72) and then reads the bytes 0x40-0x7f
 * as records, and it builds Sets, Errors, RegExps, Dates and structured-clone references from
 * other extensions. None of them is part of the protocol, so `decode` refuses every extension
 * but this one before msgpackr sees the bytes.
 */
export const TYPED_ARRAY_EXTENSION = 0x74;

/** The typed arrays of msgpackr's extension, by the kind byte that starts its data. */
const TYPED_ARRAYS = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array];

/** Byte arrays from this size are decoded as views of the bytes received, not copies. */
const VIEW_BYTES = 4096;

/**
 * How the typed-array extension is decoded (replacing msgpackr's, for every Unpackr in the
 * process): a copy, aligned for its type, except a byte array of VIEW_BYTES or more, which views
 * the bytes decoded (it keeps them alive, and writing it writes them). The intersection's
 * points are such arrays, 32 MB and 64 MB for a million ids: each received message was held
 * twice while it was decoded. Kinds 16 and 17 (an ArrayBuffer, a DataView) are not part of
 * the protocol and are refused.
 */
addExtension({
  type: TYPED_ARRAY_EXTENSION,
  unpack(data: Uint8Array) {
    const kind = TYPED_ARRAYS[data[0]];
    if (!kind) throw new Error(`typed array of unknown kind ${data[0]}`);
    if (kind === Uint8Array && data.length > VIEW_BYTES) return new Uint8Array(data.buffer, data.byteOffset + 1, data.length - 1);
    const into = kind === Float64Array && vectorTarget && (data.length - 1) % 8 === 0 ? vectorTarget.array((data.length - 1) / 8) : undefined;
    if (into) {
      vectorTarget = undefined;
      vectorTaken = into;
      new Uint8Array(into.buffer, into.byteOffset, into.byteLength).set(data.subarray(1));
      return into;
    }
    // Uint8Array's slice, a copy: `data` may be a Buffer, whose slice is a view.
    return new kind(Uint8Array.prototype.slice.call(data, 1).buffer);
  },
});

export function encode(msg: Message): Buffer {
  return packr.pack(msg);
}

/**
 * An upper bound on the MessagePack size of `v` as msgpackr encodes it here (an estimate too
 * small costs only the copies it was meant to avoid): a string takes at most 3 bytes a UTF-16
 * unit, a typed array its bytes, and every value, key and header at most 16 bytes more.
 */
export function packedBound(v: unknown): number {
  if (typeof v === 'string') return 16 + 3 * v.length;
  if (ArrayBuffer.isView(v)) return 16 + v.byteLength;
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + packedBound(x), 16);
  if (v !== null && typeof v === 'object') return Object.entries(v).reduce((n, [k, x]) => n + packedBound(k) + packedBound(x), 16);
  return 16;
}

/** Bytes of the buffer msgpackr is left with after packInto (its own first buffer is this size). */
const FRESH_BYTES = 8192;

/**
 * `value` encoded by `p` into `buffer`, which must hold packedBound(value) bytes; the result
 * views it. msgpackr keeps one target buffer for all its Packr instances and writes each
 * next value after the last; so that nothing encoded later lands in `buffer` (which its owner
 * may overwrite or keep large), it is then left a fresh buffer of its own.
 */
export function packInto(p: Packr, value: unknown, buffer: Buffer): Buffer {
  p.useBuffer(buffer);
  try {
    return p.pack(value);
  } finally {
    p.useBuffer(Buffer.allocUnsafeSlow(FRESH_BYTES));
  }
}

/** A buffer encodeInto reuses from one message to the next. */
export interface EncodeScratch {
  buffer?: Buffer;
}

/**
 * `msg` encoded into `scratch`'s buffer (made or grown when too small) rather than a fresh
 * one. A fresh buffer for a large vector costs a page fault every 4 KiB as it is written:
 * 0.7 ms for a 260 KB round message on the development machine, against 0.05 ms into memory
 * already touched. The result views the scratch, so it is valid only until the next
 * encodeInto with the same scratch: a sender reuses a scratch only once the bytes it holds
 * have left for the socket (encodeToSend).
 */
export function encodeInto(msg: Message, scratch: EncodeScratch): Buffer {
  const need = packedBound(msg);
  if (!scratch.buffer || scratch.buffer.length < need) scratch.buffer = Buffer.allocUnsafeSlow(need);
  return packInto(packr, msg, scratch.buffer);
}

/**
 * The messages sent over and over in a job (each round, step or evaluation, and the parts of a
 * long vector, 512 KiB each): the only ones a scratch is kept for. The others are sent once or
 * a few times, and some are far larger (the intersection's points: 32 bytes an id, 64 in
 * `ids`); encoded into the scratch, they would leave it at their size, touched and resident,
 * for the rest of the job (64 MB for a party of a million rows).
 */
const RECURRING: ReadonlySet<Message['type']> = new Set(['round', 'share', 'part', 'sgd', 'batchScores', 'evaluate', 'scores']);

/**
 * `msg` encoded for a socket with `queued` bytes still waiting to be sent (a WebSocket's
 * bufferedAmount; undefined without a socket): a message of every round into `scratch` when
 * nothing is queued, so the bytes last encoded there have left for the system; otherwise, and
 * any other message, into a fresh buffer.
 */
export function encodeToSend(msg: Message, scratch: EncodeScratch, queued: number | undefined): Buffer {
  return queued === 0 && RECURRING.has(msg.type) ? encodeInto(msg, scratch) : encodeFresh(msg);
}

/** Messages from this many bytes (packedBound) are encoded into a buffer of their own size. */
const LARGE_BYTES = 1 << 20;

/**
 * `msg` encoded into bytes nothing else writes to: `encode` for a small message; a large one
 * into a new buffer of packedBound bytes. msgpackr grows its own buffer as it writes, copying
 * what it has into one twice as large (1.25 times above 64 MB): 64 MB of points made it hold
 * about 130 MB at once.
 */
export function encodeFresh(msg: Message): Buffer {
  const need = packedBound(msg);
  return need < LARGE_BYTES ? encode(msg) : packInto(packr, msg, Buffer.allocUnsafeSlow(need));
}

/** The bytes of the key `labelPoints` as msgpackr writes it (a fixstr). */
const LABEL_POINTS_KEY = Buffer.from([0xa0 | 'labelPoints'.length, ...Buffer.from('labelPoints')]);

/** Bytes made a piece at a time: a message, or an array, too large to be held whole at once. */
export interface ByteSource {
  readonly length: number;
  /** Writes bytes `at` to `at + into.length` into `into`. */
  readAt(at: number, into: Uint8Array): void;
}

/**
 * From this many bytes msgpackr gives a typed array a 4-byte length (ext 32: 0xc9, the length
 * of the kind byte and the data, the type 0x74, the kind byte, the data); below it, fewer.
 */
const EXT32_BYTES = 1 << 16;

/**
 * An `ids` message as a ByteSource: the bytes of `encode` of the message, with its two point
 * arrays read from `points` and `labelPoints` as each piece is asked for (a million ids: 64 MB
 * of points, twice, never held whole). The header bytes come from encoding the message with
 * zero arrays of at most EXT32_BYTES, whose lengths are then set to the real ones: the label
 * points last, so theirs are the last bytes, and the points' end just before the key
 * `labelPoints` (found in the few bytes of header there: the points are zeros, so nothing else
 * can match). A test pins the result to `encode` of the same message.
 */
export function encodeIdsSource(head: Pick<Ids, 'jobId' | 'set'>, points: ByteSource, labelPoints: ByteSource): ByteSource {
  const short = (n: number) => Math.min(n, EXT32_BYTES);
  const tp = short(points.length);
  const tl = short(labelPoints.length);
  const template = encode({ type: 'ids', jobId: head.jobId, set: head.set, points: new Uint8Array(tp), labelPoints: new Uint8Array(tl) });
  const labelAt = template.length - tl;
  // The key, an extension header of at most 6 bytes and the typed array's kind byte.
  const keyAt = template.lastIndexOf(LABEL_POINTS_KEY, labelAt - LABEL_POINTS_KEY.length);
  if (keyAt < labelAt - LABEL_POINTS_KEY.length - 7 || keyAt < tp) throw new Error('internal: msgpackr no longer lays out an ids message as expected');
  const pointsAt = keyAt - tp;
  const prefix = Buffer.from(template.subarray(0, pointsAt));
  const middle = Buffer.from(template.subarray(keyAt, labelAt));
  const setLength = (header: Buffer, n: number) => {
    if (n < EXT32_BYTES) return;
    const at = header.length - 7;
    if (header[at] !== 0xc9 || header[at + 5] !== TYPED_ARRAY_EXTENSION) throw new Error('internal: msgpackr no longer writes a large typed array as ext 32');
    header.writeUInt32BE(n + 1, at + 1);
  };
  setLength(prefix, points.length);
  setLength(middle, labelPoints.length);
  const parts: ByteSource[] = [bytesSource(prefix), points, bytesSource(middle), labelPoints];
  return {
    length: parts.reduce((n, p) => n + p.length, 0),
    readAt(at, into) {
      let start = 0; // where the current part begins in the message
      let done = 0; // bytes of `into` written
      for (const part of parts) {
        const end = start + part.length;
        if (done < into.length && at + done < end) {
          const from = at + done - start;
          const n = Math.min(part.length - from, into.length - done);
          part.readAt(from, into.subarray(done, done + n));
          done += n;
        }
        start = end;
      }
      if (done < into.length) throw new RangeError(`bytes ${at} to ${at + into.length} asked of a message of ${start}`);
    },
  };
}

/** `bytes` as a ByteSource. */
export function bytesSource(bytes: Uint8Array): ByteSource {
  return { length: bytes.length, readAt: (at, into) => into.set(bytes.subarray(at, at + into.length)) };
}

/**
 * Where `decode` puts the vector of one kind of message (a round's c, a share's, a part's
 * values: every round's): into an array its receiver keeps rather than a fresh one. The first
 * Float64Array in the message for whose length `array(length)` gives an array (of that length)
 * is decoded into it; that array must be free to overwrite whatever the message turns out to
 * be. If it is not the vector of `type`'s field `key` after all, the message gets a copy of it
 * instead, so the array is never kept.
 */
export interface VectorInto {
  type: string;
  key: string;
  array(length: number): Float64Array | undefined;
}

/** The VectorInto of the decode under way (decoding is synchronous) until a vector took it, and the array that vector went to. */
let vectorTarget: VectorInto | undefined;
let vectorTaken: Float64Array | undefined;

/**
 * Decode bytes into an unvalidated value (never trust it before `validate*`), after
 * checkWireFormat; its vector into `into` (VectorInto). A fresh 260 KB array for every round's
 * vector, with the frame's own buffer, kept the parties' and the coordinator's collectors
 * busy: on a9a a party ran a full collection about every 15 rounds (docs/scaling.md).
 */
export function decode(bytes: Uint8Array, into?: VectorInto): unknown {
  if (bytes.length === 0) throw new ProtocolError('malformed', 'empty frame');
  checkWireFormat(bytes);
  vectorTarget = into;
  vectorTaken = undefined;
  let v: unknown;
  try {
    v = packr.unpack(bytes);
  } catch (err) {
    throw new ProtocolError('malformed', `not a MessagePack document (${(err as Error).message})`);
  } finally {
    vectorTarget = undefined;
  }
  // Set by the extension during unpack (which TypeScript cannot see).
  const taken = vectorTaken as Float64Array | undefined;
  vectorTaken = undefined;
  if (taken && into && typeof v === 'object' && v !== null) {
    const fields = v as Record<string, unknown>;
    if (!(fields.type === into.type && fields[into.key] === taken)) for (const k of Object.keys(fields)) if (fields[k] === taken) fields[k] = taken.slice();
  }
  return v;
}

/** Data bytes after the type byte of the fixext formats 0xd4-0xd8. */
const FIXEXT_BYTES = [1, 2, 4, 8, 16];

/**
 * Walk the MessagePack token stream once, without building anything: exactly one value, no
 * byte after it, no 0xc1, and no extension but TYPED_ARRAY_EXTENSION. A single count of the
 * values still to read replaces recursion (a map of n entries adds 2n, an array n), so
 * nesting depth costs nothing and the work is at most one step per byte.
 */
function checkWireFormat(b: Uint8Array): void {
  const malformed = (detail: string): never => {
    throw new ProtocolError('malformed', `not a protocol message: ${detail}`);
  };
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let pos = 0;
  let remaining = 1;
  // Length fields of 1, 2 or 4 bytes at `at`.
  const len = (at: number, size: 1 | 2 | 4): number => {
    if (at + size > b.length) malformed('truncated');
    return size === 1 ? b[at] : size === 2 ? view.getUint16(at) : view.getUint32(at);
  };
  const extension = (type: number) => {
    if (type !== TYPED_ARRAY_EXTENSION) malformed(`MessagePack extension type ${type}${type === 0x72 ? ' (a msgpackr record definition)' : ''}; only typed arrays (${TYPED_ARRAY_EXTENSION}) are used`);
  };
  while (remaining > 0) {
    // Every value still announced takes at least one byte.
    if (remaining > b.length - pos) malformed('truncated');
    remaining--;
    const t = b[pos++];
    if (t <= 0x7f || t >= 0xe0) continue; // positive and negative fixint
    if (t <= 0x8f) remaining += 2 * (t & 0x0f); // fixmap
    else if (t <= 0x9f) remaining += t & 0x0f; // fixarray
    else if (t <= 0xbf) pos += t & 0x1f; // fixstr
    else
      switch (t) {
        case 0xc0: // nil
        case 0xc2: // false
        case 0xc3: // true
          break;
        case 0xc1:
          malformed('byte 0xc1 (never used)');
          break;
        case 0xc4: // bin 8, 16, 32
        case 0xd9: // str 8, 16, 32
          pos += 1 + len(pos, 1);
          break;
        case 0xc5:
        case 0xda:
          pos += 2 + len(pos, 2);
          break;
        case 0xc6:
        case 0xdb:
          pos += 4 + len(pos, 4);
          break;
        case 0xc7: // ext 8, 16, 32: length, type, data
        case 0xc8:
        case 0xc9: {
          const size = t === 0xc7 ? 1 : t === 0xc8 ? 2 : 4;
          const n = len(pos, size);
          pos += size;
          extension(len(pos, 1));
          pos += 1 + n;
          break;
        }
        case 0xd4: // fixext 1, 2, 4, 8, 16: type, data
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8:
          extension(len(pos, 1));
          pos += 1 + FIXEXT_BYTES[t - 0xd4];
          break;
        case 0xca: // float 32, 64
          pos += 4;
          break;
        case 0xcb:
          pos += 8;
          break;
        case 0xcc: // uint 8-64, int 8-64
        case 0xd0:
          pos += 1;
          break;
        case 0xcd:
        case 0xd1:
          pos += 2;
          break;
        case 0xce:
        case 0xd2:
          pos += 4;
          break;
        case 0xcf:
        case 0xd3:
          pos += 8;
          break;
        case 0xdc: // array 16, 32
          remaining += len(pos, 2);
          pos += 2;
          break;
        case 0xdd:
          remaining += len(pos, 4);
          pos += 4;
          break;
        case 0xde: // map 16, 32
          remaining += 2 * len(pos, 2);
          pos += 2;
          break;
        case 0xdf:
          remaining += 2 * len(pos, 4);
          pos += 4;
          break;
      }
    if (pos > b.length) malformed('truncated');
  }
  if (pos !== b.length) malformed(`${b.length - pos} bytes after the message`);
}
