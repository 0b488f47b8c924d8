import { mergeHandback, type HandbackReport, type HandbackSink } from '../../sched/handback.js';
import { signFailure } from '../../protocol/result-mac.js';
import type { Outcome, Replica } from './replica.js';

export type { HandbackSink, HandbackReport };

/** Hand a whole replica back to a sink in-process (sched's `mergeHandback`, the rule the hub runs on HANDBACK). */
export function handBack(replica: Replica, sink: HandbackSink, chunk = 500): Promise<HandbackReport> {
  return mergeHandback(replica.ids().map((id) => replica.get(id)!), sink, chunk);
}

/**
 * Record a final failure this member decided (an acting coordinator's verdict, or its own run's
 * final error), signed with its credential when the replica has one: the hub records a failure
 * handed back only with a MAC of the worker it names (protocol/result-mac.ts `fw1.`).
 */
export function recordFailure(replica: Replica, id: string, o: { worker: string; attempt: number; error: { code: string; msg: string } }): boolean {
  const s = replica.signer;
  const mac = s && s.id === o.worker ? signFailure(s.key, id, o.attempt, o.error) : undefined;
  const f: Outcome = mac ? { ...o, mac } : { ...o };
  return !!replica.record(id, f);
}
