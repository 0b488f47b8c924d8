import type { JournalRecord, LazyLine, RawLine } from './journal.js';
import { decodeRecord } from './journal-record.js';
import type { LazyEvict } from './journal-evict.js';
import { indexableId, type IndexedTask, type SnapshotTask } from './snapshot-index.js';
import type { Damage } from './journal-files.js';
import { ReplayedTask, readSpec } from './replayed.js';
import { RECORD_BYTES, taskBytes } from './retention-bytes.js';
import type { Evictor } from './archive-evict.js';
import type { TaskQueue } from './queue.js';
import { isFinal, type TaskRecord } from './task.js';

export type FinalRecord = Extract<JournalRecord, { t: 'result' | 'fail' }>;
export interface MetaRecord { kind: string; data: unknown; at: number; unchecked?: true }

/** What of the store replay rebuilds and a snapshot writes out (TaskStore's own collections). */
export interface StoreState {
  readonly q: TaskQueue;
  readonly evictor: Evictor;
  /** Final records whose task is unknown (its line was damaged): kept, never dropped at compaction. */
  readonly orphans: Map<string, FinalRecord>;
  /** Ids whose task or final record came from a line without a checksum (see JournalRecord). */
  readonly unchecked: { task: Set<string>; final: Set<string> };
  /** Meta records for other parts to resume from, and every one as journaled (for snapshots). */
  readonly meta: { kind: string; data: unknown }[];
  readonly metas: MetaRecord[];
}

/** A journaled final record applied to memory (replay, or an orphan whose task came back). */
export function applyFinal(s: StoreState, r: FinalRecord): void {
  if (r.t === 'result') s.q.complete(r.id, { text: r.text, worker: r.worker, attempt: r.attempt, receipt: r.receipt }, r.at);
  else {
    s.q.markFailed(r.id, r.error, r.at);
    // Leases are not journaled: the attempts a failure used come back only from its own record.
    const rec = s.q.get(r.id);
    if (rec && r.attempts > rec.attempts) rec.attempts = r.attempts;
  }
  if (r.unchecked) s.unchecked.final.add(r.id);
}

/**
 * The journal read back into the store, one record at a time in the journal's order (Journal.open's
 * sinks): accepted tasks without a result are queued again, every result is recorded once (by task
 * id), evicted ids go to the duplicate window.
 */
export class Replay {
  /**
   * The latest acceptance or eviction time the journal held (see TaskStore.acceptedFloor). A task
   * accepted before it is in the journal (the hub writes in time order and loses at most a tail).
   */
  openFloor = 0;
  /** Tasks replayed with their lines unparsed: those still queued at replay's end are parsed then. */
  private restored: ReplayedTask[] = [];
  /** Nothing hot yet: a snapshot writes its evict records before its tasks, so none of their ids is looked up. */
  private empty = true;

  constructor(private readonly s: StoreState) {}

  /** One journal record read back on open, applied to memory. */
  one(r: JournalRecord): void {
    const { q } = this.s;
    if (r.t === 'task') this.raiseFloor(r.at, true);
    else if (r.t === 'evict') this.raiseFloor(r.at, r.ids.length > 0, r.floor);
    if (r.t === 'task') {
      if (q.has(r.spec.id)) return;
      r.spec.priority ??= 0;
      q.add(r.spec, r.at);
      this.empty = false;
      if (r.unchecked) this.s.unchecked.task.add(r.spec.id);
    } else if (r.t === 'result' || r.t === 'fail') {
      const rec = q.get(r.id);
      if (!rec) { if (!this.s.orphans.has(r.id) && !this.s.evictor.tombstones.has(r.id)) this.s.orphans.set(r.id, r); return; }
      if (isFinal(rec)) return;
      applyFinal(this.s, r);
    } else if (r.t === 'evict') this.s.evictor.replay(r, !this.empty);
    else if (r.t === 'meta') {
      this.s.meta.push({ kind: r.kind, data: r.data });
      this.s.metas.push({ kind: r.kind, data: r.data, at: r.at, ...(r.unchecked ? { unchecked: true as const } : {}) });
    }
  }

  /**
   * A task or result line read back unparsed (journal-record.ts `decodeLazy`), applied as `one`
   * applies the parsed record: a task is restored with its line, a result on such a task keeps its
   * line; anything else (an orphan, a task that was parsed) is parsed here and goes to `one`.
   */
  lazy(l: LazyLine | LazyEvict): void {
    const { q } = this.s;
    if (l.t === 'evict') { this.evict(l); return; }
    if (l.t === 'task') {
      this.raiseFloor(l.at, true);
      if (q.has(l.id)) return;
      const rec = new ReplayedTask(l.id, l.at, l);
      q.restore(rec);
      this.empty = false;
      this.restored.push(rec);
      return;
    }
    const rec = q.get(l.id);
    if (rec && isFinal(rec)) return;
    if (rec instanceof ReplayedTask) { rec.resultLine = l; q.restoreDone(rec, l.at); return; }
    const d = decodeRecord(l.buf.toString('utf8', l.start, l.end));
    if (d.ok) this.one(d.rec);
  }

  /**
   * A task from the snapshot's index (hub/snapshot-index.ts) with its result line if done, applied
   * as `lazy` applies its two lines (one lookup, not two; a task done is not kept for readyRestored).
   */
  indexed(x: IndexedTask): void {
    const { q } = this.s;
    this.raiseFloor(x.at, true);
    if (q.has(x.id)) {
      if (x.resultEnd >= 0) this.lazy({ t: 'result', id: x.id, at: x.resultAt, buf: x.buf, start: x.resultStart, end: x.resultEnd });
      return;
    }
    const rec = new ReplayedTask(x.id, x.at, x);
    q.restore(rec);
    this.empty = false;
    if (x.resultEnd < 0) { this.restored.push(rec); return; }
    rec.setResultLine(x.buf, x.resultStart, x.resultEnd);
    q.restoreDone(rec, x.resultAt);
    if (x.bytes >= 0) rec.hotBytes = x.bytes + RECORD_BYTES;
  }

  /** An evict record read back unparsed, applied as `one` applies the parsed record. */
  private evict(l: LazyEvict): void {
    this.raiseFloor(l.at, l.count > 0, l.floor);
    this.s.evictor.replayLazy(l, !this.empty);
  }

  /**
   * `openFloor` past a task's acceptance or an eviction (`at`, `timed`), and past the floor an evict
   * record carries. Not an evict record without ids: the snapshot writes it with the time it was
   * written, which tasks accepted meanwhile (in the journal's tail) may precede.
   */
  private raiseFloor(at: number, timed: boolean, floor?: number): void {
    if (timed && at > this.openFloor) this.openFloor = at;
    if (typeof floor === 'number' && floor + 1 > this.openFloor) this.openFloor = floor + 1;
  }

  /**
   * Replay's end: tasks restored unparsed and still queued have their spec read and join the ready
   * set. One whose line does not parse (its checksum held, so only a writer's bug makes one) is left
   * out as damage, as it would have been had it been parsed when read.
   */
  readyRestored(): Damage[] {
    const { q } = this.s;
    const bad: Damage[] = [];
    for (const rec of this.restored) {
      if (rec.state !== 'queued' || q.get(rec.id) !== rec) continue;
      const line = rec.taskLine;
      const spec = line === undefined ? rec.spec : readSpec(line, rec.id);
      if (spec) { rec.spec = spec; q.makeReady(rec); continue; }
      q.makeReady(rec, true);
      bad.push({ file: 'journal', offset: -1, why: 'task line with a valid checksum does not parse', raw: line ? line.buf.toString('utf8', line.start, line.end) : '' });
    }
    this.restored = [];
    return bad;
  }
}

/** The records that rebuild the current state (what replay reads back): tasks in submission order, their final records, meta. */
export function* snapshotRecords(s: StoreState, acceptedFloor: number): Iterable<JournalRecord | RawLine | SnapshotTask> {
  // Which records, taken at once: the writer yields to the event loop between pieces, and a live
  // Map's iterator also visits what is added meanwhile (under load it chased new tasks for minutes).
  // Each record is encoded as it is when its piece is written; the journal's tail covers any change.
  const metas = [...s.metas];
  const evicts = [...s.evictor.snapshot(acceptedFloor)];
  const tasks = [...s.q.all()];
  const orphans = [...s.orphans.values()];
  for (const m of metas) yield { t: 'meta', kind: m.kind, data: m.data, at: m.at, ...(m.unchecked ? { unchecked: true as const } : {}) };
  // Before the tasks: an id accepted again after its window is hot, and must stay so on replay.
  yield* evicts;
  const { task, final } = s.unchecked;
  for (let i = 0; i < tasks.length; i++) {
    const r = tasks[i]!;
    // Let go of each record once taken: the writer yields every few ms, so a compaction lasts seconds
    // under load, and the tasks evicted meanwhile stayed in memory until it ended.
    (tasks as (TaskRecord | undefined)[])[i] = undefined;
    // A task replayed and not read since goes as it was read (no parse, no encode).
    const lazy = r instanceof ReplayedTask ? r : undefined;
    const taskLine = lazy?.taskLine;
    const uncheckedTask = task.size > 0 && task.has(r.id);
    const t: JournalRecord | RawLine = taskLine ?? { t: 'task', spec: idFirst(r.spec), at: r.submittedAt, ...(uncheckedTask ? { unchecked: true as const } : {}) };
    const u = final.size && final.has(r.id) ? { unchecked: true as const } : {};
    const resultLine = r.state === 'done' ? lazy?.resultLine : undefined;
    const result: JournalRecord | RawLine | undefined = resultLine
      ?? (r.state === 'done' && r.result ? { t: 'result', id: r.id, text: r.result.text, worker: r.result.worker, attempt: r.result.attempt, receipt: r.result.receipt, at: r.finishedAt ?? 0, ...u } : undefined);
    // The snapshot's index describes a task line in the writer's form (the id first and unescaped,
    // checked) and its result line after it; anything else goes as lines replay reads one by one.
    if (!uncheckedTask && indexableId(r.id)) {
      const paired = result && !('unchecked' in u);
      yield { t: 'indexed-task', id: r.id, at: r.submittedAt, task: t, result: paired ? result : undefined, resultAt: r.finishedAt ?? 0, bytes: paired ? taskBytes(r) - RECORD_BYTES : -1 };
      if (result && !paired) yield result;
    } else {
      yield t;
      if (result) yield result;
    }
    if (r.state === 'failed' && r.error) yield { t: 'fail', id: r.id, error: r.error, attempts: r.attempts, at: r.finishedAt ?? 0, ...u };
  }
  // After the tasks: a task submitted again since takes its orphaned result on replay.
  yield* orphans;
}

/** The spec with `id` as its first key (a copy only if it is not: specs from older journals). */
function idFirst<S extends { id: string }>(spec: S): S {
  for (const k in spec) return k === 'id' ? spec : Object.assign({ id: spec.id }, spec);
  return spec;
}
