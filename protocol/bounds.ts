/** Bounds of HANDSHAKE fields that the CLI checks too (no imports: the CLI reads them without the schemas). */

/** Tasks a worker may run at once (HANDSHAKE `slots`). */
export const MAX_SLOTS = 1024;
/** TASK_REQs a worker may hold queued beyond its slots (HANDSHAKE `queue`). */
export const MAX_QUEUE = 64;
/** Attempts a task may be given (a task's `max_attempts`, the hub's default): past it a failing task is retried all but forever. */
export const MAX_ATTEMPTS = 100;
