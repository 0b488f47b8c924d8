export { Agent, AgentState, type AgentOptions } from './agent.js';
export { WorkerClient, type HubLocator, type ClientStatus } from './client.js';
export { WorkerPool, type PoolOptions } from './pool.js';
export { AgentFailover, type AgentFailoverOptions } from './failover-agent.js';
export { readFailoverStatus, failoverStatusPath, type FailoverStatusFile, type AgentFailoverStatus } from './failover-status.js';
