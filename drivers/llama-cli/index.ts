/** The llama-cli driver: llama.cpp's interactive completion CLI as one long-lived engine process. */
export { LlamaCliDriver, llamaCliFactory } from './driver.js';
export { parseLlamaCliOptions, type LlamaCliOptions } from './options.js';
export { TurnReader, encodePrompt, INPUT_MARK, RESET_MARK } from './turn.js';

