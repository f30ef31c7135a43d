import { type CloseKind, CloseCodes } from './close-codes.js';

/** A message that must not be acted on; the connection is closed with `closeCode`. */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
  readonly closeCode: number;
  constructor(
    readonly kind: CloseKind,
    message: string,
  ) {
    super(message);
    this.closeCode = CloseCodes[kind].code;
  }
  get code(): string {
    return `ERR_PROTOCOL_${this.kind.toUpperCase()}`;
  }
}
