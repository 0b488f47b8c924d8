import { WORKER_DEFAULTS } from '../config.js';
import type { Logger } from 'pino';
import type { Receipt } from '../../protocol/index.js';
import { GossipNode, Mode } from './node.js';
import type { Entry } from './replica.js';
import { unpack } from './replica-pack.js';
import { narrowByDigest, type AskDigest } from './handback-digest.js';

/** A peer as the hub announces it (PEERS). */
export interface PeerInfo { id: string; peer_addr: string; caps?: string[]; role?: string }

/** What the controller needs from the worker's hub connection (the agent implements it). */
export interface HubLink {
  /**
   * Offer finished entries to the hub; resolves once the hub has merged them (recorded once by task
   * id). Rejects if the connection drops; the controller then stays in `reconciling` and retries.
   */
  handBack(entries: Entry[]): Promise<{ recorded: number; duplicate: number }>;
  /**
   * Ids-first handback: offer task ids, resolve with the ones the hub wants (unknown to it, or not
   * final there); `undefined` if the hub does not take offers (then everything is handed back).
   * Rejects as `handBack` does. Without it, the controller hands back every selected entry.
   */
  offer?(ids: string[]): Promise<string[] | undefined>;
  /**
   * Digest-first handback (before the offers): one digest frame; resolves with the buckets the hub
   * says differ, `undefined` if it does not take digests (then every id is offered). Rejects as `handBack` does.
   */
  digest?: AskDigest;
}

export interface FailoverOptions {
  log?: Logger;
  /** Entries per HANDBACK frame at most. */
  handbackChunk?: number;
  /** JSON bytes per HANDBACK frame at most (frames are bounded at 1 MiB); a larger entry is not handed back. */
  handbackBytes?: number;
  /** Ids per offer frame (ids are at most 128 characters; frames at most 1 MiB). */
  offerChunk?: number;
  /**
   * Which final entries this member hands back (default: all it holds), given each as stored
   * (`Replica.peek`: no prompt or result text). Called once per reconcile,
   * so the predicate can take a snapshot (the live members, say) instead of computing it per entry.
   */
  select?: () => (e: Entry) => boolean;
  /**
   * The outcome workers `select` leaves out (the live members but this one), told the hub with the
   * digest so that it folds the same tasks; a mismatch costs offers, never a result.
   */
  skipWorkers?: () => string[];
}

/**
 * The worker's side of failover, between the agent and a GossipNode. Star mode: the agent passes on
 * every hub frame (`heard`), the peer list and replicated state, and its own results. The node's
 * hub monitor decides on failover by itself. When the client reconnects to a hub while in gossip
 * mode, `hubConnected` hands everything finished back and returns to star mode: ids first (the
 * link's `offer`), then only the entries the hub lacks, so the cost follows what the hub is missing,
 * not the length of the run's history.
 */
export class FailoverController {
  private handing?: Promise<void>;
  /** handbacks completed; ids offered, wanted by the hub, entries sent; the hub's recorded/duplicate counts. */
  readonly stats = { handbacks: 0, recorded: 0, duplicate: 0, offered: 0, wanted: 0, sent: 0, digests: 0, digestValues: 0 };

  /**
   * Ids of the replica's final entries, kept on merge: a reconcile walks these instead of sorting the
   * whole replica (25 agents of a process reconciling at once over a long history used to sort it 25 times).
   * Ids the replica dropped since (evicted, shed) are skipped, and swept out once they outnumber the
   * rest: the list stays as bounded as the replica, not as long as the run's history.
   */
  private finals: string[] = [];
  /** The ids the last successful reconcile offered the hub (a member that holds no state sheds them). */
  private offered?: Set<string>;

  constructor(readonly node: GossipNode, private readonly link: HubLink, private readonly opts: FailoverOptions = {}) {
    const r = node.replica;
    for (const id of r.ids()) { const e = r.peek(id)!; if (e.result || e.failure) this.finals.push(id); }
    // Once per task, when it becomes final (a holder merges every task's result: a push, not a set insertion).
    r.onChange((e, _d, becameFinal) => { if (becameFinal) this.finals.push(e.id); });
  }

  get mode(): Mode { return this.node.mode; }

  /** Any frame from the hub (heartbeat or otherwise). */
  heard(): void { this.node.hub.heard(); }

  /** The hub's peer list (its own entry is skipped). */
  peers(list: PeerInfo[]): void {
    for (const p of list) if (p.id !== this.node.id) this.node.membership.add(p.id, p.peer_addr);
  }

  /** Replicated state from the hub (a delta or a chunk of a full sync). Not re-gossiped: every worker gets it from the hub. */
  state(entries: Entry[]): void { this.node.sync.mergeQuiet(entries); }

  /** Finished tasks the hub evicted (its retention horizon): the replica drops them too. */
  evicted(ids: readonly string[]): void {
    if (this.node.replica.forget(ids)) this.sweep();
  }

  /**
   * Shed what gossip mode gathered (see `Replica.shed`): entries neither running here nor results of
   * this member's own, for a member that does not hold the replicated state, once the hub has them.
   */
  shed(running: (id: string) => boolean): number {
    const self = this.node.id;
    // Its own results stay until the hub has them: those the last reconcile offered it have been
    // taken (or refused for good), the rest leave with the hub's evictions.
    const offered = this.offered;
    this.offered = undefined;
    const n = this.node.replica.shed((e) => running(e.id) || ((e.result?.worker === self || e.failure?.worker === self) && !offered?.has(e.id)));
    if (n) this.sweep();
    return n;
  }

  /** Ids of final entries the replica no longer holds leave `finals` once they are half of it. */
  private sweep(): void {
    const r = this.node.replica;
    const c = r.counts();
    if (this.finals.length <= 2 * (c.done + c.failed) + 1024) return;
    const seen = new Set<string>();
    this.finals = this.finals.filter((id) => { const e = r.peek(id); if (!e || !(e.result || e.failure) || seen.has(id)) return false; seen.add(id); return true; });
  }

  /** How many ids `finals` holds (a bounded structure: tests check it). */
  get finalsTracked(): number { return this.finals.length; }

  /** A result this worker produced under a hub lease: kept in the replica too, so a hub death cannot lose it. */
  localResult(id: string, attempt: number, text: string, receipt?: Receipt): void {
    this.node.replica.record(id, { worker: this.node.id, attempt, text, receipt });
  }

  /** The client (re)connected to a hub. In gossip mode this starts reconciliation. */
  hubConnected(): Promise<void> {
    this.heard();
    if (this.node.mode === Mode.STAR) return Promise.resolve();
    this.handing ??= this.reconcile().finally(() => { this.handing = undefined; });
    return this.handing;
  }

  private async reconcile(): Promise<void> {
    this.node.enterReconciling();
    const r = this.node.replica;
    const select = this.opts.select?.() ?? (() => true);
    const skip = this.opts.skipWorkers?.() ?? [];
    const final: Entry[] = [];
    // An id evicted since it became final is gone from the replica (the hub archived it); one shed
    // and merged again is listed twice. Selected as stored (`peek`): unpacked only if sent.
    const seen = new Set<string>();
    for (const id of this.finals) { const e = r.peek(id); if (e && !seen.has(id) && select(e)) { seen.add(id); final.push(e); } }
    const chunk = this.opts.handbackChunk ?? WORKER_DEFAULTS.handback.chunk;
    try {
      // Ids first: the hub journaled most of these in star mode, before the failover; it names what it lacks.
      let send = final;
      const t0 = Date.now();
      if (this.link.offer && final.length) {
        // Digest first, for more than one offer frame: only the ids of buckets the hub does not hold alike are offered.
        let offer: readonly Entry[] = final;
        if (this.link.digest && final.length > this.offerChunk) offer = (await narrowByDigest(final, skip, this.link.digest, this.stats)) ?? final;
        const want = offer.length ? await this.wanted(offer.map((e) => e.id)) : new Set<string>();
        if (want) send = final.filter((e) => want.has(e.id));
      }
      // Whole entries (the stored ones keep a final entry's prompt and text packed), as they are now.
      send = send.map((e) => r.get(e.id) ?? unpack(e));
      // In submission order: a task the hub does not know is queued there in the order it was submitted.
      send.sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity));
      const t1 = Date.now();
      for (const part of this.frames(send, chunk)) {
        const res = await this.link.handBack(part);
        this.stats.recorded += res.recorded;
        this.stats.duplicate += res.duplicate;
        this.stats.sent += part.length;
      }
      this.stats.handbacks++;
      this.offered = new Set(final.map((e) => e.id));
      this.node.enterStar();
      this.opts.log?.info({ entries: final.length, now: send.length, offer_ms: t1 - t0, send_ms: Date.now() - t1, ...this.stats, sync: this.node.sync.stats }, 'handed back to the hub; star mode');
    } catch (err) {
      // Still reconciling; the next connect tries again. Without a hub, the monitor fails over again.
      this.opts.log?.warn({ err }, 'handback failed');
    }
  }

  /** Entries in frame-sized groups: at most `chunk` entries and `handbackBytes` bytes each. */
  private *frames(entries: Entry[], chunk: number): Generator<Entry[]> {
    const max = this.opts.handbackBytes ?? WORKER_DEFAULTS.handback.bytes;
    let cur: Entry[] = [];
    let size = 0;
    for (const e of entries) {
      const s = JSON.stringify(e).length;
      if (s > max) { this.opts.log?.warn({ task: e.id, bytes: s }, 'entry too large to hand back'); continue; }
      if (cur.length && (size + s > max || cur.length >= chunk)) { yield cur; cur = []; size = 0; }
      cur.push(e); size += s;
    }
    if (cur.length) yield cur;
  }

  /** Offer ids in frames of `offerChunk`; the set the hub wants, or undefined if it takes no offers. */
  private get offerChunk(): number { return this.opts.offerChunk ?? WORKER_DEFAULTS.handback.offerChunk; }

  private async wanted(ids: string[]): Promise<Set<string> | undefined> {
    const per = this.offerChunk;
    const want = new Set<string>();
    for (let i = 0; i < ids.length; i += per) {
      const part = ids.slice(i, i + per);
      const got = await this.link.offer!(part);
      if (!got) return undefined;
      this.stats.offered += part.length;
      this.stats.wanted += got.length;
      for (const id of got) want.add(id);
    }
    return want;
  }
}
