/**
 * WebSocket close codes used by admm-share (4000-4999 is the range RFC 6455 leaves to
 * applications). The reason string sent with a close is the `reason` here followed by a
 * detail; both sides log it.
 */
export const CloseCodes = {
  /** The job finished; the coordinator closes every party with this. */
  done: { code: 1000, reason: 'job done' },
  /**
   * RFC 6455 "going away": the coordinator is stopping (a signal) after writing a checkpoint;
   * the parties keep reconnecting, and a coordinator started with --resume takes them back.
   */
  goingAway: { code: 1001, reason: 'going away' },
  /** RFC 6455 "message too big": sent by ws itself when a frame exceeds the receiver's maxPayload. */
  tooBig: { code: 1009, reason: 'message too big' },
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
  /** Prediction: the party's model is not the one the coordinator's job description names (job, features, preprocessing). */
  wrongModel: { code: 4017, reason: 'model mismatch' },
} as const;

export type CloseKind = keyof typeof CloseCodes;

/**
 * Codes RFC 6455 (section 7.4.1) reserves for the receiving side: no endpoint sends them,
 * ws reports them when the peer's close frame had no code (1005) or when the connection
 * ended without a close frame at all (1006: a crash, a cut cable, a dead peer).
 */
export const ReservedCloseCodes = {
  noStatus: { code: 1005, reason: 'closed without a status code' },
  abnormal: { code: 1006, reason: 'connection lost without a close frame' },
} as const;

/**
 * Close codes after which a party reconnects and rejoins the job (the connection broke or the
 * coordinator is going away) instead of failing, from its hello to the job's end (the
 * intersection included); PROTOCOL.md, "Rejoining".
 */
export const RETRIABLE_CLOSE_CODES: ReadonlySet<number> = new Set([
  CloseCodes.goingAway.code,
  ReservedCloseCodes.noStatus.code,
  ReservedCloseCodes.abnormal.code,
]);

/**
 * A scoring party (admm-party predict) also retries 4016: the coordinator gave up on one
 * request it did not answer in time (the party was frozen or slow for a while), not on the
 * service, which uses the party again once it is back. In training a 4016 ends the job.
 */
export const SCORING_RETRIABLE_CLOSE_CODES: ReadonlySet<number> = new Set([...RETRIABLE_CLOSE_CODES, CloseCodes.timeout.code]);

const byCode = new Map<number, CloseKind>(
  (Object.keys(CloseCodes) as CloseKind[]).map((k) => [CloseCodes[k].code, k]),
);

export function closeKindOf(code: number): CloseKind | undefined {
  return byCode.get(code);
}

/**
 * Bytes of UTF-8 a close reason may have: a control frame's payload is at most 125 bytes
 * (RFC 6455 section 5.5), two of which are the status code.
 */
export const MAX_CLOSE_REASON_BYTES = 123;
const ELLIPSIS = '...';

/** The reason string sent with a close: the kind's reason and the detail, cut to MAX_CLOSE_REASON_BYTES. */
export function closeReason(kind: CloseKind, detail?: string): string {
  const text = detail ? `${CloseCodes[kind].reason}: ${detail}` : CloseCodes[kind].reason;
  let buf = Buffer.from(text, 'utf8');
  if (buf.length <= MAX_CLOSE_REASON_BYTES) return text;
  buf = buf.subarray(0, MAX_CLOSE_REASON_BYTES - ELLIPSIS.length);
  // Drop a partial UTF-8 sequence at the cut.
  return buf.toString('utf8').replace(/\uFFFD+$/, '') + ELLIPSIS;
}
