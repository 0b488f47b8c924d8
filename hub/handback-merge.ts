import { setImmediate as turn } from 'node:timers/promises';
import { isErrorCode, type ErrorCode, type ReplicaEntry } from '../protocol/index.js';
import { mergeHandback, type HandbackReport, type HandbackSink } from '../sched/index.js';
import { screenHandback, type Refusal, type ScreenContext } from './handback-check.js';

/** What the hub's handback merge needs of the store. */
export interface MergeStore {
  /** True if the task is final here: hot and finished, or evicted inside the duplicate window. */
  final(id: string): boolean;
  has(id: string): boolean;
  submitMany(specs: readonly unknown[]): Promise<unknown>;
  complete: HandbackSink['complete'];
  /** Record a final failure decided in gossip mode (TaskStore.failHandedBack); without it failures are not merged. */
  fail?(id: string, error: { code: ErrorCode; msg: string }, attempts: number): Promise<'recorded' | 'duplicate' | 'unknown'>;
}

/**
 * Entries screened (MAC checks) and merged per slice, with a turn of the event loop between slices:
 * after a hub restart every agent hands back at once, and one frame merged in a single turn (6,000
 * entries took 6 s) held up the other agents' handshakes, and with them the swarm's readiness.
 */
export const SLICE = 256;

export interface MergeReport extends HandbackReport { refused: Refusal[]; /** Entries skipped by id: final here already. */ known: number }

/**
 * Merge one HANDBACK frame's entries. Entries for tasks final here (hot, or evicted inside the
 * duplicate window) are counted as duplicates by id alone, before any MAC check, JSON or journal
 * work: a worker's replica may hold results the hub recorded and evicted long ago.
 */
export async function mergeSliced(entries: readonly ReplicaEntry[], store: MergeStore, screen: ScreenContext): Promise<MergeReport> {
  const rep: MergeReport = { submitted: 0, recorded: 0, duplicate: 0, unknown: 0, skipped: 0, failures: 0, refused: [], known: 0 };
  const fail = store.fail?.bind(store);
  for (let i = 0; i < entries.length; i += SLICE) {
    if (i) await turn();
    const fresh: ReplicaEntry[] = [];
    for (const e of entries.slice(i, i + SLICE)) {
      if (store.final(e.id)) rep.known++; else fresh.push(e);
    }
    if (!fresh.length) continue;
    const { accept, refused } = screenHandback(fresh, screen);
    rep.refused.push(...refused);
    if (!accept.length) continue;
    const r = await mergeHandback(accept, {
      has: (id) => store.has(id),
      submitMany: (specs) => store.submitMany(specs),
      complete: (id, res) => store.complete(id, res),
      // A code outside the catalogue (a newer worker's) is kept in the message, under TASK_FAILED.
      ...(fail ? { fail: (id: string, f: { attempts: number; error: { code: string; msg: string } }) => fail(id, isErrorCode(f.error.code) ? { code: f.error.code, msg: f.error.msg } : { code: 'SWARM_ERR_TASK_FAILED', msg: `${f.error.code}: ${f.error.msg}`.slice(0, 64 * 1024) }, f.attempts) } : {}),
    }, SLICE);
    rep.submitted += r.submitted;
    rep.recorded += r.recorded;
    rep.duplicate += r.duplicate;
    rep.unknown += r.unknown;
    rep.failures += r.failures;
  }
  rep.duplicate += rep.known;
  return rep;
}
