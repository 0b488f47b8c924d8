import type { ReplicaEntry } from '../protocol/index.js';
import { hubKey, signedAcceptance, verifyFailure, verifyResult, verifySpec } from '../protocol/result-mac.js';
import { isFinal, type TaskRecord } from './task.js';

/** An entry of a HANDBACK the hub did not take, and why. */
export interface Refusal { id: string; why: string; /** Genuine, but the task is another live worker's lease. */ leased?: boolean }

export interface ScreenContext {
  /** The swarm token: MACs are checked against keys derived from it (none: no worker proves anything). */
  token?: string;
  get(id: string): TaskRecord | undefined;
  /** True if this worker id is connected now. */
  live(worker: string): boolean;
  /**
   * Every task this hub accepted at or before this time is either known here or was evicted and
   * forgotten (TaskStore.acceptedFloor): an unknown one signed with such an acceptance time is not new work.
   */
  acceptedFloor?: number;
}

/**
 * Which entries of a HANDBACK may be merged. Any survivor hands back the results of dead members,
 * so the link a result came on says nothing of who produced it: the result's own MAC does
 * (protocol/result-mac.ts). An entry is refused if
 *   - its result's MAC is not the one of the worker it names (or of a hub of this swarm);
 *   - its task is leased to another worker that is connected: that worker's answer is the one to
 *     record, and the task is held from dispatch only for the worker that offered it;
 *   - its task is unknown here and its spec carries no valid MAC: a task is created only from what
 *     the journal or a verifiable replica knows;
 *   - its task is unknown here and the hub signed its spec with an acceptance time at or before
 *     `acceptedFloor`: evicted after its duplicate window, so it ran and is in the archive.
 * A result for a task already final passes unchecked: it records nothing (a duplicate).
 *
 * A final failure (an entry with `failure` and no result) is refused, besides, if
 *   - its MAC is not the one of the worker it names, the member that decided it (or of a hub);
 *   - it does not carry the task's spec with a valid MAC: a member that held the task in the swarm's
 *     replicated state has it, a client that only holds a worker's credential does not, so such a
 *     client cannot fail a task it never ran (or never held);
 *   - its task is leased to another worker that is connected (as for a result).
 * A failure never replaces a result: the store records it only for a task not final yet.
 */
export function screenHandback(entries: readonly ReplicaEntry[], ctx: ScreenContext): { accept: ReplicaEntry[]; refused: Refusal[] } {
  const accept: ReplicaEntry[] = [];
  const refused: Refusal[] = [];
  const hk = ctx.token ? hubKey(ctx.token) : undefined;
  for (const e of entries) {
    const why = check(e, ctx, hk);
    if (why) refused.push({ id: e.id, why, ...(why.startsWith('leased to ') ? { leased: true } : {}) }); else accept.push(e);
  }
  return { accept, refused };
}

function check(e: ReplicaEntry, ctx: ScreenContext, hk: string | undefined): string | undefined {
  const rec = ctx.get(e.id);
  if (rec && isFinal(rec)) return undefined;
  const r = e.result;
  const text = r && typeof r.text === 'string' ? r.text : undefined;
  if (!rec) {
    if (!e.spec) return text !== undefined ? 'unknown task, and the entry has no spec' : undefined;
    if (e.spec.id !== e.id) return `spec id ${e.spec.id} is not the entry's id`;
    if (ctx.token && !verifySpec(ctx.token, e.spec, e.spec_mac, hk)) return 'unknown task, and its spec has no valid MAC';
    const at = ctx.token ? signedAcceptance(e.spec_mac) : undefined;
    if (at !== undefined && ctx.acceptedFloor !== undefined && at <= ctx.acceptedFloor) return 'evicted after its duplicate window (accepted before what the hub remembers): see the results archive';
  }
  if (!r) return e.failure ? checkFailure(e, rec, ctx, hk) : undefined;
  if (text === undefined) return undefined;
  if (ctx.token && !verifyResult(ctx.token, e.id, { worker: r.worker, attempt: r.attempt, text, mac: r.mac }, hk)) {
    return `result has no valid MAC of worker ${r.worker}`;
  }
  if (rec?.state === 'leased' && rec.worker !== undefined && rec.worker !== r.worker && ctx.live(rec.worker)) {
    return `leased to ${rec.worker}, which is connected`;
  }
  return undefined;
}

function checkFailure(e: ReplicaEntry, rec: TaskRecord | undefined, ctx: ScreenContext, hk: string | undefined): string | undefined {
  const f = e.failure!;
  if (!f.error) return 'failure without an error';
  if (ctx.token) {
    if (!verifyFailure(ctx.token, e.id, { worker: f.worker, attempt: f.attempt, error: f.error, mac: f.mac }, hk)) return `failure has no valid MAC of worker ${f.worker}`;
    // An unknown task's spec was checked above; a known one's is checked here.
    if (rec && (!e.spec || e.spec.id !== e.id || !verifySpec(ctx.token, e.spec, e.spec_mac, hk))) return "failure without the task's spec and its valid MAC";
  }
  if (rec?.state === 'leased' && rec.worker !== undefined && rec.worker !== f.worker && ctx.live(rec.worker)) {
    return `leased to ${rec.worker}, which is connected`;
  }
  return undefined;
}

/** The ERROR text for refused entries: counts, then the first few ids with their reasons. */
export function refusalMessage(refused: readonly Refusal[], of: number, recorded: number, duplicate: number): string {
  const shown = refused.slice(0, 5).map((r) => `${r.id}: ${r.why}`).join('; ');
  return `${refused.length} of ${of} handback entries refused, nothing recorded for them (${recorded} recorded, ${duplicate} duplicate): ${shown}${refused.length > 5 ? '; …' : ''}`.slice(0, 4000);
}
