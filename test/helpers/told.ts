import { journal } from './cli.js';

/**
 * What clients were told against what the hub's journal holds at the end ("what goes in must come
 * out"): lost = an acknowledged task with no result, duplicated = one recorded more than once,
 * changed = a result other than the fault-free answer, unexpected = a result for a task no client
 * was told was accepted.
 */
export interface Outcome { lost: number; duplicated: number; changed: number; unexpected: number }

/** `told` maps each acknowledged task id to the answer a fault-free run gives it. */
export function outcome(dir: string, told: ReadonlyMap<string, string>): Outcome {
  const count = new Map<string, number>();
  let changed = 0, unexpected = 0;
  for (const r of journal(dir) as { t: string; id?: string; text?: string }[]) {
    if (r.t !== 'result' || !r.id) continue;
    if (!told.has(r.id)) { unexpected++; continue; }
    count.set(r.id, (count.get(r.id) ?? 0) + 1);
    if (r.text !== told.get(r.id)) changed++;
  }
  let lost = 0, duplicated = 0;
  for (const id of told.keys()) { const c = count.get(id) ?? 0; if (c === 0) lost++; if (c > 1) duplicated++; }
  return { lost, duplicated, changed, unexpected };
}

/** The echo driver's answer to each of `ids`, whose prompt is `task <id>`. */
export function echoAnswers(ids: readonly string[]): Map<string, string> {
  return new Map(ids.map((id) => [id, `echo: task ${id}`]));
}
