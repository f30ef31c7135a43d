/**
 * WebSocket close codes used by admm-share (4000-4999 is the range RFC 6455 leaves to
 * applications). The reason string sent with a close is the `reason` here followed by a
 * detail; both sides log it.
 */
export const CloseCodes = {
  /** The job finished; the coordinator closes every party with this. */
  done: { code: 1000, reason: 'job done' },
  versionMismatch: { code: 4001, reason: 'protocol version mismatch' },
  /** The bytes were not a MessagePack document. */
  malformed: { code: 4002, reason: 'malformed message' },
  /** A well-formed document that is not a valid message (wrong fields, length, non-finite value...). */
  invalid: { code: 4003, reason: 'invalid message' },
  /** A valid message at the wrong time (wrong state, round or job). */
  unexpected: { code: 4004, reason: 'unexpected message' },
  unknownParty: { code: 4005, reason: 'unknown party' },
  duplicateParty: { code: 4006, reason: 'duplicate party' },
  wrongJob: { code: 4007, reason: 'wrong job id' },
  alignment: { code: 4008, reason: 'sample alignment failed' },
  /** Another participant failed; the job cannot go on. */
  aborted: { code: 4009, reason: 'job aborted' },
  helloTimeout: { code: 4010, reason: 'no hello in time' },
  internal: { code: 4011, reason: 'internal error' },
  /** The party's own data or state cannot continue (for example a failed factorisation). */
  partyFailure: { code: 4012, reason: 'party failure' },
  /** The hello's proof is missing or does not match the party's credential. */
  unauthorized: { code: 4013, reason: 'authentication failed' },
  /** Too many connections are waiting to say hello. */
  busy: { code: 4014, reason: 'too many pending connections' },
  /** The peer does not read what it is sent. */
  slowReader: { code: 4015, reason: 'not reading' },
  /** The peer did not answer within the deadline. */
  timeout: { code: 4016, reason: 'no answer in time' },
} as const;

export type CloseKind = keyof typeof CloseCodes;

const byCode = new Map<number, CloseKind>(
  (Object.keys(CloseCodes) as CloseKind[]).map((k) => [CloseCodes[k].code, k]),
);

export function closeKindOf(code: number): CloseKind | undefined {
  return byCode.get(code);
}

/** Close reasons are limited to 123 bytes of UTF-8 by RFC 6455. */
export function closeReason(kind: CloseKind, detail?: string): string {
  const text = detail ? `${CloseCodes[kind].reason}: ${detail}` : CloseCodes[kind].reason;
  let buf = Buffer.from(text, 'utf8');
  if (buf.length <= 123) return text;
  buf = buf.subarray(0, 120);
  // Drop a partial UTF-8 sequence at the cut.
  return buf.toString('utf8').replace(/\uFFFD+$/, '') + '...';
}
