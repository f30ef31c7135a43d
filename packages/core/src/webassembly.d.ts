// The part of the WebAssembly JavaScript API that wasm-kernels.ts uses. Node has it as a global;
// the project's `lib` (no DOM) and @types/node 20 do not declare it.
declare namespace WebAssembly {
  class Module {
    constructor(bytes: Uint8Array);
  }
  class Memory {
    constructor(descriptor: { initial: number; maximum: number; shared: boolean });
    /** A SharedArrayBuffer when the memory is shared, else an ArrayBuffer. */
    readonly buffer: ArrayBufferLike;
  }
  class Instance {
    constructor(module: Module, imports?: Record<string, Record<string, unknown>>);
    readonly exports: Record<string, unknown>;
  }
}
