/** The fields every file the coordinator writes shares, declared once: ids, per-party maps, the bytes pair, the label classes. */
import { z } from '@admm-share/core';
import { DIGEST_RE, NAME_RE } from '@admm-share/protocol';

/** A job or party id (the protocol's names). */
export const nameSchema = z.string().regex(NAME_RE, 'not a valid name (letters, digits, . _ -)');

/** A SHA-256 as the files hold it: 64 lowercase hex characters (the protocol's digests). */
export const digestSchema = z.string().regex(DIGEST_RE, 'not a SHA-256 in hex (64 hex characters)');

/** A map keyed by party id. */
export const byParty = <T extends z.ZodType>(value: T) => z.record(nameSchema, value);

/** The bytes a job or a round moved on the parties' port, as the output files name them. */
export const bytesSchema = z.strictObject({ toCoordinator: z.int().min(0), fromCoordinator: z.int().min(0) });

/** logistic loss: which raw label became -1 and which +1 (the positive class of every probability); null otherwise. */
export const classesSchema = z.strictObject({ negative: z.string(), positive: z.string() }).nullable();
