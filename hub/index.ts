export { Hub, type HubEvents } from './hub.js';
export { hubConfig, HubConfigSchema, isLoopback, type HubConfig } from './config.js';
export { ControlServer, type ControlOptions } from './control.js';
export { Supervisor, alive, killGroup, type SupervisorOptions } from './supervisor.js';
export { Registry, type WorkerEntry } from './registry.js';
export { TaskStore } from './store.js';
export { TaskQueue, type QueueOptions, type WorkerView } from './queue.js';
export { Journal, type JournalRecord } from './journal.js';
export { TaskSpecSchema, TaskState, isFinal, type TaskInput, type TaskRecord, type TaskResult, type TaskSpec } from './task.js';
