/** The embedded driver: llama.cpp through node-llama-cpp, in a child process of the worker. */
export { EmbeddedDriver, embeddedFactory, type EmbeddedLoadTimes } from './driver.js';
export { parseEmbeddedOptions, type EmbeddedOptions } from './options.js';
export { resolveModel, isModelUri } from './model-uri.js';
