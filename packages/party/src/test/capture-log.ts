// A pino logger for tests that keeps what it writes, so that a test can look for a warning.
import { Writable } from 'node:stream';
import pino from 'pino';

export function capture(): { log: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)));
      cb();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}
