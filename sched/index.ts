/**
 * The scheduling rules as pure functions and one data structure: task states, priority then FIFO,
 * routing by role and caps, attempts, retry with backoff, leases. No I/O and no timers: callers pass
 * the clock. The hub runs it over its journal-backed store, the acting coordinator over its replica.
 * Worker code imports the modules one by one, not this index: 25 worker processes start at once and
 * each loads only what it runs.
 */
export { TaskState, TRANSITIONS, isFinalState, canMove } from './state.js';
export { runsBefore, compareRanked, type Ranked } from './order.js';
export { canRun, routeKey, needsOf, type Needs, type Offers } from './route.js';
export {
  DEFAULT_MAX_ATTEMPTS, BACKOFF_BASE_MS, BACKOFF_CAP_MS, RELEASE_FACTOR, NOT_RETRYABLE,
  isRetryable, maxAttemptsOf, backoffMs, afterFailure, afterLeaseLost, type FailVerdict,
} from './retry.js';
export { DEFAULT_LEASE_MS, LEASE_GRACE_MS, STALL_GAP_MS, STALL_AMNESTY_MS, StallClock, leaseUntil, lapsed } from './lease.js';
export { ReadySet, type ReadyItem } from './ready.js';
export { Heap } from './heap.js';
export { mergeHandback, type HandbackSink, type HandbackReport } from './handback.js';
export { pickByPrefix, sharedPrefix, sharedKeyPrefix, promptKey, MIN_AFFINITY_CHARS, CHUNK_CHARS, MAX_COMPARE, type PromptKey } from './affinity.js';
