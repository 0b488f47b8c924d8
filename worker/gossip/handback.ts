import { mergeHandback, type HandbackReport, type HandbackSink } from '../../sched/handback.js';
import type { Replica } from './replica.js';

export type { HandbackSink, HandbackReport };

/** Hand a whole replica back to a sink in-process (sched's `mergeHandback`, the rule the hub runs on HANDBACK). */
export function handBack(replica: Replica, sink: HandbackSink, chunk = 500): Promise<HandbackReport> {
  return mergeHandback(replica.ids().map((id) => replica.get(id)!), sink, chunk);
}
