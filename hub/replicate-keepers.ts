import type { Logger } from 'pino';
import { Type, type ReplicaEntry } from '../protocol/index.js';
import { chunks, idParts } from './replicate-chunks.js';
import { HolderFeed, type FeedView, type TurnShare } from './replicate-feed.js';
import type { WorkerEntry } from './registry.js';
import type { TaskStore } from './store.js';
import { isFinal, type TaskRecord } from './task.js';
import { Settle } from './settle.js';
import { byId, lowestPerProcess, processKey } from './holders.js';

/** What the keepers need of the replicator. */
export interface KeeperDeps {
  store: () => TaskStore;
  /** A record as a replica entry, with or without its spec (hub/replicate.ts `entry`). */
  entry: (rec: TaskRecord, withSpec: boolean) => ReplicaEntry;
  chunkBytes: number;
  maxBacklog: number;
  /** The sync budget a turn every feed shares (hub/replicate-feed.ts `TurnShare`). */
  share?: TurnShare;
  log: Logger;
  /** Keepers at most (default `DEFAULT_KEEPERS`). */
  max?: number;
  /** The keepers' syncs start once the set has been still this long (at most `settleMaxMs` after the first change). */
  settleMs?: number;
  settleMaxMs?: number;
}

/**
 * Keepers at most. Each one holds a copy of the open work (every queued and running task's spec) and
 * decodes every new task: with one per process, a swarm of 25 processes kept 22 copies, for a case
 * where the first keeper alone serves (the acting coordinator is the lowest live id). Two: the next
 * process still has the open tasks if the first keeper's process dies with the hub and the holders.
 * Past that, the coordinator has what each member ran; the rest of the open work waits for a hub,
 * which journaled it before it was acknowledged: later, never lost.
 */
export const DEFAULT_KEEPERS = 2;

/**
 * Keepers of the open tasks: the lowest id of each worker process that has no replica holder, for the
 * `max` lowest such processes (by that id; see `DEFAULT_KEEPERS`). Each
 * gets the open tasks (spec, lease) and the ids of those that finish, which it drops, so it holds the
 * open work only, however long the swarm has run. The acting coordinator is the lowest live id; if the
 * hub and every holder's process die together, that is the lowest id of a surviving process: a keeper,
 * which then has every open task to dispatch (without keepers, such a coordinator had only what each
 * member ran itself, and the queued tasks waited for a hub). What it costs: one copy of the open work
 * per keeper, and one decode of each new task's spec there; finished tasks go as ids only.
 */
export class OpenKeepers {
  private keeping: WorkerEntry[] = [];
  private readonly feeds = new Map<WorkerEntry, HolderFeed>();
  private readonly due = new Set<WorkerEntry>();
  private readonly settle: Settle;
  readonly stats = { syncs: 0, deltas: 0, closed: 0 };

  constructor(private readonly deps: KeeperDeps) {
    this.settle = new Settle(() => {
      for (const w of this.due) if (this.keeping.includes(w) && !w.conn.isClosed) { this.stats.syncs++; this.feed(w).startSync(); }
      this.due.clear();
    }, deps.settleMs, deps.settleMaxMs);
  }

  /** Ids of the keepers now. */
  ids(): string[] { return this.keeping.map((w) => w.id); }
  /** Each keeper's feed (those whose sync has begun), as the holders' are shown. */
  feedViews(): FeedView[] {
    return [...this.feeds].map(([w, f]) => ({ holder: w.id, keeper: true, ...f.view() }));
  }
  get size(): number { return this.keeping.length; }

  /**
   * Choose the keepers among `peers`: the lowest id of each process that has no holder, the `max`
   * lowest of those (the next acting coordinators). A new keeper gets the open tasks once the set is still.
   */
  elect(peers: Iterable<WorkerEntry>, holders: readonly WorkerEntry[]): void {
    const held = new Set(holders.map(processKey));
    const next = [...lowestPerProcess([...peers].filter((w) => !held.has(processKey(w)))).values()]
      .sort(byId)
      .slice(0, Math.max(0, this.deps.max ?? DEFAULT_KEEPERS));
    const before = new Set(this.keeping);
    this.keeping = next;
    for (const w of before) if (!next.includes(w)) { this.feeds.get(w)?.stop(); this.feeds.delete(w); this.due.delete(w); }
    for (const w of next) if (!before.has(w)) this.due.add(w);
    if (this.due.size) this.settle.poke();
  }

  /**
   * A flush's changes: `recs` as they are now, `entries` built from them (as the holders get them),
   * `texts` their JSON. The open ones go as they are; the finished ones as ids.
   */
  delta(recs: readonly TaskRecord[], entries: readonly ReplicaEntry[], texts: readonly string[]): void {
    if (!this.keeping.length) return;
    const open: ReplicaEntry[] = [];
    const openTexts: string[] = [];
    const closed: string[] = [];
    recs.forEach((r, i) => { if (isFinal(r)) closed.push(r.id); else { open.push(entries[i]!); openTexts.push(texts[i]!); } });
    const cs = chunks(open, this.deps.chunkBytes, this.deps.log, openTexts);
    for (const part of idParts(closed)) cs.push({ entries: [], json: '', closed: part });
    this.stats.deltas += open.length;
    this.stats.closed += closed.length;
    // A keeper whose sync has not started gets nothing yet: the sync covers every task there when it starts.
    for (const w of this.keeping) if (!this.due.has(w)) this.feed(w).flush(cs);
  }

  stop(): void {
    this.settle.stop();
    for (const f of this.feeds.values()) f.stop();
  }

  private feed(w: WorkerEntry): HolderFeed {
    let f = this.feeds.get(w);
    if (f) return f;
    const conn = w.conn;
    const store = this.deps.store;
    f = new HolderFeed({
      send: (payload, payloadJson) => conn.send(Type.STATE, payload, { payloadJson }),
      get writable() { return conn.writable; },
      drained: () => conn.drained(),
      get isClosed() { return conn.isClosed; },
    }, (r, withSpec) => this.deps.entry(r, withSpec), () => openOf(store().queue.all()), {
      chunkBytes: this.deps.chunkBytes, maxBacklog: this.deps.maxBacklog, log: this.deps.log.child({ keeper: w.id }), resetOpen: true, share: this.deps.share,
      seqOf: (id) => store().queue.get(id)?.seq, nextSeq: () => store().queue.nextSeq,
    });
    this.feeds.set(w, f);
    return f;
  }
}

/** The records not final, lazily, as they are when the sync reaches them. */
function* openOf(all: Iterable<TaskRecord>): Iterable<TaskRecord> {
  for (const r of all) if (!isFinal(r)) yield r;
}
