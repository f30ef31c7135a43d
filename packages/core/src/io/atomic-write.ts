// Writing a file so that a reader never sees half of it.
import { closeSync, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** The temporary file an atomic write of `path` goes through: same directory, this process's. */
function atomicTemp(path: string): string {
  return join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
}

/**
 * Write a file so that readers see either the old content or the whole new one:
 * write a temporary file in the same directory, fsync it, rename it over the target.
 * `data` may come in chunks, written one after the other (a large file need not be copied whole first).
 */
export function writeFileAtomic(path: string, data: string | Uint8Array | readonly Uint8Array[], mode = 0o644): void {
  const tmp = atomicTemp(path);
  let fd: number | undefined;
  // A temporary file left behind by a crashed process (same pid) would keep its old mode if
  // opened with 'w'; removing it and creating the file afresh makes `mode` apply (0600 secrets).
  try {
    unlinkSync(tmp);
  } catch {
    /* none left behind */
  }
  try {
    fd = openSync(tmp, 'wx', mode);
    for (const chunk of typeof data === 'string' ? [Buffer.from(data, 'utf8')] : data instanceof Uint8Array ? [data] : data) writeSync(fd, chunk);
    fsyncSync(fd);
    closeSync(fd);
    fd = undefined;
    renameSync(tmp, path);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    try {
      unlinkSync(tmp);
    } catch {
      /* already gone */
    }
    throw err;
  }
}

/**
 * writeFileAtomic off the caller's thread (Node's file system threads; `data` whole or in chunks): the same steps and
 * temporary file, so at most one write of a given path may be in flight at a time.
 */
export async function writeFileAtomicAsync(path: string, data: Uint8Array | readonly Uint8Array[], mode = 0o644): Promise<void> {
  const tmp = atomicTemp(path);
  await unlink(tmp).catch(() => undefined);
  try {
    const handle = await open(tmp, 'wx', mode);
    try {
      let at = 0;
      for (const chunk of data instanceof Uint8Array ? [data] : data)
        for (let k = 0; k < chunk.length; ) {
          const { bytesWritten } = await handle.write(chunk, k, chunk.length - k, at);
          k += bytesWritten;
          at += bytesWritten;
        }
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}
