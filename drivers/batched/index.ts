/** The batched embedded engine: one node-llama-cpp engine per (host, model), a sequence per worker slot. */
export { BatchedDriver, batchedFactory, type BatchedStats } from './driver.js';
export { parseBatchedOptions, type BatchedOptions } from './options.js';
export { enginePaths, enginePid, type EnginePaths } from './engine-start.js';
export { cachedPrefix, evalStart, type TailShape } from './prefix.js';
export { stopEngines } from './engine-stop.js';
