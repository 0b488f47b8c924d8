export { Hub, type HubEvents } from './hub.js';
export { hubConfig, HubConfigSchema, isLoopback, type HubConfig } from './config.js';
export { ControlServer, type ControlOptions } from './control.js';
export { Supervisor, alive, killGroup, type SupervisorOptions } from './supervisor.js';
export { Registry, type WorkerEntry } from './registry.js';
