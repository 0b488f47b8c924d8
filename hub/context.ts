import type { Logger } from 'pino';
import type { HubConfig } from './config.js';
import type { HubMetrics } from './metrics.js';
import type { Registry, WorkerEntry } from './registry.js';
import type { HubReplicator } from './replicate.js';
import type { RoleAssigner } from './roles.js';
import type { TaskStore } from './store.js';
import type { Dispatcher } from './dispatcher.js';
import type { Sessions } from './sessions.js';
import type { RefusalLog } from './refusal-log.js';

export interface HubEvents {
  workerUp?(w: WorkerEntry): void;
  workerDown?(id: string, reason: string): void;
}

/**
 * What the hub's parts share: the composition root (hub.ts) is one. A part that needs less takes
 * one of the narrow views below instead, so what it can touch is written in its constructor.
 */
export interface HubContext {
  readonly config: HubConfig;
  readonly log: Logger;
  readonly registry: Registry;
  readonly metrics: HubMetrics;
  readonly failover: HubReplicator;
  readonly roles: RoleAssigner;
  readonly events: HubEvents;
  readonly store: TaskStore;
  readonly name: string;
  readonly isStopping: boolean;
}

/** The dispatcher's view: lease from the store, see the workers, time the dispatch. */
export interface DispatchDeps {
  readonly store: Pick<TaskStore, 'lease' | 'peek' | 'queue'>;
  readonly registry: Pick<Registry, 'all'>;
  readonly config: Pick<HubConfig, 'leaseAheadMs'>;
  readonly metrics: Pick<HubMetrics, 'dispatched' | 'leasedQueued'>;
  readonly isStopping: boolean;
  /** Someone watches answers as they are written (a dashboard): TASK_REQs ask for partials. */
  readonly watchers: number;
}

/** The worker links' view: admit and drop workers, route their frames to the parts that own them. */
export interface SessionDeps {
  readonly config: Pick<HubConfig, 'maxLine' | 'tlsCa' | 'handshakeTimeoutMs' | 'deadAfterMs' | 'token' | 'heartbeatMs' | 'msgpack' | 'maxOutbound' | 'prefetchBelowMs' | 'leaseAheadMs' | 'leaseAheadByMean'>;
  readonly log: Logger;
  /** Refusals of links not admitted: logged a bounded number of lines per window. */
  readonly refusals: Pick<RefusalLog, 'warn'>;
  readonly registry: Registry;
  readonly metrics: Pick<HubMetrics, 'protocolErrors'>;
  readonly failover: Pick<HubReplicator, 'join' | 'leave' | 'heartbeat' | 'isPeer' | 'handBack' | 'syncWant'>;
  readonly roles: Pick<RoleAssigner, 'joined' | 'left' | 'selfAssigned' | 'onAck'>;
  readonly events: HubEvents;
  readonly store: Pick<TaskStore, 'release' | 'unlease'>;
  readonly name: string;
  readonly isStopping: boolean;
}

/** The clock tick's view: heartbeats out, silent workers dropped, lapsed leases back, the dispatcher woken. */
export interface LivenessDeps {
  readonly config: Pick<HubConfig, 'heartbeatMs' | 'deadAfterMs'>;
  readonly registry: Pick<Registry, 'all'>;
  readonly store: Pick<TaskStore, 'expireLeases' | 'holding' | 'queue'>;
  /** The failover mode and who holds the state go out with the heartbeats (a member that holds none sheds its gossip-mode state once the swarm is back in star mode). */
  readonly failover: Pick<HubReplicator, 'active' | 'mode' | 'holders' | 'keeperIds'>;
  readonly sessions: Pick<Sessions, 'drop'>;
  readonly dispatcher: Pick<Dispatcher, 'offer' | 'schedule' | 'armReadyTimer'>;
}

/** The results' view: record a task's outcome once (the store), count it, and free the worker's slot. */
export interface ResultsDeps {
  readonly log: Logger;
  readonly registry: Pick<Registry, 'get'>;
  readonly metrics: Pick<HubMetrics, 'duplicateResults' | 'receipt' | 'queuedGivenBack'>;
  readonly store: Pick<TaskStore, 'queue' | 'knows' | 'complete' | 'unlease' | 'fail'>;
  readonly dispatcher: Pick<Dispatcher, 'offer' | 'withdraw'>;
}
