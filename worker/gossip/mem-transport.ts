import type { Clock } from './clock.js';
import type { GossipMsg, Transport } from './messages.js';

/**
 * An in-memory network for tests and simulation: delivery goes through the injected clock (with a
 * latency), and the network can drop nodes, partition groups and heal. Messages are cloned so no
 * two endpoints share an object.
 */
export class MemNetwork {
  private readonly nodes = new Map<string, MemEndpoint>();
  private readonly isolated = new Set<string>();
  private groups?: Map<string, number>;
  /** Drop the messages this returns true for (a lossy link for one kind of message, in tests). */
  dropIf?: (from: string, to: string, msg: GossipMsg) => boolean;
  /** Messages delivered and dropped, for benchmarks. */
  stats = { delivered: 0, dropped: 0 };

  constructor(private readonly clock: Clock, private readonly latencyMs = 1, private readonly lossRate = 0,
    private readonly rand: () => number = Math.random) {}

  /** A new endpoint at `addr`. */
  endpoint(addr: string): MemEndpoint {
    const ep = new MemEndpoint(addr, this);
    this.nodes.set(addr, ep);
    return ep;
  }

  /** Cut `addr` off from everyone (both directions) until `restore`. */
  isolate(addr: string): void { this.isolated.add(addr); }
  restore(addr: string): void { this.isolated.delete(addr); }

  /** Split the network: addresses in different groups cannot talk; unlisted addresses form group 0. */
  partition(groups: string[][]): void {
    this.groups = new Map();
    groups.forEach((g, i) => g.forEach((a) => this.groups!.set(a, i + 1)));
  }

  heal(): void { this.groups = undefined; this.isolated.clear(); }

  /** @internal */
  deliver(from: string, to: string, msg: GossipMsg): void {
    if (!this.reachable(from, to) || (this.lossRate > 0 && this.rand() < this.lossRate) || this.dropIf?.(from, to, msg)) { this.stats.dropped++; return; }
    const copy = structuredClone(msg);
    this.clock.setTimeout(() => {
      const ep = this.nodes.get(to);
      // Checked again at arrival: a partition that starts in flight eats the message.
      if (!ep || ep.closed || !this.reachable(from, to)) { this.stats.dropped++; return; }
      this.stats.delivered++;
      ep.handler?.(copy);
    }, this.latencyMs);
  }

  private reachable(a: string, b: string): boolean {
    if (this.isolated.has(a) || this.isolated.has(b)) return false;
    if (!this.groups) return true;
    return (this.groups.get(a) ?? 0) === (this.groups.get(b) ?? 0);
  }

  /** @internal */
  remove(addr: string): void { this.nodes.delete(addr); }
}

/** One node's endpoint on a MemNetwork. */
export class MemEndpoint implements Transport {
  handler?: (msg: GossipMsg) => void;
  closed = false;
  constructor(readonly addr: string, private readonly net: MemNetwork) {}
  send(to: string, msg: GossipMsg): void { if (!this.closed) this.net.deliver(this.addr, to, msg); }
  onMessage(fn: (msg: GossipMsg) => void): void { this.handler = fn; }
  async close(): Promise<void> { this.closed = true; this.net.remove(this.addr); }
}
