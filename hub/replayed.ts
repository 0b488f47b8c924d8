import { TaskState } from '../sched/index.js';
import { checkShape, type RawLine } from './journal-record.js';
import type { TaskRecord, TaskResult, TaskSpec } from './task.js';

type Spec = TaskSpec & { id: string };

/**
 * A task read back on open from lines in the journal writer's own form (journal-record.ts
 * `decodeLazy`), holding its task line and its result line as read until a part first reads its spec
 * or result. The hot state is mostly finished tasks, which dispatch never reads, and a restart's CPU
 * went mostly to parsing them (and to tasks a later evict record in the same journal removed).
 * A task still queued at the end of replay is parsed then (TaskStore.open), before it can be leased.
 * A compaction writes a line still unparsed as it was read. The lines stay where they were read
 * (a view, no copy): the journal's read buffers live on while any of their tasks is unparsed and hot,
 * at most the size of the snapshot and segments read, and go as retention evicts those tasks.
 */
export class ReplayedTask implements TaskRecord {
  state: TaskState = TaskState.QUEUED;
  attempts = 0;
  seq = 0;
  finishedAt?: number;
  // worker, leaseUntil, readyAt, error, stallLost: added when set (most replayed tasks never have
  // them, and each field declared is one more word per task copied by every collection during replay).
  /** The task's journal line while its spec is unparsed (in `tb` from `ts` to `te`). */
  private tb?: Buffer;
  private ts: number;
  private te: number;
  /** The result's journal line while it is unparsed. */
  private rb?: Buffer;
  private rs = 0;
  private re = 0;
  private parsedSpec?: Spec;
  private parsedResult?: TaskResult;

  constructor(readonly id: string, public submittedAt: number, line: RawLine) {
    this.tb = line.buf;
    this.ts = line.start;
    this.te = line.end;
  }

  /** The task line as read, while its spec is unparsed. */
  get taskLine(): RawLine | undefined { return this.tb && { buf: this.tb, start: this.ts, end: this.te }; }
  /** The result line as read, while it is unparsed. */
  get resultLine(): RawLine | undefined { return this.rb && { buf: this.rb, start: this.rs, end: this.re }; }
  /** The result, as its line (replay of a task restored unparsed). */
  set resultLine(l: RawLine | undefined) { this.rb = l?.buf; this.rs = l?.start ?? 0; this.re = l?.end ?? 0; this.parsedResult = undefined; }

  get spec(): Spec {
    if (this.tb) {
      // The checksum held when it was read: this writer wrote it, shape and all. Should it not parse
      // all the same, the task keeps its id and an empty prompt rather than take the hub down.
      this.parsedSpec = readSpec({ buf: this.tb, start: this.ts, end: this.te }, this.id) ?? { id: this.id, prompt: '', priority: 0 };
      this.tb = undefined;
    }
    return this.parsedSpec!;
  }
  set spec(s: Spec) { this.parsedSpec = s; this.tb = undefined; }

  get result(): TaskResult | undefined {
    if (this.rb) {
      this.parsedResult = readResult({ buf: this.rb, start: this.rs, end: this.re }) ?? { text: '', worker: '', attempt: 0 };
      this.rb = undefined;
    }
    return this.parsedResult;
  }
  set result(r: TaskResult | undefined) { this.parsedResult = r; this.rb = undefined; }

  /** As a plain record (JSON.stringify and spreads see own fields only; spec and result are accessors). */
  toJSON(): TaskRecord {
    const { id, spec, state, attempts, worker, leaseUntil, readyAt, result, error, submittedAt, finishedAt, seq, stallLost } = this as TaskRecord;
    return { id, spec, state, attempts, worker, leaseUntil, readyAt, result, error, submittedAt, finishedAt, seq, stallLost };
  }
}

/** The spec of a task line, checked as replay checks a parsed line, or undefined. */
export function readSpec(line: RawLine, id: string): Spec | undefined {
  let v: unknown;
  try { v = JSON.parse(line.buf.toString('utf8', line.start, line.end)); } catch { return undefined; }
  if (checkShape(v)) return undefined;
  const r = v as { t: string; spec: Spec };
  if (r.t !== 'task' || r.spec.id !== id) return undefined;
  r.spec.priority ??= 0;
  return r.spec;
}

function readResult(line: RawLine): TaskResult | undefined {
  let v: unknown;
  try { v = JSON.parse(line.buf.toString('utf8', line.start, line.end)); } catch { return undefined; }
  if (checkShape(v)) return undefined;
  const r = v as { t: string; text: string; worker: string; attempt: number; receipt?: TaskResult['receipt'] };
  return r.t === 'result' ? { text: r.text, worker: r.worker, attempt: r.attempt, receipt: r.receipt } : undefined;
}
