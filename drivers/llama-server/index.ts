/** The llama-server driver: llama.cpp's HTTP server as an engine, spawned per worker or shared. */
export { LlamaServerDriver, llamaServerFactory } from './driver.js';
export { parseLlamaServerOptions, type LlamaServerOptions } from './options.js';
export { EngineProcess, freePort, keepLoopAlive, type EngineExit, type EngineProcessOptions } from './engine-process.js';
export { SseDecoder, type SseEvent, type CompletionChunk } from './sse.js';
