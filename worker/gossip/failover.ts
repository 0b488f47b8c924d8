import type { Logger } from 'pino';
import { GossipNode, Mode } from './node.js';
import type { Entry } from './replica.js';

/** A peer as the hub announces it (PEERS). */
export interface PeerInfo { id: string; peer_addr: string; caps?: string[]; role?: string }

/** What the controller needs from the worker's hub connection (the agent implements it). */
export interface HubLink {
  /**
   * Offer finished entries to the hub; resolves once the hub has merged them (recorded once by task
   * id). Rejects if the connection drops; the controller then stays in `reconciling` and retries.
   */
  handBack(entries: Entry[]): Promise<{ recorded: number; duplicate: number }>;
}

export interface FailoverOptions {
  log?: Logger;
  handbackChunk?: number;
  /** Which final entries this member hands back (default: all it holds). */
  select?: (e: Entry) => boolean;
}

/**
 * The worker's side of issue 5, between the agent and a GossipNode. Star mode: the agent passes on
 * every hub frame (`heard`), the peer list and replicated state, and its own results. The node's
 * hub monitor decides on failover by itself. When the client reconnects to a hub while in gossip
 * mode, `hubConnected` hands everything finished back and returns to star mode.
 */
export class FailoverController {
  private handing?: Promise<void>;
  readonly stats = { handbacks: 0, recorded: 0, duplicate: 0 };

  constructor(readonly node: GossipNode, private readonly link: HubLink, private readonly opts: FailoverOptions = {}) {}

  get mode(): Mode { return this.node.mode; }

  /** Any frame from the hub (heartbeat or otherwise). */
  heard(): void { this.node.hub.heard(); }

  /** The hub's peer list (its own entry is skipped). */
  peers(list: PeerInfo[]): void {
    for (const p of list) if (p.id !== this.node.id) this.node.membership.add(p.id, p.peer_addr);
  }

  /** Replicated state from the hub (a delta or a chunk of a full sync). Not re-gossiped: every worker gets it from the hub. */
  state(entries: Entry[]): void { this.node.sync.mergeQuiet(entries); }

  /** A result this worker produced under a hub lease: kept in the replica too, so a hub death cannot lose it. */
  localResult(id: string, attempt: number, text: string, receipt?: unknown): void {
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
    const select = this.opts.select ?? (() => true);
    const final = r.ids().map((id) => r.get(id)!).filter((e) => (e.result || e.failure) && select(e));
    const chunk = this.opts.handbackChunk ?? 200;
    try {
      for (let i = 0; i < final.length; i += chunk) {
        const res = await this.link.handBack(final.slice(i, i + chunk));
        this.stats.recorded += res.recorded;
        this.stats.duplicate += res.duplicate;
      }
      this.stats.handbacks++;
      this.node.enterStar();
      this.opts.log?.info({ entries: final.length, ...this.stats }, 'handed back to the hub; star mode');
    } catch (err) {
      // Still reconciling; the next connect tries again. Without a hub, the monitor fails over again.
      this.opts.log?.warn({ err }, 'handback failed');
    }
  }
}
