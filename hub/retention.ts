import { SwarmError } from '../protocol/index.js';

/** How long and how many finished tasks the hot state keeps (memory, journal, replicas). */
export interface RetainOptions {
  /** A finished task older than this (since it finished) leaves the hot state. */
  ageMs: number;
  /** At most this many finished tasks stay hot; the oldest leave first. */
  count: number;
}

/** The default horizon: a day, or 100,000 finished tasks, whichever is reached first. */
export const DEFAULT_RETAIN: Readonly<RetainOptions> = Object.freeze({ ageMs: 24 * 3600_000, count: 100_000 });

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3600_000, d: 86_400_000 };

/** `500ms`, `90s`, `15m`, `24h`, `7d` (a bare number is seconds) as milliseconds; NaN if unparsable. */
export function parseDuration(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(v);
  if (!m) return NaN;
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 's']!);
}

/**
 * `--retain <age>,<count>` (either part may be left out: `24h`, `,50000`, `1h,1000`). Zero, negative
 * or unparsable parts are refused with SWARM_ERR_CONFIG: a horizon of nothing would archive results
 * before anyone could wait for them.
 */
export function parseRetain(v: string): RetainOptions {
  const parts = v.split(',');
  const bad = (why: string) => new SwarmError('SWARM_ERR_CONFIG', `--retain ${JSON.stringify(v)}: ${why} (expected <age>,<count>, e.g. 24h,100000)`);
  if (parts.length > 2) throw bad('too many parts');
  const [a = '', c = ''] = parts;
  const out = { ...DEFAULT_RETAIN };
  if (a.trim()) {
    const ms = parseDuration(a);
    if (!(ms > 0)) throw bad(`age ${JSON.stringify(a.trim())} is not a positive duration (ms, s, m, h or d)`);
    out.ageMs = ms;
  }
  if (c.trim()) {
    const n = Number(c.trim());
    if (!Number.isInteger(n) || n < 1) throw bad(`count ${JSON.stringify(c.trim())} is not a positive integer`);
    out.count = n;
  }
  if (!a.trim() && !c.trim()) throw bad('empty');
  return out;
}

/**
 * Finished tasks in the order they finished: which of them are past the horizon now. `due` only
 * looks; `drop` commits once they are archived (an archive write that fails leaves them here).
 */
export class Retention {
  private ids: string[] = [];
  private ats: number[] = [];
  private head = 0;

  constructor(readonly opts: RetainOptions) {}

  /** Finished tasks held hot now. */
  get size(): number { return this.ids.length - this.head; }

  finished(id: string, at: number): void { this.ids.push(id); this.ats.push(at); }

  /** Rebuild from finished tasks in any order (replay): sorted by the time they finished. */
  load(done: Iterable<{ id: string; at: number }>): void {
    const all = [...done].sort((x, y) => x.at - y.at);
    this.ids = all.map((x) => x.id);
    this.ats = all.map((x) => x.at);
    this.head = 0;
  }

  /** The oldest finished ids over the horizon at `now`, at most `max`. */
  due(now: number, max: number): string[] {
    const cutoff = now - this.opts.ageMs;
    const out: string[] = [];
    for (let i = this.head; i < this.ids.length && out.length < max; i++) {
      if (this.size - out.length > this.opts.count || this.ats[i]! < cutoff) out.push(this.ids[i]!);
      else break;
    }
    return out;
  }

  /** The `n` oldest left the hot state. */
  drop(n: number): void {
    this.head += n;
    // Compact now and then, so the arrays do not keep every id ever finished.
    if (this.head > 65_536 && this.head * 2 > this.ids.length) {
      this.ids = this.ids.slice(this.head);
      this.ats = this.ats.slice(this.head);
      this.head = 0;
    }
  }
}

/** Where an evicted task's archive line is, and when it left the hot state. */
export interface Tombstone { file: number; offset: number; at: number; /** When the task was accepted, where known (evicted by this hub). */ acc?: number }

/**
 * Evicted ids, remembered for the duplicate window after they leave the hot state (as JetStream
 * remembers message ids for its duplicate window): resubmitting one is a duplicate that answers
 * with the archived result, and a handback cannot bring it back as new work. Bounded in age (the
 * horizon's age after eviction) and count (`cap`), so it does not grow with the swarm's age.
 */
export class Tombstones {
  private readonly map = new Map<string, Tombstone>();
  /**
   * The same in eviction order, oldest first, with a head index: forgetting the oldest must not walk
   * a Map from its front (V8 skips the deleted slots there one by one: quadratic at 100,000 ids).
   * An entry whose id was added again since is stale (its tombstone is not the one in the map).
   */
  private orderIds: string[] = [];
  /** Beside `orderIds` (two arrays, not an array of pairs: a pair cost 64 bytes an id, a quarter of the window's memory). */
  private orderStones: Tombstone[] = [];
  private head = 0;
  /** The latest acceptance time among the ids forgotten since the hub started (that had one). */
  forgottenAccepted = 0;
  /** At most this many ids (about 175 bytes each, the id included): the horizon's count, and never fewer than the default's. */
  readonly cap: number;

  constructor(private readonly opts: RetainOptions) { this.cap = Math.max(opts.count, DEFAULT_RETAIN.count); }

  get size(): number { return this.map.size; }
  get(id: string): Tombstone | undefined { return this.map.get(id); }
  has(id: string): boolean { return this.map.has(id); }

  add(id: string, t: Tombstone): void {
    this.map.delete(id);
    this.map.set(id, t);
    this.orderIds.push(id);
    this.orderStones.push(t);
    while (this.map.size > this.cap) this.dropOldest();
  }

  /** Forget ids evicted longer ago than the window. */
  prune(now: number): void {
    const cutoff = now - this.opts.ageMs;
    while (this.head < this.orderIds.length && this.orderStones[this.head]!.at < cutoff) this.dropOldest();
  }

  private dropOldest(): void {
    const id = this.orderIds[this.head]!, t = this.orderStones[this.head]!;
    this.head++;
    if (this.map.get(id) === t) {
      this.map.delete(id);
      if (t.acc !== undefined && t.acc > this.forgottenAccepted) this.forgottenAccepted = t.acc;
    }
    if (this.head > 65_536 && this.head * 2 > this.orderIds.length) {
      this.orderIds = this.orderIds.slice(this.head);
      this.orderStones = this.orderStones.slice(this.head);
      this.head = 0;
    }
  }

  /** Consecutive runs with one archive file and one eviction time (the snapshot's evict records). */
  *groups(max = 10_000): Iterable<{ file: number; at: number; ids: string[]; offsets: number[] }> {
    let cur: { file: number; at: number; ids: string[]; offsets: number[] } | undefined;
    for (const [id, t] of this.map) {
      if (!cur || cur.file !== t.file || cur.at !== t.at || cur.ids.length >= max) {
        if (cur) yield cur;
        cur = { file: t.file, at: t.at, ids: [], offsets: [] };
      }
      cur.ids.push(id);
      cur.offsets.push(t.offset);
    }
    if (cur) yield cur;
  }
}
