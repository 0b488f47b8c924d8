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

/** What the hub's parts share: the composition root (hub.ts) is one. */
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
