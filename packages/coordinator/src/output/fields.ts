/** The fields every file the coordinator writes shares, declared once: ids, per-party maps, the bytes pair. */
import { z } from '@admm-share/core';
import { NAME_RE } from '@admm-share/protocol';

/** A job or party id (the protocol's names). */
export const nameSchema = z.string().regex(NAME_RE, 'not a valid name');

/** A map keyed by party id. */
export const byParty = <T extends z.ZodType>(value: T) => z.record(nameSchema, value);

/** The bytes a job or a round moved on the parties' port, as the output files name them. */
export const bytesSchema = z.strictObject({ toCoordinator: z.int().min(0), fromCoordinator: z.int().min(0) });
