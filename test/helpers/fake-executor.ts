import type { Executor, NodeResult, SubmitOutcome, TaskRequest } from '../../topologies/index.js';

/**
 * An in-memory executor for pure runner tests only (end-to-end tests go through a real hub):
 * answers each task with `answer(req)` on a later tick, idempotent by task id like the hub.
 */
export class FakeExecutor implements Executor {
  readonly requests = new Map<string, TaskRequest>();
  readonly results = new Map<string, NodeResult>();
  submits = 0;
  private readonly subs = new Set<(id: string, r: NodeResult) => void>();
  constructor(private readonly answer: (req: TaskRequest) => string | NodeResult) {}

  async submit(tasks: TaskRequest[]): Promise<SubmitOutcome[]> {
    this.submits++;
    return tasks.map((t) => {
      const done = this.results.get(t.id);
      if (done) return { id: t.id, result: done };
      if (!this.requests.has(t.id)) {
        this.requests.set(t.id, t);
        setImmediate(() => {
          const a = this.answer(t);
          const r: NodeResult = typeof a === 'string' ? { ok: true, text: a, receipt: { tokens_out: a.split(/\s+/).length, duration_ms: 1 } } : a;
          this.results.set(t.id, r);
          for (const cb of this.subs) cb(t.id, r);
        });
      }
      return { id: t.id };
    });
  }

  onFinal(cb: (id: string, r: NodeResult) => void): () => void {
    this.subs.add(cb);
    return () => this.subs.delete(cb);
  }
}
