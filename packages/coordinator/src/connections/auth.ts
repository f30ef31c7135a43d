/**
 * Authentication of a hello, as a pure function: protocol version, the allow-list of party
 * ids, the proof of the party's secret over this connection's challenge, the job id, and the
 * row caps. It decides whether the hello is a first join or a rejoin and throws a
 * ProtocolError (which names the close code) otherwise. No I/O, no state.
 */
import { timingSafeEqual } from 'node:crypto';
import { helloProof } from '@admm-share/core';
import { type CloseKind, type Hello, PROTOCOL_VERSION, ProtocolError } from '@admm-share/protocol';

export interface AuthPolicy {
  parties: readonly string[];
  credentials?: Readonly<Record<string, string>>;
  jobId: string;
  /** Largest row count a party may declare (bounds memory and frame sizes). */
  maxRows: number;
  /**
   * A prediction job: why the party's model (hello.model) is not the job's, or undefined. A
   * training job refuses every hello that carries a model.
   */
  modelMismatch?: (hello: Hello) => string | undefined;
}

/** What the registry knows of the party the hello names. */
export interface PartyStanding {
  /** absent: never joined (or left before the job started); away: lost its connection to a running job. */
  status: 'absent' | 'connected' | 'away';
  /** Features it declared when it first joined (0: not known, e.g. after a coordinator restart). */
  features: number;
  /** Whether new parties may still join (the job has not started). */
  joinOpen: boolean;
}

export type Admission = 'join' | 'rejoin';

export function admitHello(hello: Hello, nonce: Uint8Array, policy: AuthPolicy, standing: PartyStanding): Admission {
  const refuse = (kind: CloseKind, detail: string): never => {
    throw new ProtocolError(kind, detail);
  };
  if (hello.protocolVersion !== PROTOCOL_VERSION)
    refuse('versionMismatch', `coordinator speaks version ${PROTOCOL_VERSION}, party ${hello.partyId} sent version ${hello.protocolVersion}`);
  // The reason does not list the configured ids: an unauthenticated client learns nothing from it.
  if (!policy.parties.includes(hello.partyId)) refuse('unknownParty', `'${hello.partyId}' is not a party of this job`);
  if (policy.credentials) {
    // Same message for a missing and a wrong proof; constant-time comparison.
    const expected = helloProof(policy.credentials[hello.partyId], nonce, hello.partyId, hello.jobId);
    if (!hello.proof || !timingSafeEqual(Buffer.from(hello.proof), Buffer.from(expected))) refuse('unauthorized', `bad or missing credential for '${hello.partyId}'`);
  }
  if (hello.jobId !== null && hello.jobId !== policy.jobId) refuse('wrongJob', `party wants job '${hello.jobId}', this is job '${policy.jobId}'`);
  const mismatch = policy.modelMismatch
    ? policy.modelMismatch(hello)
    : hello.model && `party ${hello.partyId} came to score with the model of job ${hello.model.jobId}, but this coordinator trains job ${policy.jobId} (score with admm-coordinator predict or serve)`;
  if (mismatch) refuse('wrongModel', mismatch);
  if (hello.trainRows > policy.maxRows || hello.testRows > policy.maxRows)
    refuse('invalid', `party declares ${Math.max(hello.trainRows, hello.testRows)} rows; limit is ${policy.maxRows}`);
  if (standing.status === 'connected') refuse('duplicateParty', `'${hello.partyId}' is already connected`);
  if (standing.status === 'away') {
    if (standing.features > 0 && hello.features !== standing.features)
      refuse('alignment', `party ${hello.partyId} rejoins with ${hello.features} features, it had ${standing.features}`);
    return 'rejoin';
  }
  if (!standing.joinOpen) refuse('unexpected', 'the job has already started');
  return 'join';
}
