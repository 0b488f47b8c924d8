/** The Ollama driver: an Ollama server's REST API (/api/generate, streamed NDJSON) as an engine. */
export { OllamaDriver, ollamaFactory } from './driver.js';
export { parseOllamaOptions, type OllamaOptions } from './options.js';
export { ollamaBaseUrl, DEFAULT_OLLAMA_URL } from './host.js';
export { NdjsonDecoder, type GenerateChunk } from './ndjson.js';
