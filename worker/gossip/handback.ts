import type { Entry, Replica, ReplicaSpec } from './replica.js';

/** What a hub offers for a handback; the hub's TaskStore fits (submitMany, complete, fail). */
export interface HandbackSink {
  /** Accept specs; known ids come back as duplicates (ids are idempotency keys). */
  submitMany(specs: ReplicaSpec[]): Promise<unknown>;
  /** Record a result once per task id. */
  complete(id: string, r: { text: string; worker: string; attempt: number; receipt?: unknown }): Promise<'recorded' | 'duplicate' | 'unknown'>;
  has(id: string): boolean;
  /** True if the hub has the task final (ids first: such results are not offered at all). */
  final?(id: string): boolean;
}

/** `skipped`: results not offered because the sink had them final already. */
export interface HandbackReport { submitted: number; recorded: number; duplicate: number; unknown: number; skipped: number }

/**
 * Hand what gossip mode finished back to a hub (restarted from its journal, or new): tasks the hub
 * does not know are submitted first, then every result is offered by task id. The hub records each
 * once; a result it already has counts as a duplicate and changes nothing, so handing back twice, or
 * from every worker, is safe. A sink that can say which tasks it has final (`final`) is asked by id
 * first, and only what it lacks is offered (the wire form of this is the HANDBACK `offer`).
 */
export async function handBack(replica: Replica, sink: HandbackSink, chunk = 500): Promise<HandbackReport> {
  const rep: HandbackReport = { submitted: 0, recorded: 0, duplicate: 0, unknown: 0, skipped: 0 };
  const entries = replica.ids().map((id) => replica.get(id)!).filter((e): e is Entry & { spec: ReplicaSpec } => !!e.spec);
  const missing = entries.filter((e) => !sink.has(e.id)).map((e) => e.spec);
  for (let i = 0; i < missing.length; i += chunk) {
    await sink.submitMany(missing.slice(i, i + chunk));
    rep.submitted += Math.min(chunk, missing.length - i);
  }
  for (const e of entries) {
    const r = e.result;
    if (!r || typeof r.text !== 'string') continue;
    if (sink.final?.(e.id)) { rep.skipped++; continue; }
    const out = await sink.complete(e.id, { text: r.text, worker: r.worker, attempt: r.attempt, receipt: r.receipt });
    rep[out]++;
  }
  return rep;
}
