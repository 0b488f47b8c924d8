import fs from 'node:fs';
import path from 'node:path';

/** A task's final state as the hub (or its journal) holds it. */
export interface FinalTask { id: string; state: string; text?: string; error?: { code: string } }

/** What the checker counts; every field must be 0 for "what goes in must come out". */
export interface Verdict { lost: number; duplicated: number; changed: number; unexpected: number; details: string[] }

/**
 * Compares what clients were told with the final state (Jepsen's "what goes in must come out").
 * Record every answer as it arrives: tasks accepted (202), refused (an error: nothing of it may
 * remain), results and failures seen. Then `check` the final state:
 * - lost: accepted but absent, or not finished when it should be, or told done and not done now;
 * - duplicated: more than one result record for a task in the journal;
 * - changed: a final text differs from the text a client saw, or from the expected text;
 * - unexpected: a task in the final state that no client was told was accepted (a submit whose answer
 *   never came, `pendingIds`, may have happened or not: either is allowed, as in Jepsen).
 */
export class Checker {
  private readonly accepted = new Set<string>();
  private readonly refused = new Map<string, string>();
  /** Sent, and no answer came (the process died): indeterminate, so either outcome is allowed. */
  private readonly pending = new Set<string>();
  private readonly seen = new Map<string, string>();
  private readonly seenFailed = new Set<string>();

  /** A submit answered 2xx for these ids. */
  acceptedIds(ids: Iterable<string>): void { for (const id of ids) { this.accepted.add(id); this.refused.delete(id); } }
  /** A submit was sent for these ids and its answer never came (Jepsen's indeterminate `:info`). */
  pendingIds(ids: Iterable<string>): void { for (const id of ids) this.pending.add(id); }
  /** A submit answered with an error for these ids (a later retry may still accept them). */
  refusedIds(ids: Iterable<string>, code: string): void { for (const id of ids) if (!this.accepted.has(id)) this.refused.set(id, code); }
  /** A client was shown this task as done with this text (/wait, GET /tasks/:id). */
  sawDone(id: string, text: string): void { this.seen.set(id, text); }
  sawFailed(id: string): void { this.seenFailed.add(id); }

  get counts(): { accepted: number; refused: number; seen: number } {
    return { accepted: this.accepted.size, refused: this.refused.size, seen: this.seen.size };
  }

  /**
   * `final`: every task the hub holds. `expect(id)` gives the text a task must end with, if known.
   * `resultRecords(id)`: how many result records the journal holds (see `journalResults`).
   * `mustFinish`: every accepted task must be done (a fault-free end), not only still present.
   */
  check(final: Iterable<FinalTask>, o: { expect?: (id: string) => string | undefined; resultRecords?: Map<string, number>; mustFinish?: boolean } = {}): Verdict {
    const v: Verdict = { lost: 0, duplicated: 0, changed: 0, unexpected: 0, details: [] };
    const byId = new Map<string, FinalTask>();
    for (const f of final) byId.set(f.id, f);
    const note = (kind: keyof Omit<Verdict, 'details'>, msg: string) => { v[kind]++; if (v.details.length < 20) v.details.push(`${kind}: ${msg}`); };
    for (const id of this.accepted) {
      const f = byId.get(id);
      if (!f) { note('lost', `${id} was accepted and is gone`); continue; }
      if (this.seen.has(id) && f.state !== 'done') { note('lost', `${id} was shown done and is ${f.state}`); continue; }
      if (o.mustFinish && f.state !== 'done' && !this.seenFailed.has(id)) { note('lost', `${id} is ${f.state}, not done`); continue; }
      const want = o.expect?.(id);
      if (f.state === 'done' && want !== undefined && f.text !== want) note('changed', `${id}: ${JSON.stringify(f.text)?.slice(0, 60)} != expected ${JSON.stringify(want).slice(0, 60)}`);
      else if (this.seen.has(id) && f.text !== this.seen.get(id)) note('changed', `${id}: final text differs from the text a client saw`);
    }
    for (const [id, f] of byId) {
      if (this.accepted.has(id) || (this.pending.has(id) && !this.refused.has(id))) continue;
      note('unexpected', `${id} is ${f.state} but no client was told it was accepted${this.refused.has(id) ? ` (it was refused with ${this.refused.get(id)})` : ''}`);
    }
    for (const [id, n] of o.resultRecords ?? []) if (n > 1) note('duplicated', `${id} has ${n} result records`);
    return v;
  }
}

/**
 * Result records per task id in a state dir's journal files (snapshot, a frozen segment, the live
 * segment). A compaction writes each result once into the snapshot and removes the segments it
 * covers; while both exist (a crash mid-compaction) the segment's results are already in the
 * snapshot, so those are counted once.
 */
export function journalResults(dir: string): Map<string, number> {
  const count = new Map<string, number>();
  const fromFile = (name: string): Map<string, number> => {
    const m = new Map<string, number>();
    let text = '';
    try { text = fs.readFileSync(path.join(dir, name), 'utf8'); } catch { return m; }
    for (const l of text.split('\n')) {
      if (!l.includes('"t":"result"')) continue;
      try { const r = JSON.parse(l) as { t: string; id?: string }; if (r.t === 'result' && r.id) m.set(r.id, (m.get(r.id) ?? 0) + 1); } catch { /* damaged: not a result */ }
    }
    return m;
  };
  const snap = fromFile('snapshot.ndjson');
  for (const [id, n] of snap) count.set(id, n);
  for (const seg of ['journal.old.ndjson', 'journal.ndjson']) {
    for (const [id, n] of fromFile(seg)) count.set(id, (snap.has(id) ? 0 : count.get(id) ?? 0) + n);
  }
  return count;
}
