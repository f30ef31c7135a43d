/**
 * simulation.json: what `admm-share simulate` adds beside the coordinator's summary.json (which
 * has one writer, the coordinator), declared once here as a schema with its writer and reader:
 * the baselines and the warnings against them, the run's files, each process's peak memory,
 * and the seconds of the whole simulation.
 */
import { join } from 'node:path';
import { nullAsNaN, readJsonFile, writeFileAtomic, z } from '@admm-share/core';

export const SIMULATION_FILE = 'simulation.json';

/** The majority class has no objective and a one-class test set no AUC: NaN, null in the file. */
const figure = nullAsNaN(z.number());

const baselineSchema = z.strictObject({
  objective: figure,
  test: z.strictObject({ logLoss: figure, accuracy: figure, auc: figure }).optional(),
});
/** A model trained by simulate outside the job: its training objective and, with a test set, its metrics. */
export type Baseline = z.output<typeof baselineSchema>;

export const simulationSchema = z.strictObject({
  /** Central on all features, party 1 alone, and (with a test set) the majority class. */
  baselines: z
    .strictObject({
      central: baselineSchema,
      local: baselineSchema.extend({ party: z.string() }),
      majority: baselineSchema.optional(),
    })
    .optional(),
  /** A run with noise whose model is worse than party 1 alone or than the majority class, in words. */
  warnings: z.array(z.string()).optional(),
  files: z.strictObject({ dir: z.string(), logs: z.string(), models: z.array(z.string()) }),
  /** Each process's peak resident memory in bytes: the coordinator's from its summary, each party's from its log. */
  peakMemory: z.record(z.string(), z.number().min(0)),
  /** The whole simulation, from loading the data to the baselines. */
  seconds: z.strictObject({ total: z.number().min(0) }),
});
export type Simulation = z.output<typeof simulationSchema>;

/** Write `dir`/simulation.json atomically (a reader never sees half of it). */
export function writeSimulation(dir: string, value: Simulation): void {
  writeFileAtomic(join(dir, SIMULATION_FILE), JSON.stringify(value, null, 2) + '\n');
}

/** Read a simulation.json; a DataError names the file and the field that is wrong. */
export function readSimulation(path: string): Simulation {
  return readJsonFile(simulationSchema, path, 'simulation');
}
