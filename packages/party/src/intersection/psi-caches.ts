/**
 * A party's PSI caches (--psi-cache DIR, docs/privacy.md 11.7): one folder per coordinator,
 * named by the coordinator's cache name (challenge.psiCache), each with the key b this party
 * uses with that coordinator and its ids' points under it. The party names its cache in its
 * hello; the coordinator's psi says whether the intersection uses it (warm) or a new one it
 * names, which replaces it. Anything that makes a cache unusable (absent, corrupt, rotated,
 * too old) is logged with its reason, and the intersection is a full one with a new cache.
 */
import { join } from 'node:path';
import { PsiCache } from '@admm-share/core';
import { ProtocolError } from '@admm-share/protocol';

/** runtime's PsiCacheFlags: the folder, --psi-rotate (applied once per process) and --psi-max-age. */
export interface PsiCacheOptions {
  dir: string;
  rotate: boolean;
  maxAgeDays: number;
}

/** Where the caches' decisions are said (the party's logger). */
export interface CacheLog {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
}

export class PartyPsiCaches {
  /** Per coordinator cache name: the cache opened (or made), or undefined when none is usable yet. */
  private readonly opened = new Map<string, PsiCache | undefined>();

  constructor(
    private readonly opts: PsiCacheOptions,
    private readonly log: CacheLog,
  ) {}

  /** The hello's psiCache for a coordinator that names its caches `name` (absent: it keeps none). */
  announce(name: string | undefined): string | null | undefined {
    if (name === undefined) {
      this.log.info({}, 'psi cache: the coordinator keeps no PSI cache (no --psi-cache there): a full intersection with a key of this process');
      return undefined;
    }
    if (!this.opened.has(name)) {
      // Rotation and age are applied once per process: a reconnection keeps the cache just made.
      const { cache, why, first } = PsiCache.open(this.folder(name), { tables: ['own'], maxAgeDays: this.opts.maxAgeDays, rotate: this.opts.rotate });
      if (!cache) this.log[first ? 'info' : 'warn']({ cache: this.folder(name) }, `psi cache: not used (${why}): a full intersection starts a new one`);
      this.opened.set(name, cache);
    }
    return this.opened.get(name)?.id ?? null;
  }

  /**
   * The cache a `psi` names: warm, the one this party named (anything else is the coordinator's
   * fault); new, made now with that id and a new key, replacing whatever this party had.
   */
  use(name: string | undefined, announced: string | null | undefined, c: { id: string; warm: boolean }): PsiCache {
    if (name === undefined || announced === undefined) throw new ProtocolError('unexpected', 'psi.cache: this party named no PSI cache in its hello');
    const current = this.opened.get(name);
    if (c.warm) {
      if (!current || current.id !== c.id || announced !== c.id) throw new ProtocolError('invalid', `psi.cache: warm cache ${c.id}, but this party named ${announced ?? 'none'}`);
      return current;
    }
    if (current?.id === c.id) return current;
    const made = PsiCache.create(this.folder(name), { tables: ['own'], id: c.id });
    this.log.info({ cache: made.dir, id: made.id }, `psi cache: a new cache with this coordinator${current ? ` (replacing ${current.id}, which it does not have)` : ''}`);
    this.opened.set(name, made);
    return made;
  }

  private folder(name: string): string {
    return join(this.opts.dir, name);
  }
}
