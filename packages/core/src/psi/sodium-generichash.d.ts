// BLAKE2b from sodium-native, for the PSI cache's keyed id digests. Kept beside its one user
// rather than in core's sodium-native.d.ts so that this change adds a file only; the two
// declarations of the module merge.
declare module 'sodium-native' {
  /** BLAKE2b of `input` into `output` (16 to 64 bytes), keyed when `key` (16 to 64 bytes) is given. */
  export function crypto_generichash(output: Uint8Array, input: Uint8Array, key?: Uint8Array): void;
}
