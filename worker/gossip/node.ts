import type { Logger } from 'pino';
import { realClock, type Clock } from './clock.js';
import { Membership, type MembershipConfig } from './membership.js';
import { Replica } from './replica.js';
import { ReplicaSync, type ReplicaSyncOptions } from './replica-sync.js';
import { Coordinator, type CoordinatorOptions } from './coordinator.js';
import { Executor, type Execute } from './executor.js';
import { HubMonitor, type HubMonitorOptions, type HubStatus } from './hub-monitor.js';
import type { Transport } from './messages.js';

/** star: the hub coordinates; gossip: an acting peer does; reconciling: handing state back to a hub. */
export const Mode = { STAR: 'star', GOSSIP: 'gossip', RECONCILING: 'reconciling' } as const;
export type Mode = (typeof Mode)[keyof typeof Mode];

export interface GossipNodeOptions {
  id: string;
  transport: Transport;
  execute: Execute;
  clock?: Clock;
  rand?: () => number;
  log?: Logger;
  slots?: number;
  /** Go to gossip mode by itself when the hub monitor declares the hub dead (default true). */
  autoFailover?: boolean;
  membership?: Partial<MembershipConfig>;
  sync?: ReplicaSyncOptions;
  coordinator?: CoordinatorOptions;
  hubMonitor?: HubMonitorOptions;
}

/** What `swarm status` shows about failover on one worker. */
export interface NodeStatus { mode: Mode; coordinator: string; epoch: number; live: number; hub: HubStatus }

/**
 * One worker's failover machinery, wired: membership, the replicated run state and its sync, the
 * hub monitor, and (in gossip mode) the coordinator and executor. The worker agent feeds it the
 * hub's heartbeats and state in star mode; everything else runs on its own.
 */
export class GossipNode {
  readonly membership: Membership;
  readonly replica = new Replica();
  readonly sync: ReplicaSync;
  readonly coordinator: Coordinator;
  readonly executor: Executor;
  readonly hub: HubMonitor;
  private m: Mode = Mode.STAR;
  private readonly listeners: ((m: Mode) => void)[] = [];
  /** True if replica sync is quiet in star mode (`sync.quiet`): gossip mode starts by pushing to the coordinator. */
  private readonly quietInStar: boolean;
  /** When gossip mode began (clock ms), for detection-time measurements. */
  gossipSince?: number;

  constructor(readonly opts: GossipNodeOptions) {
    const clock = opts.clock ?? realClock;
    const log = opts.log?.child({ part: 'gossip' });
    this.membership = new Membership({ id: opts.id, transport: opts.transport, clock, rand: opts.rand, config: opts.membership, log });
    // The acting coordinator pulls the whole state even if it holds no replica (see `ReplicaSyncOptions.holder`).
    this.sync = new ReplicaSync(this.replica, this.membership, { clock, rand: opts.rand, leader: () => this.coordinator?.leader, ...opts.sync });
    this.quietInStar = opts.sync?.quiet ?? false;
    // Quiet star mode: the hub replicates the state and hears every worker, so the members' probes
    // only keep views roughly current until a failover; they run relaxed (see Membership.setRelaxed).
    this.membership.setRelaxed(this.quietInStar);
    this.coordinator = new Coordinator(this.membership, this.replica, { clock, log, random: opts.rand, ...opts.coordinator });
    this.executor = new Executor(this.membership, this.replica, this.coordinator, opts.execute, { slots: opts.slots, log });
    this.hub = new HubMonitor(this.membership, { clock, log, rand: opts.rand, ...opts.hubMonitor });
    this.hub.onStatus((s) => {
      // From reconciling too: a hub that dies again during the handback is failed over again.
      if (s === 'dead' && this.m !== Mode.GOSSIP && opts.autoFailover !== false) this.enterGossip();
    });
  }

  get id(): string { return this.opts.id; }
  get mode(): Mode { return this.m; }
  onMode(fn: (m: Mode) => void): void { this.listeners.push(fn); }

  start(): void { this.membership.start(); this.sync.start(); this.hub.start(); }

  stop(): void { this.coordinator.deactivate(); this.hub.stop(); this.sync.stop(); this.membership.stop(); }

  /** The hub is gone: peers coordinate. */
  enterGossip(): void {
    if (this.m === Mode.GOSSIP) return;
    this.gossipSince = (this.opts.clock ?? realClock).now();
    this.set(Mode.GOSSIP);
    this.coordinator.activate();
    if (this.quietInStar) {
      this.membership.setRelaxed(false);
      this.sync.setQuiet(false);
      // What only we hold (results the hub never replicated) goes to the coordinator now.
      const leader = this.coordinator.leader;
      if (leader && leader !== this.id) this.sync.pushTo(leader);
    }
  }

  /** A hub is back: stop dispatching, hand results over (the caller does), then `enterStar`. */
  enterReconciling(): void {
    this.coordinator.deactivate();
    this.set(Mode.RECONCILING);
  }

  enterStar(): void {
    this.coordinator.deactivate();
    this.set(Mode.STAR);
    if (this.quietInStar) { this.sync.setQuiet(true); this.membership.setRelaxed(true); }
  }

  status(): NodeStatus {
    const gossip = this.m === Mode.GOSSIP;
    return {
      mode: this.m,
      coordinator: gossip ? (this.coordinator.leader ?? '?') : 'hub',
      epoch: this.coordinator.fence,
      live: this.membership.live().length,
      hub: this.hub.state,
    };
  }

  private set(m: Mode): void {
    if (this.m === m) return;
    this.m = m;
    for (const fn of this.listeners) fn(m);
  }
}
