/** Bounds of HANDSHAKE fields that the CLI checks too (no imports: the CLI reads them without the schemas). */

/** Tasks a worker may run at once (HANDSHAKE `slots`). */
export const MAX_SLOTS = 1024;
/** TASK_REQs a worker may hold queued beyond its slots (HANDSHAKE `queue`). */
export const MAX_QUEUE = 64;
/** Attempts a task may be given (a task's `max_attempts`, the hub's default): past it a failing task is retried all but forever. */
export const MAX_ATTEMPTS = 100;
/**
 * Longest protocol line a hub or worker may be set to take (`--max-line`): half the outbound bound
 * (protocol/types.ts DEFAULT_MAX_OUTBOUND, 16 MiB). A frame as long as the line bound must fit in a
 * peer's outbound buffer beside what is already queued; past it every send of that task cut the link
 * for backpressure, and the task failed as leased too often.
 */
export const MAX_LINE = 8 * 1024 * 1024;
/** Largest `--max-tokens` default a hub takes (a task's own max_tokens has its own bound). */
export const MAX_DEFAULT_TOKENS = 1_000_000;
/** Largest `--prefetch-below-ms`: tasks this long are no longer short. */
export const MAX_PREFETCH_BELOW_MS = 60_000;
/** A worker's or task's id (HANDSHAKE `worker_id`, PROTOCOL.md section 3): a credential or --id past it admits nothing. */
export const MAX_ID = 128;
/** A short text field: a role, a capability, a peer address. */
export const MAX_SHORT_TEXT = 256;
/** Capabilities a worker may have (HANDSHAKE `caps`). */
export const MAX_CAPS = 64;
/** A HANDSHAKE's token; it also travels in an HTTP header (Node's limit for all of them: 16 KiB). */
export const MAX_TOKEN = 4096;
