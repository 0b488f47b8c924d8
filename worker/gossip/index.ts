/** Hybrid star-gossip failover: the public face of worker/gossip. */
export { realClock, ManualClock, seededRandom, type Clock } from './clock.js';
export { MemberState, type GossipMsg, type Transport, type Change } from './messages.js';
export { MemNetwork, MemEndpoint } from './mem-transport.js';
export { TcpTransport, parseAddr, type TcpTransportOptions } from './transport.js';
export { Membership, defaultMembershipConfig, type MembershipConfig, type Member, type MemberEvent } from './membership.js';
export { Replica, type Entry, type EntryState, type Lease, type Outcome, type ReplicaSpec } from './replica.js';
export { ReplicaSync, type ReplicaSyncOptions } from './replica-sync.js';
export { Coordinator, type Assign, type CoordinatorOptions } from './coordinator.js';
export { Executor, type Execute, type ExecOutcome } from './executor.js';
export { HubMonitor, type HubStatus, type HubMonitorOptions, type HubLinkState } from './hub-monitor.js';
export { GossipNode, Mode, type GossipNodeOptions, type NodeStatus } from './node.js';
export { handBack, type HandbackSink, type HandbackReport } from './handback.js';
export { FailoverController, type HubLink, type PeerInfo } from './failover.js';
export { GossipRuns, ReplicaExecutor, entryResult, type ReplicatedRun } from './runs.js';
