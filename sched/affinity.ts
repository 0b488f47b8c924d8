/**
 * Cache-aware dispatch: an engine that keeps a sequence's evaluated tokens (the batched engine,
 * llama-server with cache_prompt) answers a prompt that starts like the sequence's last one without
 * evaluating that start again. So of the workers that could equally run a task, prefer the one whose
 * last prompt shares the longest start with it. Pure: no I/O, no clock.
 */

/** Shared starts shorter than this are not worth moving a task for (a BOS token and a word). */
export const MIN_AFFINITY_CHARS = 16;

/** Compare at most this much of two prompts (a bound on the hub's work per dispatch). */
const MAX_COMPARE = 64 * 1024;

/** Length of the common start of two strings, in UTF-16 units, up to MAX_COMPARE. */
export function sharedPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length, MAX_COMPARE);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/**
 * Of `candidates` (in today's dispatch order, the first being the worker that would get the task),
 * the index of the one whose last prompt shares the longest start with `prompt`. A tie, or no start
 * of at least MIN_AFFINITY_CHARS, keeps today's order (index 0).
 */
export function pickByPrefix(prompt: string, candidates: readonly (string | undefined)[]): number {
  let best = 0;
  let bestLen = candidates[0] === undefined ? 0 : sharedPrefix(prompt, candidates[0]);
  for (let i = 1; i < candidates.length; i++) {
    const last = candidates[i];
    if (last === undefined) continue;
    const len = sharedPrefix(prompt, last);
    if (len > bestLen && len >= MIN_AFFINITY_CHARS) { best = i; bestLen = len; }
  }
  return best;
}
