export { Agent, AgentState, type AgentOptions } from './agent.js';
export { WorkerClient, type HubLocator, type ClientStatus } from './client.js';
export { WorkerPool, type PoolOptions } from './pool.js';
export { OrphanGuard, orphanCheckMs, parentWatch, type OrphanSignals } from './orphan.js';
export { poolOrphanSignals } from './orphan-gossip.js';
// Types only: the gossip code loads when an agent runs with failover (agent.ts).
export type { AgentFailover, AgentFailoverOptions } from './failover-agent.js';
export { readFailoverStatus, readFailoverStatusAll, failoverStatusPath, type FailoverStatusFile, type AgentFailoverStatus, type StaleFailoverStatus } from './failover-status.js';
export { workerConfig, WORKER_DEFAULTS, type WorkerConfig, type WorkerConfigInput } from './config.js';
