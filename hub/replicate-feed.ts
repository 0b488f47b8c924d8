import type { Logger } from 'pino';
import type { Payload, ReplicaEntry } from '../protocol/index.js';
import { chunks, type Chunk } from './replicate-chunks.js';
import type { SyncMark } from './replicate-resume.js';
import type { TaskRecord } from './task.js';

/** What a feed needs of a holder's link: send a STATE frame, tell whether it takes more now, and when it drains. */
export interface FeedLink {
  send(payload: Payload<'STATE'>, payloadJson: string): void;
  /** True while the socket is under its high-water mark (more now would only queue in memory). */
  readonly writable: boolean;
  /** Resolves once the socket has drained (or closed). */
  drained(): Promise<void>;
  readonly isClosed: boolean;
}

export interface FeedOptions {
  /** Bound on one STATE frame's entries, JSON characters. */
  chunkBytes: number;
  /**
   * Bound on deltas waiting for a slow holder, JSON characters. Past it they are dropped and the
   * holder is synced instead: a sync reads the records as they are when each chunk goes, so it
   * carries every change dropped, at a cost bounded by the state, not by the history of changes.
   */
  maxBacklog: number;
  /**
   * Sync characters sent in one turn of the event loop at most; then the feed yields (setImmediate).
   * Deltas go whatever it says (see `pump`).
   * Loopback takes megabytes without `drain`, so a sync paced only by the socket ran for seconds in
   * one turn, and the handshakes of the other workers rejoining a restarted hub timed out behind it.
   * Default one chunk's worth (256 KiB): a restarted hub syncs its holders (five) at once, each a
   * turn in every pass of the loop, and at a MiB each (entries built, signed and encoded) a pass
   * held the first task after a restart, its request, dispatch and result each a pass, behind them.
   */
  turnBytes?: number;
  /**
   * One budget of sync characters a turn, shared by every feed (holders' and keepers'): a restarted
   * hub syncs its holders and keepers at once, and a chunk each per turn held every other I/O hop (a
   * client's submit, a dispatch, a result) behind all of them. Deltas do not count against it.
   */
  share?: TurnShare;
  /**
   * A keeper of the open tasks only (hub/replicate-keepers.ts): a sync is the open tasks, and is
   * preceded, in order, by a frame that has the keeper drop the open tasks it holds (some may have
   * finished while it was not told: a cut link, deltas dropped).
   */
  resetOpen?: boolean;
  /**
   * A task's submission order (its `seq`), if it is still in the store, and the next task's: a
   * whole-state sync covers the tasks there when it starts, and while it is under way a change to one
   * of them it has not reached yet is not sent as a delta (the sync reads the task as it is when it
   * gets there). Tasks submitted since go as deltas. Without these every delta is sent, and a whole
   * sync runs to the store's tail.
   */
  seqOf?: (id: string) => number | undefined;
  nextSeq?: () => number;
  log: Logger;
}

/**
 * The sync characters every feed together sends in one turn of the event loop, at most (about: a
 * chunk that starts under it goes whole). A feed over it waits for the next turn, behind the I/O
 * that turn brings; the feeds take turns in the order they yielded.
 */
export class TurnShare {
  private used = 0;
  private armed = false;
  constructor(readonly bytes = 256 * 1024) {}
  /** True while this turn's budget is not spent. */
  get open(): boolean { return this.used < this.bytes; }
  /** Count `n` characters sent by a sync this turn. */
  spend(n: number): void {
    this.used += n;
    if (this.armed) return;
    // Queued before any feed that yields after this: in the next turn it runs first, then those feeds.
    this.armed = true;
    setImmediate(() => { this.used = 0; this.armed = false; });
  }
}

/**
 * A holder's or keeper's feed as `swarm status` shows it (`failover.feeds`): a sync under way, the delta
 * characters waiting for its link (`backlog`), and every counter of the feed (HolderFeed.stats);
 * `keeper`: it feeds only the open tasks.
 */
export type FeedView = { holder: string; keeper?: true; syncing: boolean; backlog: number } & HolderFeed['stats'];

/**
 * One holder's outbound replication, paced by its socket: deltas in order, and a sync (the whole
 * state, or a window of it) read lazily from the store a chunk at a time. A frame goes out only while
 * the link is writable, else the feed waits for `drain`; so replication never fills the link's
 * outbound buffer, however large the state, and the link is never cut for it (a full sync of 80,000
 * tasks used to be queued at once, pass the 16 MiB bound, and cut the holder's link, again at every
 * rejoin). Other frames (leases, heartbeats) go out between chunks.
 */
export class HolderFeed {
  /** Frames waiting for the socket, in order: deltas (with the version they bring the holder to), and evictions (ids that left the hot state). */
  private deltas: { payload: Payload<'STATE'>; json: string; entries?: string; ver?: number; evict?: true; over?: boolean }[] = [];
  private backlog = 0;
  /** Of `backlog`, the characters of the one flush allowed past the bound (`flush`) still waiting. */
  private oversize = 0;
  /**
   * A sync under way. `whole`: the whole state (its frames carry the holder's sync mark); a repair
   * window's do not. `upTo`: in a resumed sync, the records up to this seq come first and carry no
   * mark (they bring the part the holder had up to date); -1 in a fresh one.
   */
  private sync?: { iter: Iterator<TaskRecord>; part: number; left: number; whole: boolean; upTo: number; reached: number; end: number; bare?: (r: TaskRecord) => boolean };
  /** The sync position the holder was last told (none: complete); undefined: told nothing it may keep. */
  private at?: { seq?: number };
  /** The last mark sent: the holder's own mark (it keeps the last one it got), what a resume starts from. */
  private told?: SyncMark;
  /**
   * Where the sync under way when `told` was sent ends (Infinity: none under way): the tasks from there
   * on went to the holder as deltas, so a resume sends those only if they changed since.
   */
  private toldEnd = Infinity;
  private waiting = false;
  private yielded = false;
  private stopped = false;
  /**
   * `frames`: STATE frames sent; `syncs`: syncs begun (whole, resumed, repair windows); `overflows`:
   * times the deltas waiting passed the bound and were dropped; `waits`: times the feed waited for the
   * socket to drain (the holder reads slowly); `yields`: times a sync yielded to the event loop (its
   * budget a turn spent); `skipped`: delta entries left to a sync under way; `synced`: entries sent by
   * syncs; `bare`: of those, sent without the spec the holder has; `oversize`: flushes larger than the
   * bound sent whole in their chunks (`flush`).
   */
  readonly stats = { frames: 0, syncs: 0, overflows: 0, waits: 0, yields: 0, skipped: 0, synced: 0, bare: 0, oversize: 0 };

  constructor(
    private readonly link: FeedLink,
    /** A record as an entry, with its spec or (the holder has it) without. */
    private readonly build: (rec: TaskRecord, withSpec: boolean) => ReplicaEntry,
    /** The whole state as this holder lacks it, in submission order (read lazily by a sync). */
    private readonly state: () => Iterable<TaskRecord>,
    private readonly opts: FeedOptions,
    /** The mark of what is queued to every holder now (hub/replicate-resume.ts); none: frames carry no mark. */
    private readonly mark?: (seq?: number, end?: number) => SyncMark,
    /** What a holder at mark `m` (none: told none yet) lacks (hub/replicate-resume.ts), or undefined if only the whole state will do. */
    private readonly resumeFrom?: (m: SyncMark | undefined, end: number) => { records: Iterable<TaskRecord>; upTo: number; bare?: (r: TaskRecord) => boolean } | undefined,
  ) {}

  /** No longer a holder: nothing more goes out (a sync under way, deltas waiting). */
  stop(): void { this.stopped = true; this.sync = undefined; this.deltas = []; this.backlog = 0; this.oversize = 0; }

  /** Delta characters waiting for the link now. */
  get backlogChars(): number { return this.backlog; }
  /** Its state and counters, as status shows them. */
  view(): Omit<FeedView, 'holder' | 'keeper'> { return { syncing: this.syncing, backlog: this.backlog, ...this.stats }; }

  /** True while a sync is under way (the periodic repair skips this holder meanwhile). */
  get syncing(): boolean { return this.sync !== undefined; }

  /**
   * Queue one flush's chunks of deltas (shared with the other holders: encoded once), in order. A
   * chunk without a version (`Chunk.ver`) goes unmarked: it vouches for nothing.
   *
   * The bound (`maxBacklog`) is on what waits besides one flush of any size, one larger than all
   * that waited before it. A flush larger than the bound (one submit of many tasks) is what a holder that
   * was up to date lacks, and nothing else:
   * dropped, the holder was resumed with the same tasks re-read, re-encoded and re-signed, and the
   * flush's chunks were handed over one at a time, so its later ones passed the bound again, each a
   * resume and a pass over the hot state (a synced holder took 36-42 resumes for one 32 MB submit).
   * Now such a flush waits whole, in chunks, as the link takes them (its text is the hub's once, shared
   * by the holders); behind it the bound holds as before.
   */
  flush(cs: readonly Chunk[]): void {
    const frames: HolderFeed['deltas'] = [];
    let chars = 0;
    for (const c0 of cs) {
      const c = this.ahead(c0);
      if (!c) continue;
      const f = this.frame(c);
      frames.push(f);
      chars += f.json.length;
    }
    if (!frames.length) return;
    if (this.backlog - this.oversize + chars > this.opts.maxBacklog) {
      // Behind: a flush that fits under the bound alone (flushes piling up for a holder that reads
      // slowly; let past, it made the next large one put the holder behind and resume all of that),
      // what waited before this flush is more than it, or more than the bound even without it.
      if (chars <= this.opts.maxBacklog || chars < this.backlog || this.backlog > this.opts.maxBacklog) { this.behind(chars); return; }
      // The one flush allowed past the bound: it does not count against it while it waits. One let
      // past before, smaller, counts again (a keeper behind a 0.8 MB flush fell behind on a 34 MB one).
      if (this.oversize) for (const d of this.deltas) d.over = undefined;
      for (const f of frames) f.over = true;
      this.oversize = chars;
      this.stats.oversize++;
    }
    for (const f of frames) { this.deltas.push(f); this.backlog += f.json.length; }
    this.pump();
  }

  /** A delta chunk as the frame that carries it. */
  private frame(c: Chunk): HolderFeed['deltas'][number] {
    if (c.closed) return { payload: { full: false, entries: c.entries, closed: c.closed }, json: `{"full":false,"entries":[${c.json}],"closed":${JSON.stringify(c.closed)}}` };
    return { payload: { full: false, entries: c.entries }, json: `{"full":false,"entries":[${c.json}]}`, entries: c.json, ver: this.mark ? c.ver : undefined };
  }

  /** Past the bound by `chars` more: the deltas waiting are dropped and the holder gets the state instead of the history of its changes. */
  private behind(chars: number): void {
    this.stats.overflows++;
    // Why it is behind: waiting for the socket to drain (the holder reads slowly), or yielded to the
    // event loop (the hub's own turns), with a sync under way or not.
    this.opts.log.info({ backlog: this.backlog, oversize: this.oversize, adding: chars, bound: this.opts.maxBacklog, waiting: this.waiting, yielded: this.yielded, writable: this.link.writable, syncing: !!this.sync, queued: this.deltas.length }, 'replica holder behind: deltas dropped, state synced instead');
    // Evictions stay (ids only): a sync sends what is in the store, never what left it.
    this.deltas = this.deltas.filter((d) => d.evict);
    this.backlog = this.deltas.reduce((n, d) => n + d.json.length, 0);
    this.oversize = 0;
    // Nothing the holder hears now may vouch for the dropped changes: no mark until the new sync's first chunk.
    this.at = undefined;
    // Every dropped change is newer than the last mark sent, so the holder's own mark says what it
    // lacks: from there, not the whole state again (a holder kept busy by its sync fell behind again
    // and again, and each time started over: most of a restarted hub's CPU per task).
    // A holder told no mark yet (a restarted hub's first sync under way) starts over, less what it
    // reported it holds (the `state` it is given).
    const r = this.resumeFrom?.(this.told, this.toldEnd);
    if (r) this.resumeSync(r.records, r.upTo, r.bare);
    else this.startSync();
  }

  /**
   * The part of a delta chunk to send now (undefined: none of it): a whole sync under way reads the
   * tasks it covers and has not reached yet when it gets there. A whole sync used to run to the
   * store's tail, where new tasks arrive: after a hub restart each holder's sync of the whole hot state
   * plus every delta of the tasks submitted meanwhile (each such task sent twice, as deltas and again
   * by the sync) came to more than a holder took at full load, so the syncs never ended, the holders
   * kept falling behind, and the hub re-encoded and re-signed those tasks for the rest of its life
   * (its CPU per task a step above a fresh hub's). Now a task goes either by the sync (the tasks there
   * when it started) or by deltas (those submitted since: their specs still reach the holder before
   * the submitter hears "accepted"), once.
   */
  private ahead(c: Chunk): Chunk | undefined {
    const s = this.sync;
    const seqOf = this.opts.seqOf;
    if (!s?.whole || !seqOf || s.reached === Infinity) return c;
    const keep = c.entries.filter((e) => { const q = seqOf(e.id); return q === undefined || q <= s.reached || q >= s.end; });
    this.stats.skipped += c.entries.length - keep.length;
    if (keep.length === c.entries.length) return c;
    if (!keep.length && !c.closed) return undefined;
    return { entries: keep, json: keep.map((e) => JSON.stringify(e)).join(','), closed: c.closed, ver: c.ver };
  }

  /** Queue an eviction (`json` is the payload's text), in order behind the deltas before it. */
  evict(ids: string[], json: string): void {
    this.queue({ payload: { full: false, entries: [], evicted: ids }, json, evict: true });
  }

  private queue(f: HolderFeed['deltas'][number]): void {
    this.deltas.push(f);
    this.backlog += f.json.length;
    this.pump();
  }

  /**
   * Send these records, chunk by chunk as the link drains (at most `limit` of them): the whole state
   * for a new holder, a window of it for the periodic repair. A sync under way starts over.
   */
  startSync(records: Iterable<TaskRecord> = this.state(), limit = Infinity, whole = limit === Infinity): void {
    this.stats.syncs++;
    // Kept like an eviction if deltas are dropped: it goes before everything the sync and later deltas bring.
    if (whole && this.opts.resetOpen) { this.sync = undefined; this.queue({ payload: { full: false, entries: [], reset_open: true }, json: '{"full":false,"entries":[],"reset_open":true}', evict: true }); }
    this.sync = { iter: records[Symbol.iterator](), part: 0, left: limit, whole, upTo: -1, reached: -1, end: this.end(whole) };
    this.pump();
  }

  /**
   * Resume a whole-state sync a cut link interrupted: `records` (hub/replicate-resume.ts) are the
   * tasks the holder had covered and that changed since, then the rest of the sync after `upTo`;
   * `bare`: the records whose spec the holder has (they go without it).
   */
  resumeSync(records: Iterable<TaskRecord>, upTo: number, bare?: (r: TaskRecord) => boolean): void {
    this.stats.syncs++;
    this.at = undefined;
    this.sync = { iter: records[Symbol.iterator](), part: 0, left: Infinity, whole: true, upTo, reached: upTo, end: this.end(true), bare };
    this.pump();
  }

  /** Where a sync starting now ends: the tasks submitted from here on go as deltas (a repair window has its own bound). */
  private end(whole: boolean): number { return whole && this.opts.seqOf && this.opts.nextSeq ? this.opts.nextSeq() : Infinity; }

  /** A payload with the holder's mark, and its JSON (the head, then the entries' text as it is: no copy of it). */
  private marked<P extends Payload<'STATE'>>(payload: P, head: string, entries: string, m: SyncMark): [P, string] {
    return [{ ...payload, sync: m }, `{${head},"sync":${JSON.stringify(m)},"entries":[${entries}]}`];
  }

  /**
   * Send what waits while the link takes more: every delta queued, in order, then sync chunks up to
   * this turn's budget. Deltas are not held to the budget: they are built and encoded once, when the
   * store changed, so sending them is a copy to the socket; what the budget bounds is the building,
   * signing and encoding of a sync's entries. Counted against it, a feed sent at most `turnBytes` of
   * deltas per turn of the hub's event loop whatever the link took, and at load a turn is 0.3-1 s
   * while one brings more than that (a 500-task submit's specs are 1.6 MB): every holder fell past the
   * bound together, about once a second each in the soak, with its socket writable the whole time.
   */
  private pump(): void {
    if (this.stopped) return;
    const turn = this.opts.turnBytes ?? 256 * 1024;
    const share = this.opts.share;
    let sent = 0;
    while (!this.link.isClosed && this.link.writable) {
      const d = this.deltas.shift();
      if (d) {
        this.backlog -= d.json.length;
        if (d.over) this.oversize -= d.json.length;
        if (d.ver !== undefined && this.at && this.mark) {
          // With where the sync under way ends: the tasks from there on came as deltas, which a
          // reconnect need not bring again (the holder says so in its HANDSHAKE).
          this.toldEnd = this.at.seq !== undefined ? this.sync?.end ?? Infinity : Infinity;
          const m = { ...this.mark(this.at.seq, this.toldEnd), ver: d.ver };
          this.told = m;
          const [payload, json] = this.marked(d.payload, '"full":false', d.entries ?? '', m);
          this.link.send(payload, json);
        } else this.link.send(d.payload, d.json);
        this.stats.frames++;
        continue;
      }
      // A sync yielded this turn goes on when the turn is over (its setImmediate).
      if (!this.sync || this.yielded) return;
      if (sent >= turn || (share && !share.open)) {
        this.yielded = true;
        this.stats.yields++;
        setImmediate(() => { this.yielded = false; this.pump(); });
        return;
      }
      const n = this.sendSyncChunk(this.sync);
      if (n < 0) return;
      sent += n;
      share?.spend(n);
    }
    if (this.link.isClosed || this.waiting || (!this.deltas.length && !this.sync)) return;
    this.waiting = true;
    this.stats.waits++;
    void this.link.drained().then(() => { this.waiting = false; this.pump(); });
  }

  /** Build and send the sync's next chunk; the JSON characters sent, or -1 once it is over. */
  private sendSyncChunk(s: NonNullable<HolderFeed['sync']>): number {
    const entries: ReplicaEntry[] = [];
    let size = 0;
    while (s.left > 0 && size < this.opts.chunkBytes) {
      const n = s.iter.next();
      // Records come in submission order (a resumed sync's changed ones first, all at or below upTo);
      // from `end` on they are the tasks submitted since the sync began, which went as deltas.
      if (n.done || n.value.seq >= s.end) { s.left = 0; break; }
      s.left--;
      if (n.value.seq > s.reached) s.reached = n.value.seq;
      const bare = !!s.bare?.(n.value);
      if (bare) this.stats.bare++;
      const e = this.build(n.value, !bare);
      entries.push(e);
      // Sized as chunks() sizes it (the encoding is done there once): a rough bound is enough here.
      size += 64 + (typeof e.spec?.prompt === 'string' ? e.spec.prompt.length : 0) + (typeof e.result?.text === 'string' ? e.result.text.length : 0);
    }
    const last = s.left <= 0;
    if (last) this.sync = undefined;
    this.stats.synced += entries.length;
    const mark = s.whole ? this.mark : undefined;
    if (!entries.length) {
      if (!last) return 0;
      // A whole sync ends with a frame that says so, even an empty one: the holder's mark becomes "complete".
      if (!mark) return -1;
      const part = s.part++;
      this.at = {};
      const m = mark();
      this.told = m;
      this.toldEnd = Infinity;
      this.link.send({ full: true, part, parts: part + 1, entries: [], sync: m }, `{"full":true,"part":${part},"parts":${part + 1},"entries":[],"sync":${JSON.stringify(m)}}`);
      this.stats.frames++;
      return -1;
    }
    const cs = chunks(entries, this.opts.chunkBytes, this.opts.log);
    let sent = 0;
    cs.forEach((c, i) => {
      const part = s.part++;
      // `parts` only on the last chunk: the sync is read lazily, its length is known at its end.
      const end = last && i === cs.length - 1;
      const head = end ? `"full":true,"part":${part},"parts":${part + 1}` : `"full":true,"part":${part}`;
      let payload: Payload<'STATE'> = { full: true, part, ...(end ? { parts: part + 1 } : {}), entries: c.entries };
      let json = `{${head},"entries":[${c.json}]}`;
      // Past the part the holder had up to date: the frame carries how far the holder's copy now goes.
      const seq = c.entries.at(-1)?.seq;
      if (mark && (end || (seq !== undefined && seq > s.upTo))) {
        this.at = end ? {} : { seq };
        this.toldEnd = end ? Infinity : s.end;
        this.told = mark(this.at.seq, this.toldEnd);
        [payload, json] = this.marked(payload, head, c.json, this.told);
      }
      this.link.send(payload, json);
      this.stats.frames++;
      sent += c.json.length;
    });
    return sent;
  }
}
