/**
 * Cache-aware dispatch: an engine that keeps a sequence's evaluated tokens (the batched engine,
 * llama-server with cache_prompt) answers a prompt that starts like the sequence's last one without
 * evaluating that start again. So of the workers that could equally run a task, prefer the one whose
 * last prompt shares the longest start with it. Pure: no I/O, no clock.
 *
 * A dispatch compares one prompt with every free candidate's last prompt, so the compare is made of
 * fixed-size chunk hashes computed once per prompt: comparing two prompts costs one integer compare
 * per chunk plus at most one chunk of characters, however long they are.
 */

/** Shared starts shorter than this are not worth moving a task for (a BOS token and a word). */
export const MIN_AFFINITY_CHARS = 16;

/** Characters per hashed chunk. */
export const CHUNK_CHARS = 256;

/** Compare at most this much of two prompts (a bound on the hub's work and memory per worker). */
export const MAX_COMPARE = 64 * 1024;

/** A prompt's start as affinity compares it: the start itself (bounded) and its chunks' hashes. */
export interface PromptKey { readonly text: string; readonly chunks: Uint32Array }

/** The key of a prompt: its first MAX_COMPARE characters and the FNV-1a hash of each full chunk. */
export function promptKey(prompt: string): PromptKey {
  const text = prompt.length > MAX_COMPARE ? prompt.slice(0, MAX_COMPARE) : prompt;
  const chunks = new Uint32Array(Math.floor(text.length / CHUNK_CHARS));
  for (let c = 0; c < chunks.length; c++) {
    let h = 0x811c9dc5;
    for (let i = c * CHUNK_CHARS, end = i + CHUNK_CHARS; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    chunks[c] = h >>> 0;
  }
  return { text, chunks };
}

/**
 * Length of the common start of two keyed prompts, in UTF-16 units, up to MAX_COMPARE: equal chunk
 * hashes count as equal chunks (a collision only sends a task to a worker with a colder cache), and
 * the first chunk that differs is compared character by character.
 */
export function sharedKeyPrefix(a: PromptKey, b: PromptKey): number {
  const n = Math.min(a.chunks.length, b.chunks.length);
  let c = 0;
  while (c < n && a.chunks[c] === b.chunks[c]) c++;
  let i = c * CHUNK_CHARS;
  const end = Math.min(a.text.length, b.text.length, i + CHUNK_CHARS);
  while (i < end && a.text.charCodeAt(i) === b.text.charCodeAt(i)) i++;
  return i;
}

/** Length of the common start of two strings, in UTF-16 units, up to MAX_COMPARE. */
export function sharedPrefix(a: string, b: string): number { return sharedKeyPrefix(promptKey(a), promptKey(b)); }

/**
 * Of `candidates` (in today's dispatch order, the first being the worker that would get the task),
 * the index of the one whose last prompt shares the longest start with `prompt`. A tie, or no start
 * of at least MIN_AFFINITY_CHARS, keeps today's order (index 0).
 */
export function pickByPrefix(prompt: string | PromptKey, candidates: readonly (string | PromptKey | undefined)[]): number {
  const p = typeof prompt === 'string' ? promptKey(prompt) : prompt;
  const len = (c: string | PromptKey | undefined) => (c === undefined ? 0 : sharedKeyPrefix(p, typeof c === 'string' ? promptKey(c) : c));
  let best = 0;
  let bestLen = len(candidates[0]);
  for (let i = 1; i < candidates.length; i++) {
    const l = len(candidates[i]);
    if (l > bestLen && l >= MIN_AFFINITY_CHARS) { best = i; bestLen = l; }
  }
  return best;
}
