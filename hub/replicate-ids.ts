import type { Logger } from 'pino';
import type { Payload } from '../protocol/index.js';
import { haveBucketOf, haveOf, type HaveDigest } from '../protocol/replica-have.js';
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
  log: Logger;
}

/** Most ids a SYNC_IDS frame names (the schema's bound is 100,000; a SYNC_WANT names at most as many). */
const MAX_IDS = 20_000;

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
 */
export class IdExchange {
  /** SYNC_IDS frames sent and not answered: their buckets and the ids they named. */
  private readonly pending = new Map<string, { buckets: number[]; ids: string[]; at: number }>();
  private wake?: () => void;
  private aborted = false;
  private lastHeard = Date.now();
  readonly stats = { frames: 0, pairs: 0, want: 0, extra: 0, reused: 0, asked: 0 };

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
    const want = new Set(p.want);
    this.stats.want += want.size;
    const by = new Map<number, string[]>(f.buckets.map((b) => [b, []]));
    for (const id of f.ids) if (!want.has(id)) by.get(haveBucketOf(id, this.have.n))?.push(id);
    for (const [b, held] of by) this.answers.set(b, { h: this.have.h[b]! >>> 0, held, at: f.at });
    if (p.extra.length) { this.stats.extra += p.extra.length; this.onExtra(p.extra); }
    this.wake?.();
    return true;
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
      if (!(await this.send(ask, pairs, at))) return undefined;
    }
    return this.result();
  }

  /** The finished tasks of buckets `ask` as the holder's digest counts them, by bucket: a pass over the state, a slice at a time. */
  private async named(ask: Set<number>, all: () => Iterable<TaskRecord>): Promise<Map<number, { ids: string[]; h: number[] }> | undefined> {
    const by = new Map<number, { ids: string[]; h: number[] }>();
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

  /** Send the buckets in frames of whole buckets, paced by the link and the window, and wait for every answer. */
  private async send(ask: number[], pairs: Map<number, { ids: string[]; h: number[] }>, at: number): Promise<boolean> {
    const window = this.opts.window ?? 4;
    let frame = { buckets: [] as number[], ids: [] as string[], h: [] as number[], chars: 0 };
    const flush = async (): Promise<boolean> => {
      while (!this.aborted && !this.link.isClosed && (this.pending.size >= window || !this.link.writable)) {
        if (this.idle()) return false;
        await this.waitFor(this.pending.size >= window ? undefined : this.link.drained());
      }
      if (this.aborted || this.link.isClosed) return false;
      const id = this.link.send({ n: this.have.n, buckets: frame.buckets, ids: frame.ids, h: frame.h });
      this.pending.set(id, { buckets: frame.buckets, ids: frame.ids, at });
      if (this.pending.size === 1) this.lastHeard = Date.now();
      this.stats.frames++;
      this.stats.pairs += frame.ids.length;
      frame = { buckets: [], ids: [], h: [], chars: 0 };
      return true;
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
    while (this.pending.size) {
      if (this.aborted || this.link.isClosed || this.idle()) return false;
      await this.waitFor();
    }
    return true;
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
