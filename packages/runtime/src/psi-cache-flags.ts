// The flags of the PSI cache (docs/privacy.md 11.7), the same at a party and at the coordinator.
import { resolve } from 'node:path';
import type { Argv } from 'yargs';
import type { PsiCacheSettings } from '@admm-share/core';
import { requirePositive } from './cli-support.js';

/** Days a PSI cache is used before a new key and cache replace it (--psi-max-age). */
export const PSI_MAX_AGE_DAYS = 90;

/** The flags' settings (core's PsiCacheSettings). */
export type PsiCacheFlags = PsiCacheSettings;

/** Adds --psi-cache, --psi-rotate and --psi-max-age; `partner` names the other side. */
export function psiCacheOptions<T>(y: Argv<T>, partner: string) {
  return y
    .option('psi-cache', {
      type: 'string',
      describe: `keep the private set intersection's key and blinded ids for each ${partner} in this folder, so that a later job or prediction blinds only ids not seen before (opt-in: the ${partner} can then link the same id across jobs; docs/privacy.md 11.7)`,
    })
    .option('psi-rotate', { type: 'boolean', default: false, describe: 'with --psi-cache: start a new key and cache (the old ones are deleted)' })
    .option('psi-max-age', { type: 'number', default: PSI_MAX_AGE_DAYS, describe: 'with --psi-cache: days a cache is used before a new key and cache replace it' });
}

/** The cache settings, or undefined without --psi-cache. */
export function psiCacheFlags(a: { 'psi-cache'?: string; 'psi-rotate': boolean; 'psi-max-age': number }): PsiCacheFlags | undefined {
  if (a['psi-cache'] === undefined) return undefined;
  return { dir: resolve(a['psi-cache']), rotate: a['psi-rotate'], maxAgeDays: requirePositive('psi-max-age', a['psi-max-age']) };
}
