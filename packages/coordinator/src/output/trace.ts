/**
 * The per-round trace (trace.jsonl): one JSON object per line, as either training loop writes
 * it, declared once here as a schema; a resumed job reads back the lines it keeps.
 */
import { closeSync, existsSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { readJsonLinesFile, z } from '@admm-share/core';
import { byParty, bytesSchema } from './fields.js';
import { testMetricsSchema } from './test-metrics.js';

export const traceLineSchema = z.strictObject({
  round: z.int().min(1),
  objective: z.number(),
  seconds: z.number().min(0),
  roundSeconds: z.number().min(0),
  bytes: bytesSchema,
  primal: z.number().min(0).optional(),
  dual: z.number().min(0).optional(),
  rho: z.number().positive().optional(),
  epoch: z.int().min(1).optional(),
  lr: z.number().positive().optional(),
  steps: z.int().min(0).optional(),
  epsilonSpent: byParty(z.number().min(0)).optional(),
  /** Per party id: the x-update's conjugate gradient iterations and final relative residual (blocks too large to factor, no privacy). */
  solver: byParty(z.strictObject({ iterations: z.int().min(0), residual: z.number().min(0) })).optional(),
  test: testMetricsSchema.optional(),
});
/** One line of trace.jsonl. */
export type TraceLine = z.output<typeof traceLineSchema>;

export const TRACE_FILE = 'trace.jsonl';

/**
 * The per-round trace, one JSON object per line. Written to `trace.jsonl.partial` as the
 * job runs and renamed to `trace.jsonl` when it completes, so a `trace.jsonl` is always whole.
 */
export class TraceWriter {
  private readonly fd: number;
  private readonly partial: string;

  /** `keepUpTo`: a resumed job keeps the lines of the rounds up to its checkpoint; `onLine` sees each new line (the job's monitor). */
  constructor(
    private readonly dir: string,
    private readonly log: Logger,
    private readonly maxRounds: number,
    keepUpTo?: number,
    private readonly onLine?: (line: TraceLine) => void,
  ) {
    mkdirSync(dir, { recursive: true });
    this.partial = join(dir, `${TRACE_FILE}.partial`);
    const kept = keepUpTo !== undefined && existsSync(this.partial) ? keptLines(this.partial, keepUpTo) : '';
    this.fd = openSync(this.partial, 'w');
    if (kept) writeSync(this.fd, kept);
  }

  write(line: TraceLine): void {
    writeSync(this.fd, JSON.stringify(line) + '\n');
    this.log.info({ ...line, maxRounds: this.maxRounds }, 'round');
    this.onLine?.(line);
  }

  close(complete: boolean): void {
    closeSync(this.fd);
    if (complete) renameSync(this.partial, join(this.dir, TRACE_FILE));
  }
}

/** The lines of a partial trace up to round `keepUpTo`, each checked by readTrace. */
function keptLines(path: string, keepUpTo: number): string {
  return readTrace(path)
    .filter((line) => line.round <= keepUpTo)
    .map((line) => JSON.stringify(line) + '\n')
    .join('');
}

/** The lines of a trace.jsonl (blank lines skipped), each checked against traceLineSchema; a DataError names the file, the line and the field. */
export function readTrace(path: string): TraceLine[] {
  return readJsonLinesFile(traceLineSchema, path, 'trace line');
}
