import type { ErrorCode } from '../protocol/index.js';

/** Attempts a task gets when its spec does not say. */
export const DEFAULT_MAX_ATTEMPTS = 3;
/** First retry waits about this long, doubling per attempt. */
export const BACKOFF_BASE_MS = 100;
/** No retry waits longer than this. */
export const BACKOFF_CAP_MS = 30_000;
/**
 * A task handed back this many times its max attempts without an answer (its workers keep dying or
 * refusing) fails: something about it, not the workers, is wrong.
 */
export const RELEASE_FACTOR = 3;

/** Errors after which a task is not worth running again: the input or the output is at fault. */
export const NOT_RETRYABLE: ReadonlySet<string> = new Set<ErrorCode>(['SWARM_ERR_BAD_PAYLOAD', 'SWARM_ERR_LOOP_DETECTED', 'SWARM_ERR_CONTEXT_EXCEEDED']);

/** Is a failure with this code worth another attempt? */
export function isRetryable(code: string): boolean { return !NOT_RETRYABLE.has(code); }

/** A task's attempt budget. */
export function maxAttemptsOf(spec: { max_attempts?: unknown }, fallback = DEFAULT_MAX_ATTEMPTS): number {
  return typeof spec.max_attempts === 'number' && spec.max_attempts >= 1 ? spec.max_attempts : fallback;
}

/**
 * How long to wait before attempt `attempts + 1`, after `attempts` failed: exponential with a cap,
 * and jitter (half to all of it) so tasks that failed together do not come back together.
 */
export function backoffMs(attempts: number, random: () => number = Math.random, baseMs = BACKOFF_BASE_MS): number {
  return Math.min(BACKOFF_CAP_MS, baseMs * 2 ** Math.max(0, attempts - 1)) * (0.5 + random() / 2);
}

/** What to do after a failed attempt: run again later, or fail for good (with the error to record). */
export type FailVerdict =
  | { kind: 'retry'; delayMs: number }
  | { kind: 'failed'; error: { code: ErrorCode; msg: string } };

/** The retry policy: one decision for the hub and the acting coordinator. */
export function afterFailure(
  attempts: number, max: number, error: { code: ErrorCode; msg: string }, retryable = isRetryable(error.code),
  random: () => number = Math.random, baseMs = BACKOFF_BASE_MS,
): FailVerdict {
  if (retryable && attempts < max) return { kind: 'retry', delayMs: backoffMs(attempts, random, baseMs) };
  if (!retryable) return { kind: 'failed', error };
  return { kind: 'failed', error: { code: 'SWARM_ERR_RETRIES_EXHAUSTED', msg: `failed ${attempts} time(s); last: ${error.code}: ${error.msg}` } };
}

/**
 * A lease lost without a verdict (its worker left, or it lapsed): the task runs again, unless it
 * has been handed out `RELEASE_FACTOR` times its budget without an answer, when it fails for good.
 */
export function afterLeaseLost(attempts: number, max: number): FailVerdict | undefined {
  if (attempts < max * RELEASE_FACTOR) return undefined;
  return { kind: 'failed', error: { code: 'SWARM_ERR_RETRIES_EXHAUSTED', msg: `leased ${attempts} times without a result` } };
}
