// A hash table from fixed-width byte keys to small integers, on typed arrays only: the PSI
// cache holds millions of 16- or 32-byte keys, where a JS Map of strings would cost a string
// and a map entry per key (about 100 bytes) and its hashing is not keyed.
//
// Keys may be chosen by a hostile peer (the points a party sends the coordinator), so the slot
// of a key comes from a hash drawn at random per table: simple tabulation over the key's bytes,
// h(x) = T_0[x_0] xor T_1[x_1] xor ... (one table of 256 words from the OS CSPRNG per byte
// position), the top l bits. It is 3-independent, and linear probing with it takes O(1)
// expected probes per operation on any set of keys chosen without seeing the tables (Patrascu
// and Thorup, "The power of simple tabulation hashing", 2012). A 2-independent hash is not
// enough for linear probing: Dietzfelbinger's multiply-add-shift (strongly universal here)
// gave keys that differ only in their last bytes a mean of 3 to 90 probes in 2-3 % of draws.
// The cheaper sum over 32-bit words with odd multipliers is worse still: keys that differ by
// 2^31 in two words collide under every choice of multipliers.
import { randomFillSync } from 'node:crypto';

/** Slot bits of a table whose keys get the tabulation hash: 2^24 keys (PSI_CACHE_MAX_ENTRIES stays below). */
const MAX_SLOT_BITS = 25;
const MIN_SLOT_BITS = 4;
/** Values are kept in an Int32Array, with -1 meaning absent. */
const MAX_VALUE = 2 ** 31 - 1;

/** Slot bits of a keyed table (its hash is a key's first 32 bits): 2^29 keys. */
const MAX_KEYED_SLOT_BITS = 30;

/** Bits of the smallest power-of-two slot count that holds `n` keys at load at most 1/2. */
function slotBits(n: number, keyed = false): number {
  const most = keyed ? MAX_KEYED_SLOT_BITS : MAX_SLOT_BITS;
  let bits = MIN_SLOT_BITS;
  while (2 ** bits < 2 * n) bits++;
  if (bits > most) throw new RangeError(`ByteTable: ${n} keys is more than the ${2 ** (most - 1)} its hash spreads evenly`);
  return bits;
}

/** A table's arrays and hash: what finding a key reads. */
interface TableArrays {
  readonly keyBytes: number;
  readonly keyed: boolean;
  /** The tabulation hash's tables, 256 random words per byte position (word 0 also masks a keyed table's hash). */
  readonly tab: Int32Array;
  /** Entry index + 1 per slot, 0 for an empty slot; a power of two in length. */
  slots: Int32Array;
  shift: number;
  /** The keys in the order they were added, keyBytes each. */
  keys: Uint8Array;
}

function slotHash(t: TableArrays, keys: Uint8Array, off: number): number {
  const tab = t.tab;
  if (t.keyed) return ((keys[off] | (keys[off + 1] << 8) | (keys[off + 2] << 16) | (keys[off + 3] << 24)) ^ tab[0]) >>> t.shift;
  let h = 0;
  for (let j = 0; j < t.keyBytes; j++) h ^= tab[(j << 8) | keys[off + j]];
  return h >>> t.shift;
}

/** The slot that holds the key at keys[off..], or the empty slot where it would go. */
function tableFind(t: TableArrays, keys: Uint8Array, off: number): number {
  const slots = t.slots;
  const mask = slots.length - 1;
  const kb = t.keyBytes;
  const stored = t.keys;
  let s = slotHash(t, keys, off);
  for (;;) {
    const e = slots[s];
    if (e === 0) return s;
    const base = (e - 1) * kb;
    let j = 0;
    while (j < kb && stored[base + j] === keys[off + j]) j++;
    if (j === kb) return s;
    s = (s + 1) & mask;
  }
}

/**
 * Open addressing (linear probing) from fixed-width byte keys to uint32 values below 2^31.
 * `keyed`: the keys are outputs of a keyed function no peer can steer (a keyed digest, or a
 * point blinded with this side's secret key), so their first 32 bits already spread evenly and
 * serve as the hash (a third of the time of a lookup); any other keys get the hash above.
 */
export class ByteTable {
  readonly keyBytes: number;
  readonly keyed: boolean;
  readonly #t: TableArrays;
  /** Values by entry; absent while every value set equals its entry's index (the point caches), which saves 4 bytes a key. */
  #values: Int32Array | undefined;
  /** Room for this many keys in #t.keys. */
  #capacity: number;
  #size = 0;

  constructor(keyBytes: number, expected = 0, keyed = false) {
    if (!Number.isInteger(keyBytes) || keyBytes < 1 || keyBytes > 256) throw new RangeError(`ByteTable: key width ${keyBytes} is not an integer from 1 to 256`);
    if (keyed && keyBytes < 4) throw new RangeError(`ByteTable: keyed keys of ${keyBytes} bytes: a keyed table reads the first 4 bytes as its hash`);
    this.keyBytes = keyBytes;
    this.keyed = keyed;
    this.#capacity = Math.max(8, Math.ceil(expected));
    const bits = slotBits(this.#capacity, keyed);
    this.#t = { keyBytes, keyed, tab: randomFillSync(new Int32Array(keyBytes * 256)), slots: new Int32Array(2 ** bits), shift: 32 - bits, keys: new Uint8Array(this.#capacity * keyBytes) };
  }

  /**
   * A table of the first `count` keys in `keys` (keyBytes each), key e with value e, over `keys`
   * itself as its storage (not copied: a table read from a file costs no second copy of its
   * keys while it is built; the array's room beyond `count` keys takes later sets). A key that
   * appears twice is refused.
   */
  static adopt(keyBytes: number, keys: Uint8Array, keyed = false, count = keys.length / keyBytes): ByteTable {
    const capacity = keys.length / keyBytes;
    if (!Number.isInteger(capacity)) throw new RangeError(`ByteTable: ${keys.length} bytes is not a whole number of ${keyBytes}-byte keys`);
    if (!Number.isInteger(count) || count < 0 || count > capacity) throw new RangeError(`ByteTable: ${count} keys adopted from an array of ${capacity}`);
    const table = new ByteTable(keyBytes, 0, keyed);
    const t = table.#t;
    const bits = slotBits(count, keyed);
    t.keys = keys;
    table.#capacity = capacity;
    t.slots = new Int32Array(2 ** bits);
    t.shift = 32 - bits;
    for (let e = 0; e < count; e++) {
      const s = tableFind(t, keys, e * keyBytes);
      if (t.slots[s] !== 0) throw new RangeError(`ByteTable: key ${e} repeats key ${t.slots[s] - 1}`);
      t.slots[s] = e + 1;
      table.#size = e + 1;
    }
    return table;
  }

  get size(): number {
    return this.#size;
  }

  /** Value of the key at keys[off .. off+keyBytes), or -1. */
  get(keys: Uint8Array, off: number): number {
    this.#check(keys, off);
    const e = this.#t.slots[tableFind(this.#t, keys, off)];
    return e === 0 ? -1 : this.#valueOf(e - 1);
  }

  /** Sets it; returns the previous value or -1. */
  set(keys: Uint8Array, off: number, value: number): number {
    if (!Number.isInteger(value) || value < 0 || value > MAX_VALUE) throw new RangeError(`ByteTable: value ${value} is not an integer from 0 to 2^31 - 1`);
    this.#check(keys, off);
    const t = this.#t;
    let s = tableFind(t, keys, off);
    const found = t.slots[s];
    if (found !== 0) {
      const previous = this.#valueOf(found - 1);
      this.#setValue(found - 1, value);
      return previous;
    }
    const e = this.#size;
    if (e === this.#capacity) this.#grow(Math.max(8, Math.ceil(this.#capacity * 1.5)));
    if (2 * (e + 1) > t.slots.length) {
      this.#rehash(slotBits(e + 1, this.keyed));
      s = tableFind(t, keys, off);
    }
    const kb = this.keyBytes;
    for (let j = 0; j < kb; j++) t.keys[e * kb + j] = keys[off + j];
    t.slots[s] = e + 1;
    this.#size = e + 1;
    this.#setValue(e, value);
    return -1;
  }

  /** Makes room for `n` keys in all, so that adding up to that many allocates nothing more. */
  reserve(n: number): void {
    if (n > this.#capacity) this.#grow(Math.max(n, Math.ceil(this.#capacity * 1.125)));
    if (2 * n > this.#t.slots.length) this.#rehash(slotBits(n, this.keyed));
  }

  /** The keys in the order they were first set, keyBytes each: a view, valid until the next set or reserve. */
  keys(): Uint8Array {
    return this.#t.keys.subarray(0, this.#size * this.keyBytes);
  }

  /** Slots looked at to find the key at keys[off..] (or its absence): 1 unless keys share slots. */
  probes(keys: Uint8Array, off: number): number {
    const mask = this.#t.slots.length - 1;
    const end = tableFind(this.#t, keys, off);
    return ((end - slotHash(this.#t, keys, off)) & mask) + 1;
  }

  #check(keys: Uint8Array, off: number): void {
    if (!(Number.isInteger(off) && off >= 0 && off + this.keyBytes <= keys.length)) throw new RangeError(`ByteTable: a key at ${off} runs past the ${keys.length} bytes given`);
  }

  #valueOf(e: number): number {
    return this.#values === undefined ? e : this.#values[e];
  }

  #setValue(e: number, value: number): void {
    if (this.#values === undefined) {
      if (value === e) return;
      this.#values = new Int32Array(this.#capacity);
      for (let i = 0; i < this.#size; i++) this.#values[i] = i;
    }
    this.#values[e] = value;
  }

  #grow(capacity: number): void {
    const keys = new Uint8Array(capacity * this.keyBytes);
    keys.set(this.keys());
    this.#t.keys = keys;
    if (this.#values !== undefined) {
      const values = new Int32Array(capacity);
      values.set(this.#values.subarray(0, this.#size));
      this.#values = values;
    }
    this.#capacity = capacity;
  }

  #rehash(bits: number): void {
    const t = this.#t;
    const slots = new Int32Array(2 ** bits);
    t.slots = slots;
    t.shift = 32 - bits;
    const mask = slots.length - 1;
    for (let e = 0; e < this.#size; e++) {
      let s = slotHash(t, t.keys, e * this.keyBytes);
      while (slots[s] !== 0) s = (s + 1) & mask;
      slots[s] = e + 1;
    }
  }
}
