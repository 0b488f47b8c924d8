import { PROMPT_CACHE_CAP } from '../protocol/index.js';
import type { DriverConfig } from '../drivers/index.js';

/**
 * Drivers whose engine keeps a sequence's evaluated tokens between tasks, so a prompt that starts
 * like the last one skips evaluating that start: the batched engine (one sequence per worker) and
 * llama-server (every request sends cache_prompt; a shared server gives each worker its own slot).
 * Echo and the per-worker embedded engine evaluate every prompt afresh, so affinity buys them nothing.
 */
const KEEPS_PROMPTS = new Set(['batched', 'llama-server']);

/** The caps a worker announces: its own, plus the prompt-cache cap when its engine keeps prompts. */
export function handshakeCaps(caps: readonly string[] | undefined, driver: DriverConfig): string[] {
  const out = [...(caps ?? [])];
  if (KEEPS_PROMPTS.has(driver.name) && !out.includes(PROMPT_CACHE_CAP)) out.push(PROMPT_CACHE_CAP);
  return out;
}
