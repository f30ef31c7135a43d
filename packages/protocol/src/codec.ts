import { Packr } from 'msgpackr';
import { ProtocolError } from './errors.js';
import type { Message } from './messages.js';

/**
 * One configured Packr for every message. The bare msgpackr `pack` turns a Float64Array
 * into truncated bytes; `moreTypes` makes typed arrays round-trip (decoding copies them,
 * so they are aligned); `useRecords: false` keeps plain maps, readable by any MessagePack peer.
 */
const packr = new Packr({ moreTypes: true, useRecords: false });

export function encode(msg: Message): Buffer {
  return packr.pack(msg);
}

/** Decode bytes into an unvalidated value. Never trust the result before `validate*`. */
export function decode(bytes: Uint8Array): unknown {
  if (bytes.length === 0) throw new ProtocolError('malformed', 'empty frame');
  try {
    return packr.unpack(bytes);
  } catch (err) {
    throw new ProtocolError('malformed', `not a MessagePack document (${(err as Error).message})`);
  }
}
