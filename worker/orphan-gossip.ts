import type { Membership } from './gossip/membership.js';
import type { OrphanSignals } from './orphan.js';

/** What the board reads of a worker process's agents. */
export interface OrphanPool {
  readonly agents: readonly { client: { conn?: { isClosed: boolean } }; failover?: { node: { membership: Membership } } }[];
}

/** One member's orphan status as its process announced it: `o` orphaned, for `for` ms; `n` orders announcements. */
interface Said { o: boolean; for: number; n: number }

const KEY = 'orphan:';

/**
 * Orphan status gossip between worker processes. Each process announces, through every agent's
 * membership (piggy-backed on SWIM traffic, re-announced at each check), whether it is orphaned (its
 * parent gone and no hub link) and for how long; each remembers what every member said and when it
 * heard it. Two leaked failover processes of one swarm used to keep each other running forever, since
 * each saw a live peer: now a process whose every live peer in another process says it is orphaned
 * goes once that has lasted the bound. A peer that says it is not, or that has said nothing lately
 * (an older build, a lost announcement), keeps it: a live parent or a hub link anywhere in the swarm
 * keeps the swarm alive.
 */
export class OrphanBoard {
  private readonly heard = new Map<string, Said & { at: number }>();
  private readonly attached = new WeakSet<Membership>();
  /** This process's own member ids: its announcements coming back are not news. */
  private readonly mine = new Set<string>();
  private last = 0;

  /** `ttlMs`: how long an announcement stands without being renewed. */
  constructor(private readonly pool: OrphanPool, private readonly ttlMs: number, private readonly now: () => number = Date.now) {}

  private memberships(): Membership[] {
    const out: Membership[] = [];
    for (const a of this.pool.agents) {
      const ms = a.failover?.node.membership;
      if (!ms) continue;
      // An agent started again has a new membership: it listens too.
      if (!this.attached.has(ms)) { this.attached.add(ms); this.mine.add(ms.id); ms.onBroadcast((v, _from, key) => this.hear(key, v)); }
      out.push(ms);
    }
    return out;
  }

  /** A broadcast: news (passed on) if it is an orphan status newer than the one held for that member. */
  private hear(key: string, v: unknown): boolean {
    if (!key.startsWith(KEY)) return false;
    const s = v as Said;
    if (!s || typeof s.o !== 'boolean' || !Number.isFinite(s.n) || !Number.isFinite(s.for)) return false;
    const id = key.slice(KEY.length);
    if (this.mine.has(id)) return false;
    const cur = this.heard.get(id);
    const now = this.now();
    if (cur && cur.n >= s.n && now - cur.at < this.ttlMs) return false;
    this.heard.set(id, { o: s.o, for: s.for, n: s.n, at: now });
    return true;
  }

  /** Tell every peer whether this process is orphaned, and for how long (ms). */
  announce(orphaned: boolean, forMs: number): void {
    // Ordered across a restart of the process under the same ids (a restarted counter would be ignored).
    this.last = Math.max(this.last + 1, this.now());
    for (const ms of this.memberships()) ms.broadcast(`${KEY}${ms.id}`, { o: orphaned, for: Math.round(forMs), n: this.last } satisfies Said);
  }

  /** Live members of other processes, as this process's agents see them. */
  peers(): string[] {
    const all = this.memberships();
    const mine = new Set(all.map((ms) => ms.id));
    const out = new Set<string>();
    for (const ms of all) for (const id of ms.live()) if (!mine.has(id)) out.add(id);
    for (const id of this.heard.keys()) if (!out.has(id)) this.heard.delete(id); // gone: nothing to remember
    return [...out];
  }

  /** True if every one of `peers` said lately that its process is orphaned. */
  allOrphaned(peers: readonly string[]): boolean {
    const now = this.now();
    return peers.every((id) => { const s = this.heard.get(id); return !!s && s.o && now - s.at < this.ttlMs; });
  }
}

/** The orphan guard's signals for a worker pool, with the orphan status gossip among failover peers. */
export function poolOrphanSignals(pool: OrphanPool, ttlMs: number): OrphanSignals {
  const board = new OrphanBoard(pool, ttlMs);
  return {
    hubLinked: () => pool.agents.some((a) => !!a.client.conn && !a.client.conn.isClosed),
    // Only members of other processes count: this process's own agents see each other, and a swarm
    // of one process whose hub is gone for good would otherwise never leave.
    peersLive: () => board.peers().length > 0,
    peersOrphaned: () => board.allOrphaned(board.peers()),
    announce: (orphaned, forMs) => board.announce(orphaned, forMs),
  };
}
