import type { Logger } from 'pino';
import type { HubConfig } from './config.js';
import type { HubMetrics } from './metrics.js';
import type { Registry, WorkerEntry } from './registry.js';
import type { HubReplicator } from './replicate.js';
import type { RoleAssigner } from './roles.js';
import type { TaskStore } from './store.js';

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
  readonly metrics: Pick<HubMetrics, 'dispatched'>;
  readonly isStopping: boolean;
  /** Someone watches answers as they are written (a dashboard): TASK_REQs ask for partials. */
  readonly watchers: number;
}

/** The worker links' view: admit and drop workers, route their frames to the parts that own them. */
export interface SessionDeps {
  readonly config: Pick<HubConfig, 'maxLine' | 'tlsCa' | 'handshakeTimeoutMs' | 'deadAfterMs' | 'token' | 'heartbeatMs' | 'msgpack' | 'maxOutbound' | 'prefetchBelowMs'>;
  readonly log: Logger;
  readonly registry: Registry;
  readonly metrics: Pick<HubMetrics, 'protocolErrors'>;
  readonly failover: Pick<HubReplicator, 'join' | 'leave' | 'heartbeat' | 'isPeer' | 'handBack'>;
  readonly roles: Pick<RoleAssigner, 'joined' | 'left' | 'selfAssigned' | 'onAck'>;
  readonly events: HubEvents;
  readonly store: Pick<TaskStore, 'release'>;
  readonly name: string;
  readonly isStopping: boolean;
}
