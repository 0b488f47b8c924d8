import { WORKER_DEFAULTS } from '../config.js';
import { realClock, pick, type Clock, type TimerHandle } from './clock.js';
import { subBucketCount } from '../../protocol/replica-have.js';
import type { Membership } from './membership.js';
import { BUCKETS, SUB_BUCKETS, validSplit, type DigestChunk, type Entry, type Replica } from './replica.js';

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
  // `sb`: the initiator of a round compares sub-buckets (answer `ss`; a build before answers `bd`,
  // which it still reads); `r` numbers its round, echoed in the answers.
  | { op: 'bk'; b: number[]; push?: boolean; pd?: 1; sb?: 1; r?: number }
  // `hold: false`: the sender holds no replica; send it nothing, ask it for what it has.
  | { op: 'bd'; bs: number[]; d: [string, number][]; push?: boolean; hold?: false }
  // A push answered by a member that takes in the whole state: the buckets that differ, and the
  // pusher's detail of them; the receiver asks (`want`) for what it lacks.
  | { op: 'pb'; bs: number[] }
  | { op: 'pd'; d: [string, number][] }
  // A round by sub-buckets: the answer to `bk` with `sb` (the buckets that differ, each split in `k`,
  // and the answerer's values of those sub-buckets, empty if none differ); the initiator's pairs of the
  // sub-buckets that differ (`sd`); after the entries the initiator lacks and a `want` for what the
  // answerer lacks, the end of that `sd`'s answer (`se`; `cut`: entries were left for a next round).
  | { op: 'ss'; r: number; k: number; bs: number[]; h: number[] }
  | { op: 'sd'; r: number; k: number; s: number[]; d: [string, number][] }
  | { op: 'se'; r: number; cut?: 1 }
  | { op: 'dg'; c: DigestChunk }
  | { op: 'want'; ids: string[] }
  | { op: 'en'; e: Entry[] };

const CH = 'rs';
/** How long a peer that said it holds no replica is left out of the anti-entropy rounds, ms. */
const NON_HOLDER_MS = 30_000;
/**
 * Bytes of entries one round's answer sends at most (below the transport's 8 MB send buffer, past
 * which it drops frames): a catch-up larger than that goes in several rounds, each started once the
 * last one's answer is taken in.
 */
const ROUND_BYTES = 4 * 1024 * 1024;
/** Rounds started at once after a cut one, in a row, before waiting for the timer again. */
const MAX_CHAINED = 32;
/** A round still open this long is given up, however chatty its peer, ms. */
const ROUND_MAX_MS = 15_000;

/**
 * This member's own anti-entropy round: with whom, its number, when it began and last heard from
 * that peer, and the answers still awaited (0: answered and taken in).
 */
interface Round { peer: string; r: number; at: number; heard: number; pending: number; cut: boolean; /** The peer answered by sub-buckets: it marks the end. */ marks: boolean }

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
  private stopped = false;
  private holder: boolean;
  /** The coordinator this member last pushed to (a member that holds no replica pushes to each new one). */
  private pushedTo?: string;
  /** Peers that hold no replica (until when): the rounds go to those that do. */
  private readonly nonHolders = new Map<string, number>();
  /** The round this member began last (anti-entropy: one at a time). */
  private round?: Round;
  private roundNo = 0;
  /** Rounds begun at once after a cut one, in a row. */
  private chained = 0;
  /** Per peer, the bytes of entries still allowed in the answer to its round `r` (`ROUND_BYTES`). */
  private readonly answering = new Map<string, { r: number; left: number }>();
  /**
   * `skipped`: deltas and entries not taken because this member holds no replica and not that task.
   * `roundsHeld`: timer ticks that began no round, the last one still unanswered. `sent`, `got`: what
   * the sync's messages carried each way.
   */
  readonly stats = { deltasIn: 0, entriesIn: 0, syncRounds: 0, skipped: 0, roundsHeld: 0, sent: tally(), got: tally() };

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
    this.stopped = false;
    this.schedule();
  }

  stop(): void { this.started = false; this.stopped = true; this.clock.clearTimeout(this.timer); this.timer = undefined; }

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
      // One round at a time: a round begun while the last is unanswered detailed the same differences
      // again, and its peer's answers piled up behind the last's.
      if (!this.roundOver(now)) { this.stats.roundsHeld++; return; }
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
   * Start an anti-entropy round with `peer` now (both directions). It opens with the bucket summary
   * (256 fingerprints); the peer answers with its values of the differing buckets' sub-buckets
   * (`ss`), this member with its (id, hash) pairs of the sub-buckets that differ (`sd`), and the peer
   * with the entries that differ there and a `want` for what it lacks (`se` ends it). So a round costs
   * O(buckets) plus what differs, not O(entries), however long the history and however many buckets a
   * few changes touch. A peer of a build before answers `bd` (the pairs of whole buckets), read as before.
   */
  syncWith(peer: string): void {
    this.stats.syncRounds++;
    const now = this.clock.now();
    const r = ++this.roundNo;
    this.round = { peer, r, at: now, heard: now, pending: 1, cut: false, marks: false };
    this.send(peer, { op: 'bk', b: this.replica.buckets(), sb: 1, r });
  }

  /**
   * Whether this member's last round is over: answered and taken in (a peer of this build marks it),
   * or its peer silent for long enough: two sync intervals before a first answer (a peer of a build
   * before answers nothing when it agrees, and marks no end: its round ends when it falls silent), four
   * after one that says the peer marks the end (an answer lost); or open too long.
   */
  private roundOver(now: number): boolean {
    const o = this.round;
    if (!o || o.pending === 0) return true;
    const every = this.opts.syncIntervalMs ?? WORKER_DEFAULTS.sync.syncIntervalMs;
    return now - o.heard >= (o.marks ? 4 : 2) * every || now - o.at >= ROUND_MAX_MS;
  }

  /** This member's round with `from`, if `r` is its number and it still awaits answers. */
  private openRound(from: string, r: unknown): Round | undefined {
    const o = this.round;
    return o && o.peer === from && o.r === r && o.pending > 0 ? o : undefined;
  }

  /** The whole-replica digest exchange (id ranges; kept for peers and tests that use it). */
  syncFull(peer: string): void {
    this.stats.syncRounds++;
    for (const c of this.replica.digest(this.opts.digestPerChunk ?? WORKER_DEFAULTS.sync.digestPerChunk)) this.send(peer, { op: 'dg', c });
  }

  /**
   * Send `peer` whatever we hold that it lacks, and take nothing back: a member that was quiet in star
   * mode tells the new coordinator about results the hub never replicated, without the coordinator
   * answering each of them with its whole replica at the moment it starts dispatching.
   */
  pushTo(peer: string): void {
    this.stats.syncRounds++;
    this.pushedTo = peer;
    this.send(peer, { op: 'bk', b: this.replica.buckets(), push: true, pd: 1 });
  }

  private handle(from: string, m: SyncMsg): void {
    if (!m || typeof m !== 'object') return;
    count(this.stats.got, m as Parameters<typeof count>[1]);
    if (this.round?.peer === from) this.round.heard = this.clock.now();
    if (m.op === 'bk' && Array.isArray(m.b)) {
      // Answer with the detail of differing buckets; the initiator decides what to send and to ask for.
      const diff = this.replica.differingBuckets(m.b);
      // A push to a member that takes in the whole state (the coordinator, after a failover): the
      // buckets only, and the pusher details its side, which is small. Detailing ours was a pass
      // over the whole replica and a frame of every id in it per pusher: 24 members pushing at once
      // stalled the coordinator's process for seconds.
      // Only to a pusher that says it details its side (`pd`): one of a build before ignores `pb`, and
      // its push would be lost until its handback.
      if (m.push && m.pd === 1 && this.pulls) { if (diff.length) this.send(from, { op: 'pb', bs: diff }); return; }
      // A round by sub-buckets, answered by a member that takes in the whole state (one that does not
      // details its side, small, marked `hold: false`, below): the values of the differing buckets'
      // sub-buckets, kept on merge; an answer even if none differ, so the initiator knows it is over.
      if (m.sb === 1 && !m.push && this.pulls) {
        const k = Math.min(SUB_BUCKETS, subBucketCount(BUCKETS, this.replica.size / BUCKETS));
        const h = this.replica.subBuckets(diff, k);
        this.send(from, { op: 'ss', r: typeof m.r === 'number' ? m.r : 0, k, bs: diff, h });
        return;
      }
      const hold = this.pulls ? {} : { hold: false as const };
      if (diff.length) for (const g of this.replica.bucketDigest(diff)) this.send(from, { op: 'bd', bs: g.bs, d: g.d, push: m.push, ...hold });
    } else if (m.op === 'ss' && Array.isArray(m.bs) && Array.isArray(m.h)) {
      const o = this.openRound(from, m.r);
      // An answer to a round given up (another has begun since) is left: its peer answers the new one.
      if (!o) return;
      o.marks = true;
      const k = m.k;
      const bs = m.bs;
      if (!validSplit(k) || m.h.length !== bs.length * k || !bs.every((b) => Number.isInteger(b) && b >= 0 && b < BUCKETS)) { o.pending = 0; return; }
      const subs = this.replica.differingSubBuckets(bs, k, m.h);
      if (subs.length === 0) { this.roundEnded(o); return; }
      // Every differing sub-bucket, with this side's pairs (none, where this side holds nothing there).
      const groups = this.replica.subDigest(subs, k);
      o.pending = groups.length;
      for (const g of groups) this.send(from, { op: 'sd', r: m.r, k, s: g.s, d: g.d });
    } else if (m.op === 'sd' && Array.isArray(m.s) && Array.isArray(m.d)) {
      if (!validSplit(m.k)) return;
      const k = m.k;
      const { send, want } = this.replica.diffSubs(m.s.filter((s) => Number.isInteger(s) && s >= 0 && s < BUCKETS * k), k, m.d);
      // The bytes a round's answer may still send: its `sd`s share one budget.
      const r = typeof m.r === 'number' ? m.r : 0;
      let a = this.answering.get(from);
      if (!a || a.r !== r) { this.answering.delete(from); a = { r, left: ROUND_BYTES }; this.answering.set(from, a); }
      const { bytes, cut } = this.sendEntries(from, send, a.left);
      a.left -= bytes;
      if (this.pulls) this.sendWant(from, want);
      this.send(from, cut ? { op: 'se', r, cut: 1 } : { op: 'se', r });
      // Bounded: a peer's entry goes when it begins another round, or with the peer (live peers only).
      if (this.answering.size > 64) for (const id of this.answering.keys()) if (!this.ms.live().includes(id)) this.answering.delete(id);
    } else if (m.op === 'se') {
      const o = this.openRound(from, m.r);
      if (!o) return;
      if (m.cut === 1) o.cut = true;
      if (--o.pending === 0) this.roundEnded(o);
    } else if (m.op === 'bd' && Array.isArray(m.bs) && Array.isArray(m.d)) {
      // A peer that holds no replica gets nothing (it would drop it); what it has is still asked for,
      // read from its pairs alone: what this side would send, a pass over its entries in every bucket
      // that differs (most of its replica), was the coordinator's diffBuckets after a failover.
      if (m.hold === false) {
        this.nonHolders.set(from, this.clock.now() + NON_HOLDER_MS);
        if (!m.push) this.sendWant(from, this.replica.wanted(m.d));
        return;
      }
      const { send, want } = this.replica.diffBuckets(m.bs, m.d);
      this.sendEntries(from, send);
      // A push (a quiet member telling the coordinator what only it holds) takes nothing back.
      if (!m.push) this.sendWant(from, want);
    } else if (m.op === 'pb' && Array.isArray(m.bs)) {
      const bs = m.bs.filter((b) => Number.isInteger(b));
      for (const g of this.replica.bucketDigest(bs)) if (g.d.length) this.send(from, { op: 'pd', d: g.d });
    } else if (m.op === 'pd' && Array.isArray(m.d)) {
      if (!this.pulls) return;
      this.sendWant(from, this.replica.wanted(m.d));
    } else if (m.op === 'dg' && m.c && Array.isArray(m.c.d)) {
      const { send, want } = this.replica.diff(m.c);
      this.sendEntries(from, send);
      if (this.pulls) this.sendWant(from, want);
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

  /**
   * A round of this member's is answered and its entries taken in. One that was cut (its peer had
   * more to send than one answer carries) is followed at once by the next, a bounded number in a row.
   */
  private roundEnded(o: Round): void {
    o.pending = 0;
    if (!o.cut) { this.chained = 0; return; }
    if (this.chained >= MAX_CHAINED || this.stopped || this.quiet || !this.pulls) { this.chained = 0; return; }
    this.chained++;
    this.syncWith(o.peer);
  }

  /** Send the entries of `ids`, about `budget` bytes at most: the bytes sent, and whether some were left out. */
  private sendEntries(to: string, ids: string[], budget = Infinity): { bytes: number; cut: boolean } {
    if (ids.length === 0) return { bytes: 0, cut: false };
    if (budget <= 0) return { bytes: 0, cut: true };
    const { chunks, cut, bytes } = this.replica.chunkUpTo(ids, this.opts.maxChunkBytes ?? WORKER_DEFAULTS.sync.maxChunkBytes, budget);
    for (const chunk of chunks) this.send(to, { op: 'en', e: chunk });
    return { bytes, cut };
  }

  private send(to: string, m: SyncMsg): void {
    count(this.stats.sent, m as Parameters<typeof count>[1]);
    this.ms.sendApp(to, CH, m);
  }

  private sendWant(to: string, want: string[]): void {
    for (let i = 0; i < want.length; i += 5000) this.send(to, { op: 'want', ids: want.slice(i, i + 5000) });
  }
}

/** What sync messages carried: messages, (id, hash) pairs, bucket numbers, sub-bucket values, entries, ids asked for. */
interface Tally { msgs: number; pairs: number; buckets: number; sums: number; entries: number; ids: number }
function tally(): Tally { return { msgs: 0, pairs: 0, buckets: 0, sums: 0, entries: 0, ids: 0 }; }
function count(t: Tally, m: Partial<Record<'d' | 'bs' | 'h' | 'e' | 'ids' | 'c', unknown>>): void {
  const n = (v: unknown) => (Array.isArray(v) ? v.length : 0);
  t.msgs++;
  t.pairs += n(m.d) + n((m.c as { d?: unknown } | undefined)?.d);
  t.buckets += n(m.bs);
  t.sums += n(m.h);
  t.entries += n(m.e);
  t.ids += n(m.ids);
}

function stripSpec(e: Entry): Entry {
  const { spec: _spec, ...rest } = e;
  return rest;
}
