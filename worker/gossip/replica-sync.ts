import { WORKER_DEFAULTS } from '../config.js';
import { realClock, pick, type Clock, type TimerHandle } from './clock.js';
import type { Membership } from './membership.js';
import type { DigestChunk, Entry, Replica } from './replica.js';

export interface ReplicaSyncOptions {
  clock?: Clock;
  rand?: () => number;
  /** Anti-entropy round with one random live peer. */
  syncIntervalMs?: number;
  /** Bound on one entries message (the transport's frame bound is larger). */
  maxChunkBytes?: number;
  /** Ids per digest chunk. */
  digestPerChunk?: number;
  /**
   * Start quiet: no deltas broadcast and no anti-entropy rounds until `setQuiet(false)`. In star mode
   * the hub replicates to a few holders itself; gossiping every change among all workers would cost
   * each of them CPU for every task, for state only a coordinator needs after a failover.
   */
  quiet?: boolean;
  /**
   * Whether this member holds the replicated state (default true). A member that does not (the hub
   * elected others) takes in gossip mode only what concerns the tasks it holds (those it runs, its own
   * results): it pulls nothing, merges no one else's entries, and tells its peers so, unless it is the
   * acting coordinator (`leader`), which needs the whole state. Every member pulling every task was a
   * copy of the hot state per agent after each failover (up to 86% more RSS for a holder's process).
   */
  holder?: boolean;
  /** The acting coordinator's id, if known. */
  leader?: () => string | undefined;
}

type SyncMsg =
  // `pd`: the pusher answers `pb` with its own detail (a build before that needs the whole `bd`).
  | { op: 'bk'; b: number[]; push?: boolean; pd?: 1 }
  // `hold: false`: the sender holds no replica; send it nothing, ask it for what it has.
  | { op: 'bd'; bs: number[]; d: [string, number][]; push?: boolean; hold?: false }
  // A push answered by a member that takes in the whole state: the buckets that differ, and the
  // pusher's detail of them; the receiver asks (`want`) for what it lacks.
  | { op: 'pb'; bs: number[] }
  | { op: 'pd'; d: [string, number][] }
  | { op: 'dg'; c: DigestChunk }
  | { op: 'want'; ids: string[] }
  | { op: 'en'; e: Entry[] };

const CH = 'rs';
/** How long a peer that said it holds no replica is left out of the anti-entropy rounds, ms. */
const NON_HOLDER_MS = 30_000;

/**
 * Keeps a Replica in step with the other members: every change is broadcast as a delta (without
 * the spec, which can be large) on the membership's piggy-back channel, and a periodic anti-entropy
 * round (digest, then the differing entries in bounded chunks, both ways) repairs whatever gossip
 * missed, including specs and everything a rejoining member lacks.
 */
export class ReplicaSync {
  private readonly clock: Clock;
  private readonly rand: () => number;
  private timer?: TimerHandle;
  private fromGossip = false;
  private quiet: boolean;
  private started = false;
  private holder: boolean;
  /** The coordinator this member last pushed to (a member that holds no replica pushes to each new one). */
  private pushedTo?: string;
  /** Peers that hold no replica (until when): the rounds go to those that do. */
  private readonly nonHolders = new Map<string, number>();
  /** `skipped`: deltas and entries not taken because this member holds no replica and not that task. */
  readonly stats = { deltasIn: 0, entriesIn: 0, syncRounds: 0, skipped: 0 };

  constructor(private readonly replica: Replica, private readonly ms: Membership, private readonly opts: ReplicaSyncOptions = {}) {
    this.clock = opts.clock ?? realClock;
    this.rand = opts.rand ?? Math.random;
    this.quiet = opts.quiet ?? false;
    this.holder = opts.holder ?? true;
    replica.onChange((e) => {
      // A delta that came by gossip is re-queued by the membership itself (onBroadcast -> true).
      if (!this.fromGossip && !this.quiet) ms.broadcast(`r:${e.id}`, stripSpec(e));
    });
    ms.onBroadcast((v, _from, key) => {
      if (!key.startsWith('r:')) return false;
      const e = v as Entry;
      if (!e || typeof e.id !== 'string') return false;
      // Not news here: a member that holds no replica neither keeps nor passes on others' tasks.
      if (!this.pulls && !this.replica.peek(e.id)) { this.stats.skipped++; return false; }
      this.stats.deltasIn++;
      this.fromGossip = true;
      try { return this.replica.merge(e); } finally { this.fromGossip = false; }
    });
    ms.onApp(CH, (from, body) => this.handle(from, body as SyncMsg));
  }

  start(): void {
    this.started = true;
    this.schedule();
  }

  stop(): void { this.started = false; this.clock.clearTimeout(this.timer); this.timer = undefined; }

  /** Anti-entropy rounds run only while not quiet: a quiet member has no timer at all (25 idle members woke for nothing). */
  private schedule(): void {
    if (!this.started || this.quiet || this.timer !== undefined) return;
    const every = this.opts.syncIntervalMs ?? WORKER_DEFAULTS.sync.syncIntervalMs;
    const tick = () => {
      this.timer = undefined;
      if (!this.started || this.quiet) return;
      this.timer = this.clock.setTimeout(tick, every);
      if (!this.pulls) {
        // What only this member holds goes to each new coordinator once; it takes nothing back.
        const leader = this.opts.leader?.();
        if (leader && leader !== this.ms.id && leader !== this.pushedTo && this.ms.live().includes(leader)) { this.pushedTo = leader; this.pushTo(leader); }
        return;
      }
      const now = this.clock.now();
      const others = this.ms.live().filter((id) => id !== this.ms.id);
      const holders = others.filter((id) => (this.nonHolders.get(id) ?? 0) < now);
      const [peer] = pick(holders.length ? holders : others, 1, this.rand);
      if (peer) this.syncWith(peer);
    };
    this.timer = this.clock.setTimeout(tick, Math.floor(this.rand() * every));
  }

  /** Merge entries that every member receives anyway (from the hub in star mode): no re-gossip. */
  mergeQuiet(entries: Entry[]): number {
    let n = 0;
    this.fromGossip = true;
    try { for (const e of entries) if (this.replica.merge(e)) n++; } finally { this.fromGossip = false; }
    return n;
  }

  get isQuiet(): boolean { return this.quiet; }

  /** True while this member takes in the whole state: it holds a replica, or it is the acting coordinator. */
  get pulls(): boolean { return this.holder || (!!this.opts.leader && this.opts.leader() === this.ms.id); }
  get holds(): boolean { return this.holder; }
  /** The hub elected (or stopped electing) this member a holder of the replicated state. */
  setHolder(holder: boolean): void { this.holder = holder; }

  /** Quiet (star mode) or gossiping (see `ReplicaSyncOptions.quiet`). */
  setQuiet(quiet: boolean): void {
    this.quiet = quiet;
    if (quiet) { this.clock.clearTimeout(this.timer); this.timer = undefined; } else this.schedule();
  }

  /**
   * Start an anti-entropy exchange with `peer` now (both directions). It opens with the bucket summary
   * (256 fingerprints): the peer answers with entry hashes of the buckets that differ only, so a round
   * between replicas that mostly agree costs O(buckets), not O(entries), however long the run's history.
   */
  syncWith(peer: string): void {
    this.stats.syncRounds++;
    this.ms.sendApp(peer, CH, { op: 'bk', b: this.replica.buckets() });
  }

  /** The whole-replica digest exchange (id ranges; kept for peers and tests that use it). */
  syncFull(peer: string): void {
    this.stats.syncRounds++;
    for (const c of this.replica.digest(this.opts.digestPerChunk ?? WORKER_DEFAULTS.sync.digestPerChunk)) this.ms.sendApp(peer, CH, { op: 'dg', c });
  }

  /**
   * Send `peer` whatever we hold that it lacks, and take nothing back: a member that was quiet in star
   * mode tells the new coordinator about results the hub never replicated, without the coordinator
   * answering each of them with its whole replica at the moment it starts dispatching.
   */
  pushTo(peer: string): void {
    this.stats.syncRounds++;
    this.pushedTo = peer;
    this.ms.sendApp(peer, CH, { op: 'bk', b: this.replica.buckets(), push: true, pd: 1 });
  }

  private handle(from: string, m: SyncMsg): void {
    if (!m || typeof m !== 'object') return;
    if (m.op === 'bk' && Array.isArray(m.b)) {
      // Answer with the detail of differing buckets; the initiator decides what to send and to ask for.
      const diff = this.replica.differingBuckets(m.b);
      // A push to a member that takes in the whole state (the coordinator, after a failover): the
      // buckets only, and the pusher details its side, which is small. Detailing ours was a pass
      // over the whole replica and a frame of every id in it per pusher: 24 members pushing at once
      // stalled the coordinator's process for seconds.
      // Only to a pusher that says it details its side (`pd`): one of a build before ignores `pb`, and
      // its push would be lost until its handback.
      if (m.push && m.pd === 1 && this.pulls) { if (diff.length) this.ms.sendApp(from, CH, { op: 'pb', bs: diff }); return; }
      const hold = this.pulls ? {} : { hold: false as const };
      if (diff.length) for (const g of this.replica.bucketDigest(diff)) this.ms.sendApp(from, CH, { op: 'bd', bs: g.bs, d: g.d, push: m.push, ...hold });
    } else if (m.op === 'bd' && Array.isArray(m.bs) && Array.isArray(m.d)) {
      const { send, want } = this.replica.diffBuckets(m.bs, m.d);
      // A peer that holds no replica gets nothing (it would drop it); what it has is still asked for.
      if (m.hold === false) this.nonHolders.set(from, this.clock.now() + NON_HOLDER_MS);
      else this.sendEntries(from, send);
      // A push (a quiet member telling the coordinator what only it holds) takes nothing back.
      if (!m.push) for (let i = 0; i < want.length; i += 5000) this.ms.sendApp(from, CH, { op: 'want', ids: want.slice(i, i + 5000) });
    } else if (m.op === 'pb' && Array.isArray(m.bs)) {
      const bs = m.bs.filter((b) => Number.isInteger(b));
      for (const g of this.replica.bucketDigest(bs)) if (g.d.length) this.ms.sendApp(from, CH, { op: 'pd', d: g.d });
    } else if (m.op === 'pd' && Array.isArray(m.d)) {
      if (!this.pulls) return;
      const want = this.replica.wanted(m.d);
      for (let i = 0; i < want.length; i += 5000) this.ms.sendApp(from, CH, { op: 'want', ids: want.slice(i, i + 5000) });
    } else if (m.op === 'dg' && m.c && Array.isArray(m.c.d)) {
      const { send, want } = this.replica.diff(m.c);
      this.sendEntries(from, send);
      if (this.pulls) for (let i = 0; i < want.length; i += 5000) this.ms.sendApp(from, CH, { op: 'want', ids: want.slice(i, i + 5000) });
    } else if (m.op === 'want' && Array.isArray(m.ids)) {
      this.sendEntries(from, m.ids.filter((x) => typeof x === 'string'));
    } else if (m.op === 'en' && Array.isArray(m.e)) {
      // Not re-broadcast: these come from anti-entropy (the repair path, which would flood every
      // member's piggy-back queue after a failover) or from a producer that broadcast them itself.
      const pulls = this.pulls;
      this.fromGossip = true;
      try {
        for (const e of m.e) {
          if (!pulls && !(e && typeof e.id === 'string' && this.replica.peek(e.id))) { this.stats.skipped++; continue; }
          if (this.replica.merge(e)) this.stats.entriesIn++;
        }
      } finally { this.fromGossip = false; }
    }
  }

  private sendEntries(to: string, ids: string[]): void {
    if (ids.length === 0) return;
    for (const chunk of this.replica.chunk(ids, this.opts.maxChunkBytes ?? WORKER_DEFAULTS.sync.maxChunkBytes)) this.ms.sendApp(to, CH, { op: 'en', e: chunk });
  }
}

function stripSpec(e: Entry): Entry {
  const { spec: _spec, ...rest } = e;
  return rest;
}
