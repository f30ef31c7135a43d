// The bytes and character codes the LIBSVM reader (in strings) and writer (in buffers) work with.
export const TAB = 0x09;
export const NEWLINE = 0x0a;
export const CR = 0x0d;
export const SPACE = 0x20;
export const HASH = 0x23;
export const PLUS = 0x2b;
export const MINUS = 0x2d;
export const DOT = 0x2e;
export const ZERO = 0x30;
export const NINE = 0x39;
export const COLON = 0x3a;
/** 10^k, exact for k <= 22. */
export const POW10: readonly number[] = Array.from({ length: 23 }, (_, k) => 10 ** k);
