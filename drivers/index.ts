/** Engine drivers: the Driver interface, the registry, and what every driver shares. */
export type { AheadTicket, ChatOptions, ChatStats, Driver, DriverConfig } from './types.js';
export { createDriver, driverNames, loadDriver, registerDriver, type DriverFactory } from './registry.js';
export { LoopGuard } from './loop-guard.js';
export { StopFilter } from './stop-filter.js';
export { killAllChildren, killGroup, keepLoopAlive, stopGracefully, trackChild, untrackChild, ORPHAN_WATCHDOG } from './lifecycle.js';
export { EngineLoadError, isPermanentEngineError } from './engine-error.js';
