import type { Receipt, ReplicaEntry, WireSpec } from '../protocol/index.js';

/** What a handback is merged into: the hub's store, or a test's stand-in. */
export interface HandbackSink {
  /** Accept specs; known ids come back as duplicates (ids are idempotency keys). */
  submitMany(specs: WireSpec[]): Promise<unknown>;
  /** Record a result once per task id. */
  complete(id: string, r: { text: string; worker: string; attempt: number; receipt?: Receipt }): Promise<'recorded' | 'duplicate' | 'unknown'>;
  /**
   * Record a final failure decided in gossip mode, once per task id and never over a result
   * ('duplicate' if the task is final already). Without it, failures are not handed back.
   */
  fail?(id: string, f: { worker: string; attempt: number; attempts: number; error: { code: string; msg: string } }): Promise<'recorded' | 'duplicate' | 'unknown'>;
  has(id: string): boolean;
  /** True if the sink has the task final (ids first: such results are not offered at all). */
  final?(id: string): boolean;
}

/**
 * `skipped`: results not offered because the sink had them final already. `recorded`, `duplicate`
 * and `unknown` count results and failures alike; `failures` says how many of `recorded` were failures.
 */
export interface HandbackReport { submitted: number; recorded: number; duplicate: number; unknown: number; skipped: number; failures: number }

/**
 * Merge what gossip mode finished into a hub (restarted from its journal, or new): tasks it does not
 * know are submitted first, in submission order, then every result is offered by task id, then every
 * final failure of a task without a result. Each is recorded once; an outcome for a task final there
 * counts as a duplicate and changes nothing, so handing back twice, or from every worker, is safe.
 */
export async function mergeHandback(entries: readonly ReplicaEntry[], sink: HandbackSink, chunk = 500): Promise<HandbackReport> {
  const rep: HandbackReport = { submitted: 0, recorded: 0, duplicate: 0, unknown: 0, skipped: 0, failures: 0 };
  const missing = entries.filter((e) => e.spec && !sink.has(e.id))
    .sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity))
    .map((e) => e.spec!);
  for (let i = 0; i < missing.length; i += chunk) {
    await sink.submitMany(missing.slice(i, i + chunk));
    rep.submitted += Math.min(chunk, missing.length - i);
  }
  // A chunk of results is offered at once: a journaled sink then writes and fsyncs them as one group
  // commit instead of one fsync per result (each task id is in the chunk once, so order within it is free).
  const offers = entries.filter((e) => {
    if (!e.result || typeof e.result.text !== 'string') return false;
    if (sink.final?.(e.id)) { rep.skipped++; return false; }
    return true;
  });
  for (let i = 0; i < offers.length; i += chunk) {
    const outcomes = await Promise.all(offers.slice(i, i + chunk).map((e) => {
      const r = e.result!;
      return sink.complete(e.id, { text: r.text as string, worker: r.worker, attempt: r.attempt, receipt: r.receipt });
    }));
    for (const o of outcomes) rep[o]++;
  }
  // Failures after every result of the frame: an entry with a result is never offered as failed, and
  // a failure finds a result recorded just before it final already (a result wins).
  const fail = sink.fail?.bind(sink);
  if (!fail) return rep;
  const failures = entries.filter((e) => e.failure?.error && !e.result);
  for (let i = 0; i < failures.length; i += chunk) {
    const outcomes = await Promise.all(failures.slice(i, i + chunk).map((e) => {
      const f = e.failure!;
      // Attempts used: the leases its verdict counted, less those handed back unrun.
      return fail(e.id, { worker: f.worker, attempt: f.attempt, attempts: Math.max(0, f.attempt - (e.lease?.unrun ?? 0)), error: f.error! });
    }));
    for (const o of outcomes) { rep[o]++; if (o === 'recorded') rep.failures++; }
  }
  return rep;
}
