import type { Logger } from 'pino';
import { Type, type Connection, type Message, type Payload } from '../protocol/index.js';
import { Mode, type FailoverController, type GossipNode, type GossipRuns, type ReplicatedRun } from './gossip/index.js';

/** Finals kept out of a holder's digest, at most (a digest with more only differs in more buckets). */
const MAX_FINALS_OFF_HUB = 200_000;
/** JSON characters of the ids one SYNC_WANT lists as `extra`, at most (frames are bounded at 1 MiB). */
const MAX_EXTRA_CHARS = 256 * 1024;

/** A set of ids with a version that changes with every change (the replica's digest cache keys on it). */
class VersionedSet extends Set<string> {
  version = 0;
  override add(id: string): this { if (!this.has(id)) { super.add(id); this.version++; } return this; }
  override delete(id: string): boolean { const had = super.delete(id); if (had) this.version++; return had; }
  override clear(): void { if (this.size) { super.clear(); this.version++; } }
}

export interface HubCopyOptions {
  /** Tasks a cut-back copy keeps whatever else goes (run here under a hub lease, or running here now). */
  busy: () => (id: string) => boolean;
  /** The current hub link, if any. */
  conn: () => Connection | undefined;
  /**
   * Answer SYNC_IDS and say so in HANDSHAKE (`sync.ids`, `sync.sub`); false acts as a holder that
   * predates it, `'ids'` as one that predates sub-bucket values (tests).
   */
  syncIds?: boolean | 'ids';
  log: Logger;
}

/**
 * One agent's copy of the hub's state, as the hub keeps it: whether the hub elected it a holder (the
 * whole state) or a keeper (the open tasks only), the STATE frames that fill it, how far it goes (the
 * `sync` mark it reports in HANDSHAKE, with a digest of what it holds), the answers to a restarted
 * hub's per-id comparison (SYNC_IDS), and shedding what it no longer needs once the swarm is back in
 * star mode.
 */
export class HubCopy {
  /** The hub's heartbeats say this member holds the replicated state (the hub elected it). */
  private holdsState = false;
  /** The hub's heartbeats say this member keeps the open tasks only (hub/replicate-keepers.ts). */
  private keepsOpen = false;
  /** Gossip mode filled the replica, or the hub stopped keeping it current, since it was last shed (see `shedIfDone`). */
  private shedDue = false;
  /** The last STATE `sync` mark from the hub (see `takeSyncMark`). */
  private syncMark?: Payload<'STATE'>['sync'];
  /**
   * Tasks that became final here while no hub was linked (run in gossip mode, or finished as the hub
   * died): a restarted hub has them open, or takes them in from handbacks after it started, so they stay
   * out of the digest this holder reports (`takeSyncMark`), else each would make its whole bucket differ.
   * Cleared once a hub marks a frame to this holder: its copy then goes by that hub's marks.
   */
  private readonly finalsOffHub = new VersionedSet();
  /** When a task last became final in this replica (epoch ms): the end of a run, for benches. */
  lastFinalAt?: number;

  constructor(private readonly node: GossipNode, private readonly controller: FailoverController, private readonly runs: GossipRuns, private readonly opts: HubCopyOptions) {
    // A task became final in this replica (the delta passed along may repeat an old result).
    node.replica.onChange((e, _d, becameFinal) => {
      if (!becameFinal) return;
      this.lastFinalAt = Date.now();
      if (!opts.conn() && this.holdsState && this.finalsOffHub.size < MAX_FINALS_OFF_HUB) this.finalsOffHub.add(e.id);
    });
    node.onMode((m) => { if (m === Mode.GOSSIP) this.shedDue = true; });
  }

  /** The hub elected this member a keeper of the open tasks. */
  get keepsOpenTasks(): boolean { return this.keepsOpen; }

  /** A hub HEARTBEAT with a mode: whether this member holds the state or keeps the open tasks now. */
  heartbeat(p: Payload<'HEARTBEAT'>): void {
    // A holder no longer elected gets no more deltas: what it holds goes stale, so it sheds too.
    const holds = p.holder === true;
    if (this.holdsState && !holds) this.shedDue = true;
    this.holdsState = holds;
    // A keeper no longer elected gets no more of the open tasks either: what it keeps goes stale.
    const keeps = p.keeper === true;
    if (this.keepsOpen && !keeps) this.shedDue = true;
    this.keepsOpen = keeps;
    this.node.sync.setHolder(holds);
    // The hub says star once every member has handed back.
    if (p.mode === Mode.STAR) this.shedIfDone();
  }

  /** A STATE frame from the hub. */
  state(p: Payload<'STATE'>): void {
    // Merged below before anything else can read it: the mark says how far this copy now goes.
    if (p.sync) { this.syncMark = p.sync; this.finalsOffHub.clear(); }
    if (p.reset_open) this.dropOpen();
    if (p.entries.length) this.controller.state(p.entries);
    if (p.closed?.length) this.dropClosed(p.closed);
    if (p.evicted?.length) this.controller.evicted(p.evicted);
    if (p.runs) this.runs.merge(p.runs as ReplicatedRun[]);
  }

  /**
   * A restarted hub names the finished tasks of the digest buckets that differ, each with its
   * fingerprint: answer with those this copy lacks or holds otherwise, and those it holds there that
   * were not named (the hub drops the ones it evicted). Counted as the digest was: without the finals
   * kept off it.
   */
  syncIds(m: Message<'SYNC_IDS'>): void {
    const conn = this.opts.conn();
    if (!conn || conn.isClosed || this.opts.syncIds === false) return;
    const p = m.payload;
    if (p.k !== undefined && this.opts.syncIds !== 'ids') {
      // Sub-bucket values: the hub names the ids of those that differ next.
      if (p.sums?.length !== p.k * p.buckets.length) return;
      conn.send(Type.SYNC_WANT, { want: [], extra: [], differ: this.node.replica.differingSubs(p.n, p.k, p.buckets, p.sums, this.finalsOffHub) }, { re: m.id });
      return;
    }
    const { want, extra } = this.node.replica.compareIds(p.n, p.buckets, p.ids, p.h, this.finalsOffHub);
    let chars = 0, k = 0;
    while (k < extra.length && (chars += extra[k]!.length + 3) <= MAX_EXTRA_CHARS) k++;
    conn.send(Type.SYNC_WANT, { want, extra: k < extra.length ? extra.slice(0, k) : extra }, { re: m.id });
  }

  /**
   * How far this agent's copy of the hub's state goes, for the next HANDSHAKE: a holder whose link
   * was cut mid-sync then gets the rest, not the whole state again (hub/replicate-resume.ts).
   * Kept until a newer one comes: the copy only gains from what a resumed sync sends, so the mark still
   * holds if that link is cut too before the hub marks a frame (only a shed copy drops it).
   */
  takeSyncMark(): Payload<'HANDSHAKE'>['sync'] {
    const m = this.syncMark;
    if (!m) return undefined;
    const r = this.node.replica;
    // With what it holds: a restarted hub (whose versions mean nothing of this mark) sends only what differs.
    return { ...m, have: r.have(this.finalsOffHub), ...(m.seq !== undefined ? r.anchors(m.seq, m.end) : {}), ...(this.opts.syncIds === 'ids' ? { ids: true } : this.opts.syncIds !== false ? { ids: true, sub: true } : {}) };
  }

  /**
   * The hub says every member is back in star mode (all handbacks done): a member that does not hold
   * the replicated state drops what gossip mode gave it (the whole run state, pulled by anti-entropy),
   * keeping its own results and the tasks it runs. A holder keeps everything; the hub keeps it current.
   * Without this, every agent of a process kept a copy of the hot state after each failover.
   */
  private shedIfDone(): void {
    if (!this.shedDue || this.holdsState || this.node.mode !== Mode.STAR) return;
    this.shedDue = false;
    const busy = this.opts.busy();
    // A keeper keeps the open tasks: the hub synced them when it became one, and keeps them current.
    const open = (id: string) => { const s = this.node.replica.state(id); return s === 'queued' || s === 'leased'; };
    const n = this.controller.shed((id) => busy(id) || (this.keepsOpen && open(id)));
    this.forgetMark();
    this.opts.log.info({ shed: n, kept: this.node.replica.size }, 'swarm back in star mode: gossip-mode replica shed');
  }

  /**
   * A keeper's sync of the open tasks begins: the open tasks it holds go (some may have finished
   * while it was not told), but for those running here; what it ran itself stays.
   */
  private dropOpen(): void {
    const busy = this.opts.busy();
    const r = this.node.replica;
    r.discard([...r.openEntries()].map((e) => e.id), (e) => busy(e.id));
    this.forgetMark();
  }

  /** A keeper hears that these tasks finished: it drops them, but for its own outcomes and those running here. */
  private dropClosed(ids: readonly string[]): void {
    const self = this.node.id;
    const busy = this.opts.busy();
    this.node.replica.discard(ids, (e) => busy(e.id) || e.result?.worker === self || e.failure?.worker === self);
  }

  /** The copy was cut back: its sync mark, and the finals it kept out of its digest, vouch for what is gone. */
  private forgetMark(): void {
    this.syncMark = undefined;
    this.finalsOffHub.clear();
  }
}
