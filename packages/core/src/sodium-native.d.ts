// The few libsodium bindings admm-share uses (sodium-native ships no types of its own; the
// @types package describes version 2). Each throws when libsodium reports failure.
declare module 'sodium-native' {
  /** X25519: out = x([clamp(n)] P) for the u-coordinate p; throws when the result is all zero (p of small order). */
  export function crypto_scalarmult(out: Uint8Array, n: Uint8Array, p: Uint8Array): void;
  /** Elligator 2 of a 32-byte string onto edwards25519, cofactor cleared (a point of the prime-order subgroup). */
  export function crypto_core_ed25519_from_uniform(out: Uint8Array, r: Uint8Array): void;
  /** SHA-512 of `input` into the 64 bytes of `out`. */
  export function crypto_hash_sha512(out: Uint8Array, input: Uint8Array): void;
}
