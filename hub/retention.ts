import { SwarmError } from '../protocol/errors.js';

/** How long and how many finished tasks the hot state keeps (memory, journal, replicas). */
export interface RetainOptions {
  /** A finished task older than this (since it finished) leaves the hot state. */
  ageMs: number;
  /** At most this many finished tasks stay hot; the oldest leave first. */
  count: number;
}

/** The default horizon: a day, or 100,000 finished tasks, whichever is reached first. */
export const DEFAULT_RETAIN: Readonly<RetainOptions> = Object.freeze({ ageMs: 24 * 3600_000, count: 100_000 });

/**
 * The most finished tasks `--retain` may keep hot. The duplicate window is allocated at the count
 * (about 90 bytes an id, hub/dup-window.ts) and the hot state holds each task's text besides, so a
 * count past this would ask for gigabytes at the first eviction rather than fail here.
 */
export const MAX_RETAIN_COUNT = 10_000_000;
/** The longest `--retain` age: a year. */
export const MAX_RETAIN_MS = 366 * 86_400_000;

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
    if (ms > MAX_RETAIN_MS) throw bad(`age ${JSON.stringify(a.trim())} is longer than 366d`);
    out.ageMs = ms;
  }
  if (c.trim()) {
    const n = /^\d+$/.test(c.trim()) ? Number(c.trim()) : NaN;
    if (!Number.isInteger(n) || n < 1) throw bad(`count ${JSON.stringify(c.trim())} is not a positive integer`);
    if (n > MAX_RETAIN_COUNT) throw bad(`count ${n} is more than ${MAX_RETAIN_COUNT} (each is kept in memory, with its id in the duplicate window)`);
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

  /**
   * Rebuild from finished tasks in any order (replay), `ids[i]` finished at `ats[i]`: sorted by the
   * time they finished. Replay finds them mostly in that order already: then they are kept as given
   * (no object per task to sort).
   */
  load(ids: string[], ats: number[]): void {
    let sorted = true;
    for (let i = 1; i < ats.length && sorted; i++) sorted = ats[i - 1]! <= ats[i]!;
    if (sorted) { this.ids = ids; this.ats = ats; this.head = 0; return; }
    const order = Array.from(ids.keys()).sort((x, y) => ats[x]! - ats[y]! || x - y);
    this.ids = order.map((i) => ids[i]!);
    this.ats = order.map((i) => ats[i]!);
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

  /** When the latest finished task held finished (0 if none). */
  get latest(): number { return this.size ? this.ats[this.ats.length - 1]! : 0; }

  /**
   * When the oldest finished task held went past the horizon: its age reached, or the count passed
   * (when the task `count` places after it finished). Undefined if none is held.
   */
  dueSince(): number | undefined {
    if (!this.size) return undefined;
    const byAge = this.ats[this.head]! + this.opts.ageMs;
    const byCount = this.size > this.opts.count ? this.ats[this.head + this.opts.count]! : Infinity;
    return Math.min(byAge, byCount);
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

/**
 * How long the first retention pass after an open waits: `settleMs` (a restarted hub serves its
 * workers and clients first), unless the journal shows that the lives before this one missed their
 * passes: the oldest finished task was already past the horizon for longer than `settleMs` by the
 * last time a hub wrote (`lastWritten`). A hub killed every few seconds never reached its first pass,
 * and the hot state grew with every life; this one evicts at once. Time the hub was down is not
 * counted, so a restart after a long stop still waits.
 */
export function firstPassDelay(r: Retention, lastWritten: number, settleMs: number): number {
  if (!r.size) return 0;
  const since = r.dueSince();
  return since !== undefined && lastWritten - since > settleMs ? 0 : settleMs;
}
