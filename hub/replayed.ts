import { TaskState } from '../sched/index.js';
import { checkShape, RESULT_HEAD, type RawLine } from './journal-record.js';
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
  /**
   * The bytes retention counts for it once final (hub/retention-bytes.ts `taskBytes`), -1 until
   * known: from the snapshot index's entry, or counted from its lines once and kept (a count is a
   * scan of both lines, and a restart counted every hot task).
   */
  hotBytes = -1;

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
  /** `resultLine`, from its place (no object for it). */
  setResultLine(buf: Buffer, start: number, end: number): void { this.rb = buf; this.rs = start; this.re = end; this.parsedResult = undefined; }

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
      const line = { buf: this.rb, start: this.rs, end: this.re };
      this.parsedResult = resultWithLazyText(line) ?? readResult(line) ?? { text: '', worker: '', attempt: 0 };
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

const TEXT_KEY = Buffer.from('","text":"');
const WORKER_KEY = Buffer.from('","worker":');
const CHECK_FIELDS = Buffer.from(',"_n":');
/** Where a result's text still lies unparsed (non-enumerable: spreads and JSON do not see it). */
const TEXT_AT = Symbol('text at');
type LazyResult = TaskResult & { [TEXT_AT]?: RawLine };

function lazyText(this: LazyResult): string {
  const l = this[TEXT_AT]!;
  let text = '';
  try { const v: unknown = JSON.parse(l.buf.toString('utf8', l.start, l.end)); if (typeof v === 'string') text = v; } catch { /* its line's checksum held: not reached */ }
  setText.call(this, text);
  return text;
}
function setText(this: LazyResult, text: string): void {
  Object.defineProperty(this, 'text', { value: text, writable: true, enumerable: true, configurable: true });
  this[TEXT_AT] = undefined;
}

/**
 * A result line in the writer's form (`{"t":"result","id":…,"text":…,"worker":…,"attempt":…,
 * ["receipt":…,]"at":…,<check fields>}`) read for all but its text, which is parsed when first read.
 * A restarted hub compares each returning replica holder's digest with its own, which reads the worker
 * and attempt of every finished task it holds: parsed whole, every replayed result was parsed then,
 * on the hub's one thread, while the first tasks after the restart waited. The text ends at the first
 * `","worker":` after it starts: inside a JSON string every `"` is escaped, so the `"` after that
 * comma cannot be in it. Undefined when the line is not in that form (the full parse reads it).
 */
function resultWithLazyText(line: RawLine): TaskResult | undefined {
  const { buf, start, end } = line;
  let q = start + RESULT_HEAD.length;
  // The id has no `"` nor `\` (decodeLazy): it ends at the first quote.
  while (q < end && buf[q] !== 0x22) q++;
  if (q + TEXT_KEY.length > end || buf.compare(TEXT_KEY, 0, TEXT_KEY.length, q, q + TEXT_KEY.length) !== 0) return undefined;
  const textAt = q + TEXT_KEY.length - 1;
  const w = buf.indexOf(WORKER_KEY, textAt + 1);
  const check = buf.lastIndexOf(CHECK_FIELDS, end);
  if (w < 0 || check < 0 || w >= check || check >= end) return undefined;
  let v: Record<string, unknown>;
  try { v = JSON.parse(`{${buf.toString('utf8', w + 2, check)}}`) as Record<string, unknown>; } catch { return undefined; }
  const { worker, attempt, receipt } = v;
  if (typeof worker !== 'string' || typeof attempt !== 'number' || !Number.isFinite(attempt)) return undefined;
  if (receipt !== undefined && (typeof receipt !== 'object' || receipt === null || Array.isArray(receipt))) return undefined;
  // Keys in the order a full parse gives them (text, worker, attempt, receipt).
  const r = {} as LazyResult;
  Object.defineProperty(r, 'text', { get: lazyText, set: setText, enumerable: true, configurable: true });
  Object.defineProperty(r, TEXT_AT, { value: { buf, start: textAt, end: w + 1 }, writable: true, enumerable: false, configurable: true });
  r.worker = worker;
  r.attempt = attempt;
  r.receipt = receipt as TaskResult['receipt'];
  return r;
}
