export { Agent, AgentState, type AgentOptions } from './agent.js';
export { WorkerClient, type HubLocator, type ClientStatus } from './client.js';
export { WorkerPool, type PoolOptions } from './pool.js';
