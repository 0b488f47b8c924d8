/**
 * The quorum an acting coordinator needs: a majority of the last known membership, counted as the
 * members that confirm they do not hear the hub either (and this node). Without it a member cut off
 * with a minority of the swarm would fail over while the hub still serves the majority, and the
 * tasks it holds would run twice: once under its coordinator, once under the hub.
 *
 * The membership is the one seen while the hub was last heard (`observe`): in a partition the cut-off
 * side stops hearing the hub first and its failure detector declares the other side dead later, so
 * the live view at the moment of suspicion cannot be trusted to be the whole swarm.
 */
export class Quorum {
  /** Members (this node included) live when the hub was last heard. */
  private base = 1;
  private observedAt = -Infinity;
  private readonly confirmers = new Set<string>();

  constructor(private readonly refreshMs = 1000) {}

  /** The hub was heard at `now`; `size` reads the live membership (called at most once per `refreshMs`). */
  observe(now: number, size: () => number): void {
    if (now - this.observedAt < this.refreshMs) return;
    this.observedAt = now;
    this.base = Math.max(1, size());
  }

  /** A new suspicion of the hub: no confirmations yet. */
  reset(): void { this.confirmers.clear(); }

  /** `from` does not hear the hub either. */
  confirm(from: string): void { this.confirmers.add(from); }

  /** Members needed, this node included: a strict majority of the last known membership. */
  get needed(): number { return Math.floor(this.base / 2) + 1; }
  get have(): number { return this.confirmers.size + 1; }
  get met(): boolean { return this.have >= this.needed; }
  get known(): number { return this.base; }
}
