import type { Logger } from 'pino';
import type { Payload } from '../protocol/index.js';
import { haveBucketOf, haveOf, subBucketCount, type HaveDigest } from '../protocol/replica-have.js';
import { outcome, type Held } from './replicate-held.js';
import type { Versions } from './replicate-resume.js';
import type { TaskRecord } from './task.js';

/** What the exchange needs of a holder's link: send a SYNC_IDS (its envelope id back), and its pace. */
export interface IdsLink {
  send(payload: Payload<'SYNC_IDS'>): string;
  readonly writable: boolean;
  drained(): Promise<void>;
  readonly isClosed: boolean;
}

/** One bucket the holder answered: its digest value then, the ids it holds as this hub does, and this hub's version when they were named. */
interface Answer { h: number; held: string[]; at: number }

/**
 * What each holder answered, per bucket, kept past a cut link (bounded, oldest first out): the exchange
 * begun again after its reconnect asks only the buckets not answered, or whose digest value changed
 * since (it merged deltas meanwhile). A bucket the holder reports the same holds what it held then;
 * a task changed here since is sent whatever the answer said (its version is past `at`).
 */
export class IdsMemos {
  private readonly m = new Map<string, { n: number; answers: Map<number, Answer>; t: number }>();
  constructor(private readonly max = 32, private readonly ttlMs = 10 * 60_000) {}

  /** Holder `worker`'s answers for a digest of `n` buckets (a new, empty set if none or another `n`). */
  of(worker: string, n: number): Map<number, Answer> {
    const now = Date.now();
    for (const [k, v] of this.m) if (now - v.t > this.ttlMs) this.m.delete(k);
    let e = this.m.get(worker);
    if (!e || e.n !== n) {
      e = { n, answers: new Map(), t: now };
      this.m.delete(worker);
      this.m.set(worker, e);
      while (this.m.size > this.max) this.m.delete(this.m.keys().next().value!);
    }
    e.t = now;
    return e.answers;
  }

  get size(): number { return this.m.size; }
}

export interface ExchangeOptions {
  /** Bound on one SYNC_IDS frame, JSON characters of its ids and fingerprints. */
  maxChars: number;
  /** SYNC_IDS frames unanswered at once, at most. */
  window?: number;
  /** No answer this long with frames unanswered: the holder does not take part after all; its buckets go whole. */
  idleMs?: number;
  /** Yield to the event loop after this much work in one turn (the pass over the state). */
  sliceMs?: number;
  /** The holder answers sub-bucket values (HANDSHAKE `sync.sub`): the ids of the sub-buckets that differ are named, not of whole buckets. */
  sub?: boolean;
  log: Logger;
}

/** Most ids a SYNC_IDS frame names (the schema's bound is 100,000; a SYNC_WANT names at most as many). */
const MAX_IDS = 20_000;
/**
 * Finished tasks per differing bucket below which their ids are named at once: a round of sub-bucket
 * values first costs a round trip and about 11 characters a value, against about 50 an id named.
 */
const SUB_MIN_AVG = 8;
/** Sub-bucket values one frame carries at most (the schema's bound is 100,000). */
const MAX_SUMS = 20_000;

/** The hub's finished tasks of one bucket as the holder's digest counts them, each with its fingerprint. */
interface Pairs { ids: string[]; h: number[] }

/** A SYNC_IDS frame unanswered: the buckets it covers (of `n`), the ids it named, and for a frame of sub-bucket values, its `k` and the ids per bucket. */
interface Pending { n: number; buckets: number[]; ids: string[]; at: number; k?: number; pairs?: Map<number, Pairs> }

/**
 * The per-id comparison of the digest buckets that differ, for a holder that answers SYNC_IDS
 * (HANDSHAKE `sync.ids`). A bucket differs for one task in it (finished while the holder was away,
 * lost, an outcome that changed), and sending it whole cost every task in it: over a restarted hub's
 * 200,000 finished tasks, 3,800 of 4,096 buckets matching still meant 70,000 tasks to each holder.
 * Here the hub names each finished task of those buckets with its fingerprint (protocol/replica-have.ts
 * `haveOf`), in bounded frames paced by the link's drain and a window of unanswered frames; the
 * holder answers with the ids it lacks or holds otherwise (SYNC_WANT), and the sync leaves out the
 * rest. The finished tasks it holds there that were not named come back as `extra`: those this hub
 * evicted are dropped (`onExtra`). Resumable: the answers outlive a cut link (`IdsMemos`).
 *
 * With a holder that answers sub-bucket values (HANDSHAKE `sync.sub`) and buckets of many tasks, a
 * round of those comes first: each differing bucket split in `k` (a digest of n*k buckets), one XOR
 * each; only the tasks of the sub-buckets the holder says differ are named. After a gossip period
 * about a third of the buckets of a 100,000-task state differed, for some 2,500 tasks: whole, that
 * named 37,000 ids to every holder.
 */
export class IdExchange {
  /** SYNC_IDS frames sent and not answered. */
  private readonly pending = new Map<string, Pending>();
  /** Buckets split in sub-buckets, some of which differ: what the holder holds there so far, and the sub-buckets still to answer. */
  private readonly partial = new Map<number, { held: string[]; left: number; at: number }>();
  /** Sub-buckets (of n*k) the holder said differ: their ids are named next. */
  private readonly toName: number[] = [];
  private wake?: () => void;
  private aborted = false;
  private lastHeard = Date.now();
  readonly stats = { frames: 0, pairs: 0, want: 0, extra: 0, reused: 0, asked: 0, sums: 0, subsDiffer: 0 };

  constructor(
    private readonly link: IdsLink,
    private readonly have: HaveDigest,
    private readonly base: Held,
    private readonly answers: Map<number, Answer>,
    private readonly versions: Versions,
    private readonly opts: ExchangeOptions,
    private readonly onExtra: (ids: string[]) => void,
  ) {}

  /** The link went, or the holder left: the exchange stops where it is (its answers so far are kept). */
  abort(): void { this.aborted = true; this.wake?.(); }

  /** A SYNC_WANT from the holder; false if it answers no frame of this exchange. */
  answer(re: string | undefined, p: Payload<'SYNC_WANT'>): boolean {
    const f = re === undefined ? undefined : this.pending.get(re);
    if (!f) return false;
    this.pending.delete(re!);
    this.lastHeard = Date.now();
    if (f.k) this.answerSums(f, f.k, p.differ);
    else this.answerIds(f, p);
    this.wake?.();
    return true;
  }

  /** The sub-buckets that differ are named next; a bucket none of whose sub-buckets differ is answered whole. */
  private answerSums(f: Pending, k: number, differ: readonly number[] | undefined): void {
    const { n } = this.have;
    // No list: a holder that says nothing of them has every sub-bucket differ.
    const d = differ ? new Set(differ) : undefined;
    for (const b of f.buckets) {
      let left = 0;
      for (let j = 0; j < k; j++) {
        const s = b + j * n;
        if (!d || d.has(s)) { left++; this.toName.push(s); }
      }
      const held: string[] = [];
      for (const id of f.pairs!.get(b)!.ids) if (d && !d.has(haveBucketOf(id, n * k))) held.push(id);
      if (left) this.partial.set(b, { held, left, at: f.at });
      else this.answers.set(b, { h: this.have.h[b]! >>> 0, held, at: f.at });
    }
    this.stats.subsDiffer += differ ? Math.min(differ.length, f.buckets.length * k) : f.buckets.length * k;
  }

  private answerIds(f: Pending, p: Payload<'SYNC_WANT'>): void {
    const want = new Set(p.want);
    this.stats.want += want.size;
    const by = new Map<number, string[]>(f.buckets.map((b) => [b, []]));
    for (const id of f.ids) if (!want.has(id)) by.get(haveBucketOf(id, f.n))?.push(id);
    const { n } = this.have;
    for (const [b, held] of by) {
      if (f.n === n) { this.answers.set(b, { h: this.have.h[b]! >>> 0, held, at: f.at }); continue; }
      // A sub-bucket: its bucket is answered once all of its sub-buckets that differ are.
      const whole = b & (n - 1), part = this.partial.get(whole);
      if (!part) continue;
      for (const id of held) part.held.push(id);
      if (--part.left === 0) { this.partial.delete(whole); this.answers.set(whole, { h: this.have.h[whole]! >>> 0, held: part.held, at: part.at }); }
    }
    if (p.extra.length) { this.stats.extra += p.extra.length; this.onExtra(p.extra); }
  }

  /**
   * Ask the buckets not answered yet, wait for every answer, and return what the holder holds: the
   * digest's matching buckets, plus per id those it answered for. Undefined if the exchange did not
   * finish (the link went, or the holder stopped answering): the caller falls back to `base`.
   */
  async run(all: () => Iterable<TaskRecord>): Promise<Held | undefined> {
    const ask: number[] = [];
    for (const b of this.base.differing) {
      const a = this.answers.get(b);
      if (a && a.h === this.have.h[b]! >>> 0) this.stats.reused++;
      else { this.answers.delete(b); ask.push(b); }
    }
    this.stats.asked = ask.length;
    if (ask.length) {
      const at = this.versions.now;
      const pairs = await this.named(new Set(ask), all);
      if (!pairs) return undefined;
      const k = this.subCount(ask, pairs);
      if (k > 1) {
        if (!(await this.sendSums(ask, pairs, k, at))) return undefined;
        if (!(await this.send(this.toName, subPairs(this.toName, pairs, this.have.n, k), at, this.have.n * k))) return undefined;
      } else if (!(await this.send(ask, pairs, at, this.have.n))) return undefined;
    }
    return this.result();
  }

  /** Sub-buckets per bucket: about two tasks each, or 1 (ids named at once) for a holder that cannot, or buckets of few tasks. */
  private subCount(ask: number[], pairs: Map<number, Pairs>): number {
    if (!this.opts.sub) return 1;
    let ids = 0;
    for (const b of ask) ids += pairs.get(b)!.ids.length;
    const avg = ids / ask.length;
    return avg < SUB_MIN_AVG ? 1 : subBucketCount(this.have.n, avg);
  }

  /** The finished tasks of buckets `ask` as the holder's digest counts them, by bucket: a pass over the state, a slice at a time. */
  private async named(ask: Set<number>, all: () => Iterable<TaskRecord>): Promise<Map<number, Pairs> | undefined> {
    const by = new Map<number, Pairs>();
    for (const b of ask) by.set(b, { ids: [], h: [] });
    const slice = this.opts.sliceMs ?? 5;
    let t0 = performance.now(), i = 0;
    for (const r of all()) {
      if ((++i & 255) === 0 && performance.now() - t0 >= slice) {
        await new Promise<void>((res) => setImmediate(res));
        if (this.aborted || this.link.isClosed) return undefined;
        t0 = performance.now();
      }
      const o = outcome(r);
      if (!o || this.base.out(r)) continue;
      const x = haveOf(r.id, o[0], o[1], o[2], this.have.n);
      const p = by.get(x.b);
      if (p) { p.ids.push(r.id); p.h.push(x.x); }
    }
    return by;
  }

  /** A frame out once the window and the link allow; false if the exchange cannot go on. */
  private async flush(payload: Payload<'SYNC_IDS'>, pend: Pending): Promise<boolean> {
    const window = this.opts.window ?? 4;
    while (!this.aborted && !this.link.isClosed && (this.pending.size >= window || !this.link.writable)) {
      if (this.idle()) return false;
      await this.waitFor(this.pending.size >= window ? undefined : this.link.drained());
    }
    if (this.aborted || this.link.isClosed) return false;
    const id = this.link.send(payload);
    this.pending.set(id, pend);
    if (this.pending.size === 1) this.lastHeard = Date.now();
    this.stats.frames++;
    this.stats.pairs += payload.ids.length;
    this.stats.sums += payload.sums?.length ?? 0;
    return true;
  }

  /** Until every frame is answered; false if the exchange cannot go on. */
  private async answered(): Promise<boolean> {
    while (this.pending.size) {
      if (this.aborted || this.link.isClosed || this.idle()) return false;
      await this.waitFor();
    }
    return true;
  }

  /** The buckets' sub-bucket values (k each, XORs of the fingerprints), in frames, and wait for every answer. */
  private async sendSums(ask: number[], pairs: Map<number, Pairs>, k: number, at: number): Promise<boolean> {
    const { n } = this.have;
    const perFrame = Math.max(1, Math.min(Math.floor(MAX_SUMS / k), Math.floor(this.opts.maxChars / (k * 11 + 6))));
    for (let i = 0; i < ask.length; i += perFrame) {
      const buckets = ask.slice(i, i + perFrame);
      const sums = new Array<number>(buckets.length * k).fill(0);
      const mine = new Map<number, Pairs>();
      buckets.forEach((b, bi) => {
        const p = pairs.get(b)!;
        mine.set(b, p);
        for (let x = 0; x < p.ids.length; x++) {
          const j = haveBucketOf(p.ids[x]!, n * k) >>> Math.log2(n);
          sums[bi * k + j] = (sums[bi * k + j]! ^ p.h[x]!) >>> 0;
        }
      });
      if (!(await this.flush({ n, buckets, ids: [], h: [], k, sums }, { n, buckets, ids: [], at, k, pairs: mine }))) return false;
    }
    return this.answered();
  }

  /** Name the tasks of buckets `ask` (of `n`) in frames of whole buckets, paced by the link and the window, and wait for every answer. */
  private async send(ask: number[], pairs: Map<number, Pairs>, at: number, n: number): Promise<boolean> {
    let frame = { buckets: [] as number[], ids: [] as string[], h: [] as number[], chars: 0 };
    const flush = async (): Promise<boolean> => {
      const ok = await this.flush({ n, buckets: frame.buckets, ids: frame.ids, h: frame.h }, { n, buckets: frame.buckets, ids: frame.ids, at });
      frame = { buckets: [], ids: [], h: [], chars: 0 };
      return ok;
    };
    for (const b of ask) {
      const p = pairs.get(b)!;
      let chars = 0;
      for (const id of p.ids) chars += id.length + 14;
      // A bucket goes whole in one frame (about 16-250 tasks: the digest's bucket count follows the state's size).
      if (frame.buckets.length && (frame.chars + chars > this.opts.maxChars || frame.ids.length + p.ids.length > MAX_IDS)) if (!(await flush())) return false;
      frame.buckets.push(b);
      for (let i = 0; i < p.ids.length; i++) { frame.ids.push(p.ids[i]!); frame.h.push(p.h[i]!); }
      frame.chars += chars + 6;
    }
    if (frame.buckets.length && !(await flush())) return false;
    return this.answered();
  }

  /** True once the holder has left a frame unanswered for `idleMs`. */
  private idle(): boolean {
    if (!this.pending.size || Date.now() - this.lastHeard < (this.opts.idleMs ?? 30_000)) return false;
    this.opts.log.warn({ unanswered: this.pending.size }, 'holder did not answer SYNC_IDS: its differing buckets are synced whole');
    return true;
  }

  /** Until an answer, an abort, `also` (a drain), or a second (to check for idleness). */
  private waitFor(also?: Promise<void>): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(done, 1000);
      function done() { clearTimeout(t); resolve(); }
      this.wake = done;
      void also?.then(done);
    }).finally(() => { this.wake = undefined; });
  }

  /** What the holder holds: `base`, and in the buckets it answered for, each id it holds as this hub did then and that has not changed here since. */
  private result(): Held {
    const at = new Map<string, number>();
    let ids = 0;
    for (const b of this.base.differing) {
      const a = this.answers.get(b);
      if (a) for (const id of a.held) { at.set(id, a.at); ids++; }
    }
    const { base, versions } = this;
    return {
      ...base,
      perId: ids,
      held: (r) => base.held(r) || (!base.out(r) && versions.versionOf(r.id) <= (at.get(r.id) ?? -1) && outcome(r) !== undefined),
    };
  }
}

/** The tasks of sub-buckets `subs` (of n*k), from those of their buckets (of n). */
function subPairs(subs: readonly number[], pairs: Map<number, Pairs>, n: number, k: number): Map<number, Pairs> {
  const out = new Map<number, Pairs>();
  for (const s of subs) out.set(s, { ids: [], h: [] });
  const seen = new Set<number>();
  for (const s of subs) {
    const b = s & (n - 1);
    if (seen.has(b)) continue;
    seen.add(b);
    const p = pairs.get(b)!;
    for (let i = 0; i < p.ids.length; i++) {
      const q = out.get(haveBucketOf(p.ids[i]!, n * k));
      if (q) { q.ids.push(p.ids[i]!); q.h.push(p.h[i]!); }
    }
  }
  return out;
}
