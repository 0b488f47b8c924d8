import { SwarmError } from '../protocol/errors.js';
import { parseSize } from '../protocol/bytes.js';

/** How long and how many finished tasks the hot state keeps (memory, journal, replicas). */
export interface RetainOptions {
  /** A finished task older than this (since it finished) leaves the hot state. */
  ageMs: number;
  /** At most this many finished tasks stay hot; the oldest leave first. */
  count: number;
  /**
   * At most this many bytes of finished tasks stay hot (`taskBytes`: their prompts and results, and
   * their records); the oldest leave first. Left out: DEFAULT_RETAIN's.
   */
  bytes?: number;
}

/**
 * The default horizon: a day, 100,000 finished tasks or 64 MiB of them, whichever is reached first.
 * The bytes bound what the hub's memory holds whatever the prompts' size: at 100,000 tasks of the
 * soak's prompts (100 B-16 KB, the result as long) the hub held 1.3-1.4 GB (deploy/render/hub-mem.ts
 * turns a horizon into the hub's memory limit; docs/journal.md has the measured figures).
 */
export const DEFAULT_RETAIN: Readonly<Required<RetainOptions>> = Object.freeze({ ageMs: 24 * 3600_000, count: 100_000, bytes: 64 * 2 ** 20 });

/**
 * The most finished tasks `--retain` may keep hot. The duplicate window is allocated at the count
 * (about 90 bytes an id, hub/dup-window.ts) and the hot state holds each task's text besides, so a
 * count past this would ask for gigabytes at the first eviction rather than fail here.
 */
export const MAX_RETAIN_COUNT = 10_000_000;
/** The longest `--retain` age: a year. */
export const MAX_RETAIN_MS = 366 * 86_400_000;
/** The most bytes `--retain` may keep hot: 1 TiB (a bound past any memory, not a setting to use). */
export const MAX_RETAIN_BYTES = 2 ** 40;

/** The horizon with every part given (a part left out is the default's). */
export function fullRetain(r: RetainOptions): Required<RetainOptions> { return { ...DEFAULT_RETAIN, ...r, bytes: r.bytes ?? DEFAULT_RETAIN.bytes }; }

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3600_000, d: 86_400_000 };

/** Milliseconds in the largest of d, h, m, s, ms that divides them: `7d`, `24h`, `90m`, `1500ms`. */
export function formatDuration(ms: number): string {
  // Hours up to two days: `24h` reads as the default it is.
  for (const u of ['d', 'h', 'm', 's'] as const) if (ms >= UNITS[u]! && ms % UNITS[u]! === 0 && (u !== 'd' || ms >= 2 * UNITS.d!)) return `${ms / UNITS[u]!}${u}`;
  return `${ms}ms`;
}

/** `500ms`, `90s`, `15m`, `24h`, `7d` (a bare number is seconds) as milliseconds; NaN if unparsable. */
export function parseDuration(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(v);
  if (!m) return NaN;
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 's']!);
}

/**
 * `256MB`, `1.5GiB`, `512k`, `100000B` as bytes (protocol/bytes.ts `parseSize`: KB, MB, GB powers of 1000;
 * KiB, MiB, GiB and the bare K, M, G of 1024); NaN if unparsable. A unit is required: a bare number in
 * a list of an age and a count reads too easily as one of those.
 */
export function parseBytes(v: string): number {
  if (!/[a-z]\s*$/i.test(v)) return NaN;
  try { return Math.floor(parseSize(v)); } catch { return NaN; }
}

/**
 * `--retain <age>,<count>,<bytes>` (any part may be left out: `24h`, `,50000`, `1h,1000`, `,,256MB`).
 * Zero, negative or unparsable parts are refused with SWARM_ERR_CONFIG: a horizon of nothing would
 * archive results before anyone could wait for them.
 */
export function parseRetain(v: string): Required<RetainOptions> {
  const parts = v.split(',');
  const bad = (why: string) => new SwarmError('SWARM_ERR_CONFIG', `--retain ${JSON.stringify(v)}: ${why} (expected <age>,<count>,<bytes>, each optional, e.g. 24h,100000,256MB)`);
  if (parts.length > 3) throw bad('too many parts');
  const [a = '', c = '', b = ''] = parts;
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
  if (b.trim()) {
    const n = parseBytes(b);
    if (!(n >= 1)) throw bad(`bytes ${JSON.stringify(b.trim())} is not a positive size with a unit (B, KB, MB, GB, KiB, MiB, GiB)`);
    if (n > MAX_RETAIN_BYTES) throw bad(`bytes ${JSON.stringify(b.trim())} is more than 1 TiB`);
    out.bytes = n;
  }
  if (!a.trim() && !c.trim() && !b.trim()) throw bad('empty');
  return out;
}

/** `--retain` for a command line that parseRetain reads back as `r`. */
export function retainString(r: RetainOptions): string { return `${r.ageMs}ms,${r.count},${fullRetain(r).bytes}B`; }

/**
 * How far past its bytes bound the hot state may grow while the archive pass catches up: past half
 * the bound again (at least 32 MiB), new tasks are refused (SWARM_ERR_QUEUE_FULL, 429) until it is
 * back under. Finished tasks leave only as fast as the pass writes them (two fsyncs a write, its turns
 * of the loop besides the hub's other work); a load that finished them faster (the soak at 650-1,600
 * tasks/s on 2 shared cores) grew the hot state past 300 MiB of a 64 MiB bound in two minutes, and
 * the hub was OOM-killed at the 640 MiB limit its render gives it. The hub's memory limit
 * (deploy/render/hub-mem.ts) holds `hotCeiling` hot.
 */
export const HOT_MARGIN = { share: 0.5, min: 32 * 2 ** 20 };

/** The most bytes of finished tasks held hot before new tasks are refused, for a bytes bound. */
export function hotCeiling(bytes: number): number { return bytes + Math.max(bytes * HOT_MARGIN.share, HOT_MARGIN.min); }

/**
 * Finished tasks in the order they finished, with the bytes each holds: which of them are past the
 * horizon now. `due` only looks; `drop` commits once they are archived (an archive write that fails
 * leaves them here).
 */
export class Retention {
  private ids: string[] = [];
  private ats: number[] = [];
  private sizes: number[] = [];
  private head = 0;
  /** Bytes of the finished tasks held (`taskBytes` of each, summed). */
  private held = 0;
  readonly opts: Required<RetainOptions>;

  constructor(opts: RetainOptions) { this.opts = fullRetain(opts); }

  /** Finished tasks held hot now. */
  get size(): number { return this.ids.length - this.head; }

  /** Their bytes. */
  get bytes(): number { return this.held; }

  /** Past `hotCeiling`: the archive pass is behind, and new work waits for it. */
  get behind(): boolean { return this.held > hotCeiling(this.opts.bytes); }

  finished(id: string, at: number, bytes = 0): void { this.ids.push(id); this.ats.push(at); this.sizes.push(bytes); this.held += bytes; }

  /**
   * Rebuild from finished tasks in any order (replay), `ids[i]` finished at `ats[i]` and holds
   * `bytes[i]`: sorted by the time they finished. Replay finds them mostly in that order already:
   * then they are kept as given (no object per task to sort).
   */
  load(ids: string[], ats: number[], bytes: number[] = ids.map(() => 0)): void {
    let sorted = true;
    for (let i = 1; i < ats.length && sorted; i++) sorted = ats[i - 1]! <= ats[i]!;
    this.head = 0;
    this.held = 0;
    for (const b of bytes) this.held += b;
    if (sorted) { this.ids = ids; this.ats = ats; this.sizes = bytes; return; }
    const order = Array.from(ids.keys()).sort((x, y) => ats[x]! - ats[y]! || x - y);
    this.ids = order.map((i) => ids[i]!);
    this.ats = order.map((i) => ats[i]!);
    this.sizes = order.map((i) => bytes[i]!);
  }

  /** The oldest finished ids over the horizon at `now`, at most `max`. */
  due(now: number, max: number): string[] {
    const cutoff = now - this.opts.ageMs;
    const out: string[] = [];
    let left = this.held;
    for (let i = this.head; i < this.ids.length && out.length < max; i++) {
      if (this.size - out.length > this.opts.count || left > this.opts.bytes || this.ats[i]! < cutoff) { out.push(this.ids[i]!); left -= this.sizes[i]!; }
      else break;
    }
    return out;
  }

  /** When the latest finished task held finished (0 if none). */
  get latest(): number { return this.size ? this.ats[this.ats.length - 1]! : 0; }

  /**
   * When the oldest finished task held went past the horizon: its age reached, the count passed
   * (when the task `count` places after it finished) or the bytes passed (when the task that took the
   * bytes from it on over the bound finished). Undefined if none is held.
   */
  dueSince(): number | undefined {
    if (!this.size) return undefined;
    const byAge = this.ats[this.head]! + this.opts.ageMs;
    const byCount = this.size > this.opts.count ? this.ats[this.head + this.opts.count]! : Infinity;
    let byBytes = Infinity;
    if (this.held > this.opts.bytes) {
      // Once, at open (firstPassDelay): the sum from the oldest on until it passes the bound.
      for (let i = this.head, sum = 0; i < this.ids.length; i++) {
        sum += this.sizes[i]!;
        if (sum > this.opts.bytes) { byBytes = this.ats[i]!; break; }
      }
    }
    return Math.min(byAge, byCount, byBytes);
  }

  /**
   * These ids left the hot state, wherever they stand (an archive batch recorded a pass late, when
   * other tasks may be due first: hub/archive-evict.ts). The oldest `n` in order, as they mostly
   * are, is `drop`; otherwise the rest is copied once without them.
   */
  forget(gone: readonly string[]): void {
    let prefix = gone.length <= this.size;
    for (let i = 0; i < gone.length && prefix; i++) prefix = this.ids[this.head + i] === gone[i];
    if (prefix) { this.drop(gone.length); return; }
    const set = new Set(gone);
    const ids: string[] = [], ats: number[] = [], sizes: number[] = [];
    this.held = 0;
    for (let i = this.head; i < this.ids.length; i++) {
      if (set.has(this.ids[i]!)) continue;
      ids.push(this.ids[i]!); ats.push(this.ats[i]!); sizes.push(this.sizes[i]!);
      this.held += this.sizes[i]!;
    }
    this.ids = ids; this.ats = ats; this.sizes = sizes; this.head = 0;
  }

  /** The `n` oldest left the hot state. */
  drop(n: number): void {
    for (let i = this.head; i < this.head + n && i < this.ids.length; i++) this.held -= this.sizes[i]!;
    this.head += n;
    // Compact now and then, so the arrays do not keep every id ever finished.
    if (this.head > 65_536 && this.head * 2 > this.ids.length) {
      this.ids = this.ids.slice(this.head);
      this.ats = this.ats.slice(this.head);
      this.sizes = this.sizes.slice(this.head);
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
