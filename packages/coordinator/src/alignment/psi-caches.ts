/**
 * The coordinator's PSI caches (--psi-cache DIR, docs/privacy.md 11.7): a name for them all
 * (DIR/name, sent in every challenge, under which each party keeps its cache with this
 * coordinator), and per party a folder DIR/parties/ID with this coordinator's key a for that
 * party, the label ids' points H(id)^ab the party answered, and the party's points H(y)^b
 * blinded again with a. The party's hello names the cache it holds; the intersection is warm
 * only when both hold the same one, and otherwise starts a new one and says why.
 */
import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type PsiCacheLog, type PsiCacheSettings, ConfigError, DataError, PsiCache, writeFileAtomic } from '@admm-share/core';
import { PSI_CACHE_ID_RE } from '@admm-share/protocol';

/** The cache an intersection with one party uses. */
export interface PartyCache {
  cache: PsiCache;
  /** The one the party named: only label ids not blinded before are sent. */
  warm: boolean;
}

export class CoordinatorPsiCaches {
  /** The name of this folder's caches (challenge.psiCache). */
  readonly name: string;
  private readonly opened = new Map<string, PsiCache | undefined>();

  constructor(
    private readonly opts: PsiCacheSettings,
    private readonly log: PsiCacheLog,
  ) {
    try {
      mkdirSync(join(opts.dir, 'parties'), { recursive: true, mode: 0o700 });
      accessSync(join(opts.dir, 'parties'), constants.W_OK);
      this.name = cacheName(join(opts.dir, 'name'));
    } catch (err) {
      if (err instanceof DataError) throw err;
      throw new ConfigError(`--psi-cache ${opts.dir}: cannot keep caches there (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }

  /**
   * The cache for `party`, whose hello named `announced` (null: none usable); undefined when
   * its folder cannot be read or written (logged; the party is then aligned without a cache).
   */
  forParty(party: string, announced: string | null): PartyCache | undefined {
    try {
      return this.cacheFor(party, announced);
    } catch (err) {
      if (!(err as NodeJS.ErrnoException).code) throw err;
      this.log.warn({ party, err: (err as Error).message }, 'psi cache: the folder cannot be used: no cache with this party');
      return undefined;
    }
  }

  /**
   * The cache this coordinator holds for `party`, opened now (before the party's hello: its
   * label points can be made while the parties start), or undefined if it has none usable.
   */
  held(party: string): PartyCache | undefined {
    try {
      this.open(party);
    } catch (err) {
      if (!(err as NodeJS.ErrnoException).code) throw err;
      return undefined;
    }
    const cache = this.opened.get(party);
    return cache ? { cache, warm: true } : undefined;
  }

  private open(party: string): void {
    if (this.opened.has(party)) return;
    const dir = join(this.opts.dir, 'parties', party);
    // Rotation and age apply once per process: a rejoin keeps the cache just made.
    const { cache, why, first } = PsiCache.open(dir, { tables: ['own', 'peer'], maxAgeDays: this.opts.maxAgeDays, rotate: this.opts.rotate });
    if (!cache) this.log[first ? 'info' : 'warn']({ party, cache: dir }, `psi cache: not used (${why})`);
    this.opened.set(party, cache);
  }

  private cacheFor(party: string, announced: string | null): PartyCache {
    const dir = join(this.opts.dir, 'parties', party);
    this.open(party);
    const mine = this.opened.get(party);
    if (mine && mine.id === announced) return { cache: mine, warm: true };
    const why = !mine ? 'this coordinator has no usable cache for it' : announced === null ? `the party has none (this coordinator's is ${mine.id})` : `the party holds cache ${announced}, this coordinator ${mine.id}`;
    const cache = PsiCache.create(dir, { tables: ['own', 'peer'], partner: party });
    this.log.info({ party, cache: cache.id }, `psi cache: a full intersection starts a new cache with party ${party}: ${why}`);
    this.opened.set(party, cache);
    return { cache, warm: false };
  }
}

/** The caches' name in `file`, made (128 random bits) the first time. */
function cacheName(file: string): string {
  if (!existsSync(file)) writeFileAtomic(file, `${randomBytes(16).toString('hex')}\n`, 0o600);
  const name = readFileSync(file, 'utf8').trim();
  if (!PSI_CACHE_ID_RE.test(name)) throw new DataError(file, 1, 'not a PSI cache name (32 hex digits): delete the file to start new caches');
  return name;
}
