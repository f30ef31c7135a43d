/**
 * A party's PSI caches (--psi-cache DIR, docs/privacy.md 11.7): one folder per coordinator,
 * named by the coordinator's cache name (challenge.psiCache), each with the key b this party
 * uses with that coordinator and its ids' points under it. The party names its cache in its
 * hello; the coordinator's psi says whether the intersection uses it (warm) or a new one it
 * names, which replaces it. Anything that makes a cache unusable (absent, corrupt, rotated,
 * too old) is logged with its reason, and the intersection is a full one with a new cache.
 *
 * One coordinator name per process: a coordinator that presents another name on a later
 * connection gets no cache at all (the process's own key), so that it cannot make the party
 * hash and blind all its ids anew at every connection.
 */
import { accessSync, constants, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type PsiCacheLog, type PsiCacheSettings, ConfigError, PsiCache } from '@admm-share/core';
import { ProtocolError } from '@admm-share/protocol';

export class PartyPsiCaches {
  /** The coordinator's cache name this process uses, and its cache (undefined: none usable yet). */
  private current: { name: string; cache: PsiCache | undefined } | undefined;
  /** This party could not use the cache it had (corrupt, rotated, too old): a new key is its own doing. */
  private lost = false;

  constructor(
    private readonly opts: PsiCacheSettings,
    private readonly log: PsiCacheLog,
  ) {
    try {
      mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
      accessSync(opts.dir, constants.W_OK);
    } catch (err) {
      throw new ConfigError(`--psi-cache ${opts.dir}: cannot write there (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }

  /** The hello's psiCache for a coordinator that names its caches `name` (absent: none, the process's own key). */
  announce(name: string | undefined): string | null | undefined {
    if (name === undefined) {
      this.log.info({}, 'psi cache: the coordinator keeps no PSI cache (no --psi-cache there): a full intersection with a key of this process');
      return undefined;
    }
    if (this.current && this.current.name !== name) {
      this.log.warn({ name, was: this.current.name }, 'psi cache: the coordinator names another cache than on its first connection: none is used with it in this process');
      return undefined;
    }
    if (!this.current) {
      // Rotation and age are applied once per process: a reconnection keeps the cache just made.
      const { cache, why, first } = PsiCache.open(this.folder(name), { tables: ['own'], maxAgeDays: this.opts.maxAgeDays, rotate: this.opts.rotate });
      if (!cache) this.log[first ? 'info' : 'warn']({ cache: this.folder(name) }, `psi cache: not used (${why}): a full intersection starts a new one`);
      this.lost = !cache && !first;
      this.current = { name, cache };
    }
    return this.current.cache?.id ?? null;
  }

  /** The cache this party named to a coordinator of this name (announce), if any. */
  named(name: string | undefined): PsiCache | undefined {
    return name !== undefined && this.current?.name === name ? this.current.cache : undefined;
  }

  /** Whether this party could not use its own cache in this process: a new label set under a new key is then its own doing (probe-budget.ts). */
  get ownCacheLost(): boolean {
    return this.lost;
  }

  /**
   * The cache a `psi` names: warm, the one this party named (anything else is the coordinator's
   * fault); new, made now with that id and a new key, replacing whatever this party had.
   */
  use(name: string | undefined, announced: string | null | undefined, c: { id: string; warm: boolean }): PsiCache {
    const current = this.current;
    if (name === undefined || announced === undefined || current?.name !== name) throw new ProtocolError('unexpected', 'psi.cache: this party named no PSI cache in its hello');
    if (c.warm) {
      if (!current.cache || current.cache.id !== c.id || announced !== c.id) throw new ProtocolError('invalid', `psi.cache: warm cache ${c.id}, but this party named ${announced ?? 'none'}`);
      return current.cache;
    }
    if (current.cache?.id === c.id) return current.cache;
    const made = PsiCache.create(this.folder(name), { tables: ['own'], id: c.id });
    this.log.info({ cache: made.dir, id: made.id }, `psi cache: a new cache with this coordinator${current.cache ? ` (replacing ${current.cache.id}, which it does not have)` : ''}`);
    current.cache = made;
    return made;
  }

  private folder(name: string): string {
    return join(this.opts.dir, name);
  }
}
