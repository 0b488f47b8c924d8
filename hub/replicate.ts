import type { Logger } from 'pino';
import { SwarmError, Type, type Message, type Payload, type ReplicaEntry } from '../protocol/index.js';
import { DEFAULT_LEASE_MS } from '../sched/index.js';
import { chunks, idParts } from './replicate-chunks.js';
import { HolderFeed, type FeedView, TurnShare } from './replicate-feed.js';
import { OpenKeepers } from './replicate-keepers.js';
import { Versions, type SyncMark } from './replicate-resume.js';
import { heldByAsync, readBack, type Held } from './replicate-held.js';
import { IdExchange, IdsMemos } from './replicate-ids.js';
import type { HaveDigest } from '../protocol/replica-have.js';
import { HandbackHolds } from './handback-holds.js';
import { electHolders } from './holders.js';
import { refusalMessage } from './handback-check.js';
import { mergeSliced, type MergeReport } from './handback-merge.js';
import { EntrySigner } from './entry-signer.js';
import type { WorkerEntry } from './registry.js';
import type { TaskStore } from './store.js';
import type { StoreEvent } from './store-events.js';
import { isFinal, type TaskRecord } from './task.js';
import { differingBuckets } from './handback-digest.js';
import { Settle } from './settle.js';

/** A replica entry as the workers' gossip layer merges it: the wire type STATE and HANDBACK carry. */
export type ReplEntry = ReplicaEntry;

/** What the hub knows of one failover worker, from its HANDSHAKE and heartbeats. */
export interface FailoverView { id: string; peerAddr: string; mode: string; coordinator: string; epoch: number }

export interface ReplicatorOptions {
  /** Deltas are batched this long before they go out. */
  batchMs?: number;
  /** How many workers hold the replicated state in star mode (see `holders`). */
  holders?: number;
  /** Keepers of the open tasks at most (hub/replicate-keepers.ts `DEFAULT_KEEPERS`). */
  keepers?: number;
  /** One holder (in rotation) gets the next window of the state this often (a repair; deltas are the path). */
  fullSyncMs?: number;
  /** Bound on one periodic sync window, entries: its cost stays flat however long the hub has run. */
  fullSyncEntries?: number;
  /** Bound on one STATE frame's entries, bytes (JSON length). */
  chunkBytes?: number;
  /** Bound on deltas queued for one slow holder, bytes (JSON length); past it the holder is synced instead. */
  maxBacklog?: number;
  /** A result's text larger than this is not replicated (the hub journals it anyway). */
  maxText?: number;
  /** A HANDBACK within this long keeps the hub's mode at `reconciling`. */
  reconcileMs?: number;
  /**
   * A new holder's full sync starts once the holder set has been still this long (at most
   * `settleMaxMs` after the first change): workers rejoining a restarted hub arrive one by one, each
   * lower id displacing a holder, and every displaced holder's sync was the whole state for nothing.
   */
  settleMs?: number;
  settleMaxMs?: number;
  /** The settled holders' syncs wait for star mode this long at most (`syncSettled`). */
  starWaitMs?: number;
  /** The swarm's task rules, sent with PEERS: an acting coordinator leases and retries by them. */
  rules?: { max_attempts: number; lease_ms: number };
  /** Replicate results' receipts too (default off: see `entry`). */
  receipts?: boolean;
  /** The swarm token: what the hub replicates is signed, what comes back is checked (hub/handback-check.ts). */
  token?: string;
  /** True if this worker id is connected now (a handback never records over a live worker's lease). */
  live?: (worker: string) => boolean;
}

/** How long the holders' syncs wait for the swarm to be back in star mode, at most (`syncSettled`). */
const STAR_WAIT_MS = 10_000;

/** Tasks evicted since this hub started read back to compare a holder's digest, at most (a restart's first passes are far fewer). */
const MAX_EVICTED_READ_BACK = 50_000;

/**
 * Hub side of failover: peers, state replication to workers, and the handback merge.
 *
 * Only a few workers, the holders, get the state in star mode: every replicated copy costs a worker
 * decoding and merging every delta, and with 25 copies the workers' CPU, not the hub's, was what
 * slowed a 2-core host (1000 tasks: 5-7 s of worker CPU against 0.7 s without failover). The state is
 * needed at failover by the acting coordinator, which is the lowest live id; so the holders are the
 * lowest ids, one per worker process (a process's agents die together): if the first holder's
 * process dies, the next coordinator is the next holder. Everyone else syncs from them in gossip mode.
 */
export class HubReplicator {
  private readonly peers = new Map<string, { w: WorkerEntry; view: FailoverView }>();
  private holding: WorkerEntry[] = [];
  /** Each holder's outbound replication, paced by its socket (hub/replicate-feed.ts). */
  private readonly feeds = new Map<WorkerEntry, HolderFeed>();
  /** Records changed since the last flush (the entry is built at flush time, from the record as it is then). */
  private pending = new Map<string, { rec: TaskRecord; spec: boolean }>();
  private batchTimer?: NodeJS.Timeout;
  private fullTimer?: NodeJS.Timeout;
  /** Attempt number of each task's current lease, and leases taken back unrun (see onStoreEvent). */
  private readonly leasedAs = new Map<string, number>();
  private readonly unrun = new Map<string, number>();
  private rotate = 0;
  private cursor = 0;
  /** Versions of the replicated state: a holder whose sync a cut link interrupted resumes it. */
  readonly versions = new Versions();
  /** How far each joining worker's copy went when its last link was cut (HANDSHAKE `sync`). */
  private readonly resumeAt = new Map<WorkerEntry, SyncMark>();
  /**
   * What each holder reported it held when it joined (HANDSHAKE `sync.have`): a whole sync to it, the
   * first or one begun again when it falls behind before any mark, leaves that out. Still true later:
   * a holder's finished entries stay until evicted, and the hub no longer has an evicted task either.
   */
  private readonly haves = new Map<WorkerEntry, { have: HaveDigest; mark: SyncMark; held?: Held; comparing?: Promise<void>; evictsSent?: true }>();
  /** New holders whose full sync waits for the holder set to settle. */
  private readonly syncDue = new Set<WorkerEntry>();
  private readonly settle: Settle;
  private lastHandback = 0;
  /** Offered tasks leased to no one until the handback brings them. */
  readonly holds: HandbackHolds;
  /** Since when the settled holders' syncs wait for star mode (`syncSettled`), and the timer that looks again. */
  private starWaitSince?: number;
  private starWaitTimer?: NodeJS.Timeout;
  /** Topology runs not ended, with their specs: holders get them, so an acting coordinator can drive them on. */
  private readonly runs = new Map<string, unknown>();
  readonly stats = {
    handbacks: 0, recorded: 0, duplicate: 0, submitted: 0, deltas: 0, fullSyncs: 0, stateFrames: 0,
    /** Ids-first handback: offer frames, ids offered, ids the hub answered it wanted, entries received. */
    offers: 0, offered: 0, wanted: 0, entries: 0,
    /** Digest-first handback: digest frames, bucket values compared, buckets answered as differing, frames sent while that worker's pass ran (not compared). */
    digests: 0, digestBuckets: 0, digestDiffer: 0, digestsRefused: 0,
    /** Handback entries refused: no valid MAC, or an unknown task without a valid spec MAC. */
    refused: 0,
    /** Genuine handback entries not recorded because another connected worker holds the task's lease. */
    leaseHeld: 0,
    /** Handback entries skipped by id: the task is final here (hot, or evicted inside the duplicate window). */
    known: 0,
    /** Whole-state syncs resumed where a cut link left them (not counted in `fullSyncs`). */
    resumedSyncs: 0,
    /** A holder too far behind: its deltas dropped, then its sync resumed from what it was last told / started over. */
    behindResumed: 0, behindRestarted: 0,
    /** Resumes (a holder behind, or back on a new link) that found what changed since its mark by a pass over the hot state: its mark predates the change log. */
    rescans: 0,
    /**
     * Whole-state syncs to a holder that reported what it holds (HANDSHAKE `sync.have`, to a hub of
     * another generation), the finished tasks they left out because it holds them, and the tasks they sent.
     */
    haveSyncs: 0, haveHeld: 0, haveSent: 0,
    /** Over those syncs: the digests' buckets, and those that matched this hub's. */
    haveBuckets: 0, haveSame: 0,
    /**
     * Per-id comparisons of the differing buckets (hub/replicate-ids.ts): exchanges finished, SYNC_IDS
     * frames and ids named, ids the holders lacked or held otherwise, buckets reused from an exchange a
     * cut link interrupted, exchanges given up (whole buckets then), and ids of evicted tasks holders
     * were told to drop.
     */
    idsExchanges: 0, idsFrames: 0, idsNamed: 0, idsWanted: 0, idsReused: 0, idsGivenUp: 0, idsEvicted: 0,
    /** Sub-bucket values sent before naming ids, to holders that answer them (HANDSHAKE `sync.sub`). */
    idsSums: 0,
    /** SYNC_WANT frames taken (as they come, not at an exchange's end). */
    idsAnswers: 0,
  };
  /** Each holder's per-id comparison under way, and what holders answered (kept past a cut link). */
  private readonly exchanges = new Map<WorkerEntry, IdExchange>();
  private readonly idsMemos = new IdsMemos();
  private readonly signer: EntrySigner;
  /** The lowest id of each process without a holder keeps the open tasks (hub/replicate-keepers.ts). */
  readonly keepers: OpenKeepers;
  /** Workers whose handback digest is being compared (one pass each at a time). */
  private readonly digesting = new Set<WorkerEntry>();
  /** What the holders' and keepers' syncs send in one turn of the loop, together. */
  private readonly share = new TurnShare();

  constructor(
    private readonly store: () => TaskStore,
    private readonly submit: (specs: readonly unknown[]) => Promise<unknown>,
    private readonly log: Logger,
    private readonly opts: ReplicatorOptions = {},
  ) {
    // Held tasks that become ready again wake the dispatcher through the store's `ready` event.
    this.holds = new HandbackHolds(store, log, () => {});
    this.signer = new EntrySigner(opts.token);
    this.settle = new Settle(() => this.syncSettled(), opts.settleMs, opts.settleMaxMs);
    this.keepers = new OpenKeepers({
      store, max: opts.keepers, entry: (r, withSpec) => this.entry(r, withSpec), chunkBytes: opts.chunkBytes ?? 256 * 1024, maxBacklog: opts.maxBacklog ?? 4 * 1024 * 1024, share: this.share,
      log: log.child({ part: 'keepers' }), settleMs: opts.settleMs, settleMaxMs: opts.settleMaxMs,
    });
  }

  get active(): boolean { return this.peers.size > 0; }

  /** `star`, or `reconciling` while handbacks arrive or a worker still reports gossip mode. */
  get mode(): 'star' | 'reconciling' {
    if (Date.now() - this.lastHandback < (this.opts.reconcileMs ?? 3000)) return 'reconciling';
    for (const p of this.peers.values()) if (p.view.mode !== 'star') return 'reconciling';
    return 'star';
  }

  views(): FailoverView[] { return [...this.peers.values()].map((p) => p.view); }

  /** Each holder's and keeper's feed: a sync under way, and its counters (one kept behind shows here). */
  feedViews(): FeedView[] {
    return [...[...this.feeds].map(([w, f]) => ({ holder: w.id, ...f.view() })), ...this.keepers.feedViews()];
  }

  /** Ids of the workers that hold the replicated state now. */
  holders(): string[] { return this.holding.map((w) => w.id); }
  /** Ids of the workers that keep the open tasks only. */
  keeperIds(): string[] { return this.keepers.ids(); }

  start(): void {
    const every = this.opts.fullSyncMs ?? 10_000;
    this.fullTimer = setInterval(() => {
      if (this.holding.length) this.syncWindow(this.holding[this.rotate++ % this.holding.length]!);
    }, every);
    this.fullTimer.unref();
  }

  stop(): void {
    if (this.fullTimer) clearInterval(this.fullTimer);
    if (this.batchTimer) clearTimeout(this.batchTimer);
    clearTimeout(this.starWaitTimer);
    this.settle.stop();
    this.keepers.stop();
    this.holds.stop();
  }

  /** A worker with a peer port joined: tell it everyone, tell everyone about it, send it the state. */
  join(w: WorkerEntry, peerAddr: string, sync?: SyncMark): void {
    // Changes made while no peer was linked went to no feed, so no flush recorded them, nor the specs
    // of the tasks accepted meanwhile: they are in every whole sync from here on, as if flushed now.
    // Without this a holder whose whole sync went out before the first delta had a mark older than
    // every spec mark, and a resume re-sent each spec it held.
    if (!this.active) this.versions.flushed();
    if (sync) this.resumeAt.set(w, sync);
    if (sync?.have) this.haves.set(w, { have: sync.have, mark: sync });
    const view: FailoverView = { id: w.id, peerAddr, mode: 'star', coordinator: 'hub', epoch: 0 };
    this.peers.set(w.id, { w, view });
    // Caps and role go along: in gossip mode the acting coordinator routes tasks as the hub does.
    const peer = (x: WorkerEntry, addr: string) => ({ id: x.id, peer_addr: addr, caps: x.caps, slots: x.slots, ...(x.role ? { role: x.role } : {}) });
    w.conn.send(Type.PEERS, { full: true, peers: [...this.peers.values()].map((p) => peer(p.w, p.view.peerAddr)), ...(this.opts.rules ? { rules: this.opts.rules } : {}) });
    for (const p of this.peers.values()) if (p.w !== w) p.w.conn.send(Type.PEERS, { full: false, peers: [peer(w, peerAddr)] });
    this.elect();
  }

  /** True if this connection joined as a failover peer (its HANDSHAKE had a peer_addr). */
  isPeer(w: WorkerEntry): boolean { return this.peers.get(w.id)?.w === w; }

  leave(w: WorkerEntry): void {
    this.exchanges.get(w)?.abort();
    this.holds.release(w);
    this.resumeAt.delete(w);
    this.haves.delete(w);
    if (this.peers.get(w.id)?.w !== w) return;
    this.peers.delete(w.id);
    this.elect();
  }

  /**
   * The holder set settled: each new holder's sync starts (its digest compared, the differing tasks
   * sent). Not while the swarm reconciles (members still in gossip mode or handing back), for at most
   * `starWaitMs`: after a gossip period the agents rejoin and hand back, and a client's first tasks run,
   * while the comparisons and syncs of every holder took the hub's loop; what the handbacks record
   * reaches the holders as deltas meanwhile.
   */
  private syncSettled(): void {
    clearTimeout(this.starWaitTimer);
    this.starWaitTimer = undefined;
    if (!this.syncDue.size) { this.starWaitSince = undefined; return; }
    const now = Date.now();
    if (this.mode !== 'star' && now - (this.starWaitSince ??= now) < (this.opts.starWaitMs ?? STAR_WAIT_MS)) {
      this.starWaitTimer = setTimeout(() => this.syncSettled(), 250);
      this.starWaitTimer.unref();
      return;
    }
    this.starWaitSince = undefined;
    for (const w of this.syncDue) if (this.holding.includes(w) && !w.conn.isClosed) this.syncWhenCompared(w);
    this.syncDue.clear();
  }

  /** Choose the holders (hub/holders.ts: one per process, hosts first). A new holder gets the whole state first. */
  private elect(): void {
    const next = electHolders([...this.peers.values()].map((p) => p.w), this.opts.holders ?? 3);
    const before = new Set(this.holding);
    // Pending deltas go out to the old holders first, so a new holder's full sync is not older than them.
    this.flush();
    this.holding = next;
    for (const w of before) if (!next.includes(w)) { this.feeds.get(w)?.stop(); this.feeds.delete(w); this.syncDue.delete(w); this.exchanges.get(w)?.abort(); }
    // A member not a holder sheds its copy once the swarm is in star mode: what it reported holding no longer stands.
    for (const w of this.haves.keys()) if (!next.includes(w)) this.haves.delete(w);
    for (const w of next) if (!before.has(w)) this.syncDue.add(w);
    if (this.syncDue.size) this.settle.poke();
    this.keepers.elect([...this.peers.values()].map((p) => p.w), next);
  }


  /** What a holder at mark `m` lacks, as a resumed sync sends it; undefined if only the whole state will do. */
  private lacking(m: SyncMark | undefined, end = Infinity, w?: WorkerEntry): { records: Iterable<TaskRecord>; upTo: number; bare: (r: TaskRecord) => boolean } | undefined {
    if (!this.versions.canResume(m)) return undefined;
    const q = this.store().queue;
    const { records, bare, scanned } = this.versions.resume(m, () => q.all(), end, (id) => q.get(id));
    if (scanned) this.stats.rescans++;
    // A holder that reported what it held when it joined this hub does not get that again either.
    const held = w && this.heldOf(w);
    return { records: held ? this.omit(records, held.held) : records, upTo: m.seq ?? Infinity, bare };
  }

  /** A holder's feed (made on first use). */
  private feed(w: WorkerEntry): HolderFeed {
    let f = this.feeds.get(w);
    if (!f) {
      const conn = w.conn;
      f = new HolderFeed({
        send: (payload, payloadJson) => { conn.send(Type.STATE, payload, { payloadJson }); this.stats.stateFrames++; },
        get writable() { return conn.writable; },
        drained: () => conn.drained(),
        get isClosed() { return conn.isClosed; },
      }, (r, withSpec) => this.entry(r, withSpec), () => this.whole(w), {
        chunkBytes: this.opts.chunkBytes ?? 256 * 1024, maxBacklog: this.opts.maxBacklog ?? 4 * 1024 * 1024, share: this.share, log: this.log.child({ holder: w.id }),
        seqOf: (id) => this.store().queue.get(id)?.seq, nextSeq: () => this.store().queue.nextSeq,
      }, (seq, end) => this.versions.mark(seq, end), (m, end) => {
        const r = m && this.lacking(m, end, w);
        if (r) this.stats.behindResumed++; else this.stats.behindRestarted++;
        return r;
      });
      this.feeds.set(w, f);
    }
    return f;
  }

  heartbeat(w: WorkerEntry, p: Payload<'HEARTBEAT'>): void {
    const e = this.peers.get(w.id);
    if (!e || e.w !== w || p.mode === undefined) return;
    e.view.mode = p.mode;
    if (p.mode === 'star') this.holds.release(w); // its handback is over: what it did not send is not coming
    e.view.coordinator = p.coordinator ?? e.view.coordinator;
    e.view.epoch = p.epoch ?? e.view.epoch;
  }

  /**
   * The hub's view of a task as a replica entry (full: with its spec and submission order). Only what
   * a holder needs, because each holder decodes, validates and merges every entry (in star mode the
   * largest cost of failover, about 35 us an entry on a cold worker): the order rides with the spec;
   * a final entry has no lease (nothing reads the lease of a finished task: it is neither dispatched
   * nor revoked); a result has no receipt unless `receipts` (the producing worker keeps its own
   * receipt in its replica and hands it back itself; the hub journaled it).
   */
  entry(rec: TaskRecord, withSpec: boolean): ReplEntry {
    const e: ReplEntry = { id: rec.id };
    if (withSpec) { e.spec = rec.spec; e.seq = rec.seq; this.signer.spec(e, rec.submittedAt); }
    if (rec.result) {
      const big = rec.result.text.length > (this.opts.maxText ?? 64 * 1024);
      e.result = { worker: rec.result.worker, attempt: rec.result.attempt, text: big ? undefined : rec.result.text };
      this.signer.result(e, rec.result);
      if (this.opts.receipts && rec.result.receipt) e.result.receipt = rec.result.receipt;
    } else if (rec.state === 'failed') {
      e.failure = { worker: rec.worker ?? 'hub', attempt: Math.max(1, rec.attempts), error: rec.error ?? { code: 'SWARM_ERR_TASK_FAILED', msg: 'failed' } };
      this.signer.failure(e);
    } else if (rec.worker && rec.attempts + (this.unrun.get(rec.id) ?? 0) > 0) {
      const unrun = this.unrun.get(rec.id) ?? 0;
      e.lease = { worker: rec.worker, attempt: rec.attempts + unrun, epoch: 0, until: rec.leaseUntil ?? Date.now() + DEFAULT_LEASE_MS };
      if (unrun) e.lease.unrun = unrun;
      if (rec.state === 'queued') e.lease.revoked = true;
    }
    return e;
  }

  /**
   * The store's events are what the holders get: every change to a task (accepted, leased, requeued
   * by a worker's exit, a lapsed lease, a refusal or a retry, done, failed) is a delta, batched.
   */
  readonly onStoreEvent = (e: StoreEvent): void => {
    if (e.type === 'ready') return;
    if (e.type === 'evicted') { this.evicted(e.ids); return; }
    const id = e.rec.id;
    if (e.type === 'leased') this.leasedAs.set(id, e.rec.attempts);
    else if (e.type === 'requeued') {
      // A lease taken back without using an attempt (refused, engine down): the store counts it
      // off again, while replica leases only ever grow; it is numbered as "not run" (unrun).
      const had = this.leasedAs.get(id);
      if (had !== undefined && e.rec.attempts < had) this.unrun.set(id, (this.unrun.get(id) ?? 0) + had - e.rec.attempts);
      this.leasedAs.delete(id);
    } else if (e.type === 'done' || e.type === 'failed') { this.leasedAs.delete(id); this.unrun.delete(id); }
    this.versions.changed(id, e.type === 'accepted' ? e.rec.seq : undefined);
    if (this.active) this.changed(e.rec, e.type === 'accepted');
  };

  /** A change to replicate: new tasks carry their spec; leases, results and failures do not. */
  private changed(rec: TaskRecord, withSpec = false): void {
    if (!this.active) return;
    // A task leased and finished within one batch is built and sent once, as it is at the flush.
    const prev = this.pending.get(rec.id);
    this.pending.set(rec.id, { rec, spec: withSpec || !!prev?.spec });
    this.batchTimer ??= setTimeout(() => this.flush(), this.opts.batchMs ?? 20);
  }

  /**
   * Send the pending deltas now. The hub calls it after accepting tasks, so their specs are on the
   * wire before the submitter hears "accepted": a hub that dies right after cannot strand them.
   */
  flush(): void {
    if (this.batchTimer) clearTimeout(this.batchTimer);
    this.batchTimer = undefined;
    // In the order of their last change: a chunk then brings the holder every change up to its last
    // entry's version (below), so a holder behind in the middle of a large flush resumes from there.
    const v = this.versions;
    const recs = [...this.pending.values()].sort((a, b) => v.versionOf(a.rec.id) - v.versionOf(b.rec.id));
    const entries = recs.map((p) => this.entry(p.rec, p.spec));
    this.pending = new Map();
    if (!entries.length) return;
    this.stats.deltas += entries.length;
    // Encoded once for every holder and keeper; each one's feed sends them as its socket drains.
    const texts = this.keepers.size ? entries.map((e) => JSON.stringify(e)) : undefined;
    // A holder has every change of this flush once its last chunk reached it. One before it brings the
    // holder every change up to its last entry's version: every task changed by then is in it or in a
    // chunk before (their order), each as it is now. (Marked with the flush's version, a first chunk
    // vouched for the rest; with the version before the flush, a holder behind in the middle of a
    // 32 MB submit resumed with all of it again.) And the flush counts as queued to every holder (what
    // a sync chunk's mark says) only once all of it is: a feed sends a sync chunk between two of them.
    const before = v.mark().ver, after = v.now;
    const cs = chunks(entries, this.opts.chunkBytes ?? 256 * 1024, this.log, texts);
    cs.forEach((c, i) => { const last = c.entries.at(-1); c.ver = i === cs.length - 1 ? after : Math.max(before, last ? v.versionOf(last.id) : 0); });
    // Each feed gets the flush whole: one larger than its bound waits whole, in chunks (HolderFeed.flush).
    for (const w of this.holding) this.feed(w).flush(cs);
    this.versions.flushed();
    if (texts) this.keepers.delta(recs.map((p) => p.rec), entries, texts);
  }

  /**
   * Finished tasks left the hot state (the store's retention horizon): every replica drops them too.
   * The holders' go through their feeds, after the deltas before them; the other members hold their
   * own results and what gossip mode gave them, and get the ids at once (encoded once for all).
   */
  private evicted(ids: readonly string[]): void {
    if (this.holding.length) this.flush();
    this.versions.evicted(ids);
    if (!this.active) return;
    for (const part of idParts(ids)) {
      const json = JSON.stringify({ full: false, entries: [], evicted: part });
      for (const w of this.holding) this.feed(w).evict(part, json);
      for (const { w } of this.peers.values()) {
        if (!this.holding.includes(w) && !w.conn.isClosed) w.conn.send(Type.STATE, { full: false, entries: [], evicted: part }, { payloadJson: json });
      }
    }
  }

  /**
   * Send one worker the whole run state (a new holder), read from the store a chunk at a time as its
   * socket drains, and the topology runs not ended.
   */
  fullSync(w: WorkerEntry): void {
    const at = this.resumeAt.get(w);
    this.resumeAt.delete(w);
    const f = this.feed(w);
    // Where its cut sync was to end: the tasks past it reached the holder as deltas, by its version.
    const lacking = this.lacking(at, endOf(at));
    if (lacking) {
      // The same hub, and it still knows every eviction since: only what the holder lacks goes.
      this.stats.resumedSyncs++;
      evictTo(f, this.versions.evictedSince(at!.ver));
      f.resumeSync(lacking.records, lacking.upTo, lacking.bare);
    } else {
      this.stats.fullSyncs++;
      // A holder back from a hub before this one: what this hub evicted before it came back never reached it.
      const h = this.haves.get(w);
      if (h && !h.evictsSent) evictTo(f, this.versions.evictedAll());
      if (h) h.evictsSent = true;
      f.startSync();
    }
    for (const [run, spec] of this.runs) w.conn.send(Type.STATE, { full: false, entries: [], runs: [{ run, spec }] });
  }

  /**
   * A topology run started (or resumed) on this hub: its spec goes to the holders, so in gossip
   * mode the acting coordinator drives the run on from the replicated results (a run's tasks are a
   * pure function of its spec and results). `ended` tells them it is over.
   */
  runChanged(run: string, spec: unknown, ended = false): void {
    if (!ended && JSON.stringify(spec).length > 900 * 1024) {
      // Frames are bounded at 1 MiB: such a run (its inputs are large) waits for a hub in gossip mode.
      this.log.warn({ run }, 'run spec too large to replicate; in gossip mode this run waits for a hub');
      return;
    }
    if (ended) this.runs.delete(run); else this.runs.set(run, spec);
    if (!this.active) return;
    this.flush();
    const runs = [ended ? { run, ended: true } : { run, spec }];
    for (const w of this.holding) w.conn.send(Type.STATE, { full: false, entries: [], runs });
  }

  /**
   * The whole state as holder `w` lacks it: a mark this hub cannot resume from (another hub's: it
   * restarted) came with what the holder holds of the finished tasks, which stays out.
   */
  private whole(w: WorkerEntry): Iterable<TaskRecord> {
    const held = this.heldOf(w);
    if (!held) return this.store().queue.all();
    this.stats.haveSyncs++;
    this.stats.haveBuckets += held.buckets;
    this.stats.haveSame += held.same;
    this.log.info({ holder: w.id, buckets: held.buckets, same: held.same, same_with_evicted: held.withEvicted, gap: held.gap, per_id: held.perId }, 'holder reports what it holds: only what differs is synced');
    return this.omit(this.store().queue.all(), held.held);
  }

  /**
   * What holder `w` reported holding, compared with the state (hub/replicate-held.ts) before its
   * sync starts; a sync begun again or resumed later reuses it, since a task changed after it is sent
   * anyway. Undefined while not compared: that sync sends everything.
   */
  private heldOf(w: WorkerEntry): Held | undefined { return this.haves.get(w)?.held; }

  /**
   * Start holder `w`'s whole-state sync, once what it reported holding is compared with the state:
   * a slice at a time and the evicted tasks read back in one batch, so the hub keeps answering its
   * other links meanwhile (a pread each, in one turn, held a restarted hub's loop for 40 s).
   */
  private syncWhenCompared(w: WorkerEntry): void {
    const h = this.haves.get(w);
    if (!h || h.held) { this.fullSync(w); return; }
    if (h.comparing) return;
    const store = this.store();
    const ids = this.versions.evictedAll();
    const lookup = (id: string) => (store.queue.get(id) ? undefined : store.lookup(id));
    const evicted = ids && ids.length <= MAX_EVICTED_READ_BACK ? { ids, lookup, readMany: readBack(store) } : undefined;
    h.comparing = heldByAsync({ have: h.have, all: store.queue.all(), versions: this.versions, evicted, gap: gapOf(h.mark, store) })
      .then((held) => (held && h.mark.ids && held.differing.length && this.haves.get(w) === h ? this.perId(w, h.have, held, h.mark.sub === true) : held))
      .catch((err: unknown) => { this.log.warn({ err, holder: w.id }, 'comparing what a holder holds failed; it is synced in full'); return undefined; })
      .then((held) => {
        h.comparing = undefined;
        if (this.haves.get(w) !== h) return;
        h.held = held;
        if (this.holding.includes(w) && !w.conn.isClosed) this.fullSync(w);
      });
  }

  /**
   * The buckets that differ compared id by id with holder `w` (hub/replicate-ids.ts), which said it
   * can (HANDSHAKE `sync.ids`): what it holds then, or `held` (those buckets whole) if the exchange
   * did not finish and the link is still up.
   */
  private async perId(w: WorkerEntry, have: HaveDigest, held: Held, sub: boolean): Promise<Held> {
    const conn = w.conn;
    const x = new IdExchange({
      send: (payload) => conn.send(Type.SYNC_IDS, payload),
      get writable() { return conn.writable; },
      drained: () => conn.drained(),
      get isClosed() { return conn.isClosed; },
    }, have, held, this.idsMemos.of(w.id, have.n), this.versions, {
      maxChars: this.opts.chunkBytes ?? 256 * 1024, sub, log: this.log.child({ holder: w.id }),
    }, (ids) => this.dropEvicted(w, ids));
    this.exchanges.set(w, x);
    let out: Held | undefined;
    try { out = await x.run(() => this.store().queue.all()); } finally { if (this.exchanges.get(w) === x) this.exchanges.delete(w); }
    const s = this.stats;
    s.idsFrames += x.stats.frames; s.idsNamed += x.stats.pairs; s.idsWanted += x.stats.want; s.idsReused += x.stats.reused; s.idsSums += x.stats.sums;
    if (out) s.idsExchanges++; else s.idsGivenUp++;
    this.log.info({ holder: w.id, differing: held.differing.length, asked: x.stats.asked, reused: x.stats.reused, named: x.stats.pairs, sums: x.stats.sums, subs_differ: x.stats.subsDiffer, want: x.stats.want, extra: x.stats.extra, done: !!out }, 'differing buckets compared id by id');
    return out ?? held;
  }

  /** A holder's answer to SYNC_IDS (hub/sessions.ts routes it here). */
  syncWant(w: WorkerEntry, msg: Message<'SYNC_WANT'>): void {
    if (this.exchanges.get(w)?.answer(msg.re, msg.payload)) this.stats.idsAnswers++;
    else this.log.debug({ holder: w.id, re: msg.re }, 'SYNC_WANT for no exchange under way: ignored');
  }

  /**
   * Finished tasks a holder holds that this hub did not name in its per-id comparison: those it
   * evicted (a tombstone of its duplicate window, no hot record) go, in order behind the deltas
   * queued; an id it never knew is left alone (a result only the holder may have).
   */
  private dropEvicted(w: WorkerEntry, ids: readonly string[]): void {
    const store = this.store();
    const gone = ids.filter((id) => !store.queue.get(id) && store.knows(id));
    if (!gone.length || !this.holding.includes(w)) return;
    this.stats.idsEvicted += gone.length;
    evictTo(this.feed(w), gone);
  }

  /** `records` without those `held` says the holder has (counted in `haveHeld`), lazily. */
  private *omit(records: Iterable<TaskRecord>, held: (r: TaskRecord) => boolean): Iterable<TaskRecord> {
    for (const r of records) { if (held(r)) this.stats.haveHeld++; else { this.stats.haveSent++; yield r; } }
  }

  /** The periodic repair: the next window of at most `fullSyncEntries` tasks, wrapping around. */
  private syncWindow(w: WorkerEntry): void {
    const f = this.feed(w);
    if (f.syncing) return; // a sync under way repairs more than a window would
    // Nor before a new holder's whole sync begins (the set settling, its digest being compared): that
    // brings it all, and a window's frames, which carry no mark, left it holding tasks past its mark
    // (a restarted hub then found its digest differing in every bucket).
    if (this.syncDue.has(w) || this.haves.get(w)?.comparing) return;
    const q = this.store().queue;
    const size = q.counts();
    const total = size.queued + size.leased + size.done + size.failed;
    if (!total) return;
    const max = this.opts.fullSyncEntries ?? 2000;
    if (this.cursor >= total) this.cursor = 0;
    const from = this.cursor;
    this.cursor += max;
    this.stats.fullSyncs++;
    f.startSync(skip(q.all(), from), max);
  }

  /**
   * Merge what a worker finished without the hub: unknown tasks are submitted (ids are idempotency
   * keys), then each result is offered by task id; the store records it once. Answers with ACK.
   *
   * An `offer` (ids only) merges nothing: the ACK's `want` names the offered ids that are unknown here
   * or not final, and not awaited from another worker's handback; the worker sends only those entries. So a handback costs what the hub lacks,
   * not the run's history (the hub journaled most results in star mode, before the failover).
   */
  async handBack(w: WorkerEntry, msg: Message<'HANDBACK'>): Promise<void> {
    this.lastHandback = Date.now();
    const store = this.store();
    // By id only: hot and final, or evicted inside the duplicate window (a replica keeps results the
    // hub recorded and evicted since; asking for them back cost a full merge of each).
    const final = (id: string) => { const rec = store.queue.get(id); return rec ? isFinal(rec) : store.knows(id); };
    const digest = msg.payload.digest;
    if (digest) {
      // A member waits for each answer; a second digest while its pass runs is a peer flooding the hub
      // with passes over the whole hot state: it gets the answer without `differ` (offer every id).
      if (this.digesting.has(w)) {
        this.stats.digestsRefused++;
        w.conn.send(Type.ACK, { ok: true }, { re: msg.id });
        return;
      }
      // Digest first: the buckets where the worker's finals are not all final here; it offers ids only from those.
      this.digesting.add(w);
      let differ: number[] | undefined;
      try { differ = await differingBuckets(digest, () => store.queue.all()); } finally { this.digesting.delete(w); }
      this.stats.digests++;
      this.stats.digestBuckets += digest.h.length;
      this.stats.digestDiffer += differ?.length ?? digest.h.length;
      w.conn.send(Type.ACK, differ ? { ok: true, differ } : { ok: true }, { re: msg.id });
      return;
    }
    const offer = msg.payload.offer;
    if (offer) {
      const want = this.holds.hold(w, offer.filter((id) => !final(id)));
      this.stats.offers++;
      this.stats.offered += offer.length;
      this.stats.wanted += want.length;
      w.conn.send(Type.ACK, { ok: true, want }, { re: msg.id });
      return;
    }
    this.stats.handbacks++;
    const entries = msg.payload.entries;
    this.stats.entries += entries.length;
    this.holds.touch(w, entries.map((e) => e.id));
    let rep: MergeReport;
    try {
      rep = await mergeSliced(entries, {
        final, has: (id) => store.queue.has(id), submitMany: (specs) => this.submit(specs), complete: (id, r) => store.complete(id, r),
        fail: (id, error, attempts) => store.failHandedBack(id, error, attempts),
      }, { token: this.opts.token, get: (id) => store.queue.get(id), live: (id) => this.opts.live?.(id) ?? false, acceptedFloor: store.acceptedFloor });
    } catch (err) {
      this.log.warn({ err, worker: w.id }, 'handback failed');
      // The worker keeps its entries and hands them back on its next link whatever the code; the code
      // says why (a full disk, a queue at its depth), so an operator reading either log is not sent
      // looking for a malformed frame.
      const code = err instanceof SwarmError ? err.code : 'SWARM_ERR_BAD_PAYLOAD';
      w.conn.sendError(code, `handback: ${(err as Error).message}`.slice(0, 4000), { re: msg.id });
      return;
    } finally {
      this.holds.release(w, entries.map((e) => e.id)); // recorded now, or (not recorded) to run again
    }
    const { recorded, duplicate, refused } = rep;
    this.holds.leaseAnswers(refused.filter((r) => r.leased).map((r) => r.id));
    this.stats.submitted += rep.submitted;
    this.stats.recorded += recorded;
    this.stats.duplicate += duplicate;
    this.stats.known += rep.known;
    this.lastHandback = Date.now();
    if (recorded) this.log.info({ worker: w.id, recorded, duplicate }, 'handback merged');
    if (refused.length) {
      for (const r of refused) if (r.leased) this.stats.leaseHeld++; else this.stats.refused++;
      this.log.warn({ worker: w.id, remote: w.conn.socket.remoteAddress, refused: refused.length, samples: refused.slice(0, 5) }, 'handback entries refused');
      w.conn.sendError('SWARM_ERR_HANDBACK_REFUSED', refusalMessage(refused, entries.length, recorded, duplicate), { re: msg.id });
      return;
    }
    w.conn.send(Type.ACK, { ok: true, recorded, duplicate }, { re: msg.id });
  }
}

/** Evicted ids to one holder's feed, in order behind what it has queued, in frames it can read (`idParts`). */
function evictTo(f: HolderFeed, ids: readonly string[] = []): void {
  for (const part of idParts(ids)) f.evict(part, JSON.stringify({ full: false, entries: [], evicted: part }));
}

/** The end a holder's mark names for its sync under way, if it is one a sync could have (past its position). */
function endOf(m: SyncMark | undefined): number {
  return m?.seq !== undefined && m.end !== undefined && Number.isSafeInteger(m.end) && m.end > m.seq ? m.end : Infinity;
}

/**
 * The part of this hub's order a holder's cut sync did not reach (hub/replicate-held.ts `gap`), from
 * the ids it names at its edges; undefined for a complete copy, or one whose edge is no longer here.
 */
function gapOf(m: SyncMark, store: TaskStore): { after: number; before: number } | undefined {
  if (m.seq === undefined) return undefined;
  const after = m.last === undefined ? -1 : store.queue.get(m.last)?.seq;
  if (after === undefined) return undefined;
  const before = m.next === undefined ? Infinity : store.queue.get(m.next)?.seq ?? Infinity;
  return before > after ? { after, before } : undefined;
}

/** The records after the first `n` (the repair window's start), lazily. */
function* skip<T>(it: Iterable<T>, n: number): Iterable<T> {
  let i = 0;
  for (const x of it) if (i++ >= n) yield x;
}
