// The check every reader of a file the coordinator writes gets: each kind of malformed file is
// a DataError that names the file and matches what is wrong.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { DataError } from '@admm-share/core';

/** Each case mutates a copy of `good`, written to `path`; `read(path)` must then throw a DataError for `path` whose message matches. */
export function assertEachMalformed(path: string, good: unknown, cases: [(value: any) => void, RegExp][], read: (path: string) => unknown): void {
  for (const [mutate, message] of cases) {
    const value = structuredClone(good);
    mutate(value);
    writeFileSync(path, JSON.stringify(value));
    assert.throws(() => read(path), (err: unknown) => err instanceof DataError && err.file === path && message.test(err.message), String(message));
  }
}
