import pRetry from 'p-retry';
import { SwarmError } from '../protocol/errors.js';

/**
 * Codes after which sending the same request again may succeed: the hub was unreachable, restarting or
 * could not write, or had no room (a full queue drains as tasks finish; finished tasks held past their
 * bytes bound leave as the archive catches up). A refused upload journaled nothing, so the same slice goes again.
 */
const TRANSIENT = new Set<string>(['SWARM_ERR_NO_SWARM', 'SWARM_ERR_TIMEOUT', 'SWARM_ERR_SHUTDOWN', 'SWARM_ERR_JOURNAL', 'SWARM_ERR_DISK_FULL', 'SWARM_ERR_QUEUE_FULL']);

/** True for an error worth a retry (a network failure or a transient hub error), false for a refusal (4xx). */
export function transient(err: unknown): boolean {
  return err instanceof SwarmError ? TRANSIENT.has(err.code) : true;
}

/**
 * Run `fn` until it succeeds, retrying transient failures with exponential backoff and jitter for at
 * most `forMs`. Only safe for requests that a second delivery cannot do twice: a POST /tasks whose
 * tasks all carry ids (the hub keeps the first of each id), a /wait, a GET.
 */
export function withRetry<T>(fn: (attempt: number) => Promise<T>, forMs: number, onRetry?: (err: unknown, attempt: number) => void): Promise<T> {
  // No retry asked for: one attempt, and no "retrying" line (p-retry reports a failed attempt before
  // it finds the time is up).
  if (forMs <= 0) return fn(1);
  return pRetry(fn, {
    retries: 1000, factor: 2, minTimeout: 100, maxTimeout: 3000, randomize: true, maxRetryTime: forMs,
    shouldRetry: ({ error }) => transient(error),
    onFailedAttempt: ({ error, attemptNumber }) => { if (transient(error)) onRetry?.(error, attemptNumber); },
  });
}
