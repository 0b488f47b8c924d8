import { Type, type ErrorCode, type Message } from '../protocol/index.js';
import { isRetryable } from '../sched/index.js';
import type { ResultsDeps } from './context.js';
import type { WorkerEntry } from './registry.js';

/** A worker whose engine failed to start gets no task for this long. */
const ENGINE_COOLDOWN_MS = 5000;
/** Bound on one task's streamed answer held by the hub. */
const MAX_ANSWER = 16 * 1024 * 1024;

/**
 * What workers say about their tasks: streamed and final TASK_RES (assembled, then recorded once by
 * the store), task ERRORs (retried or failed by sched's rules), and frames that failed validation but
 * still end an attempt.
 */
export class Results {
  constructor(private readonly hub: ResultsDeps) {}

  onResult(w: WorkerEntry, msg: Message<'TASK_RES'>): void {
    const { text, done, receipt, seq } = msg.payload;
    // The spec's TASK_RES carries no task_id: its `re` names the TASK_REQ it answers.
    const taskId = msg.payload.task_id ?? w.leaseByReq(msg.re) ?? w.soleLease(msg.re);
    if (taskId === undefined) {
      w.conn.sendError('SWARM_ERR_UNKNOWN_TASK', 'TASK_RES names no task this worker holds: give task_id, or re = the id of its TASK_REQ', { re: msg.id });
      return;
    }
    const lease = w.inflight.get(taskId);
    if (done && !lease && !this.lateResult(w, taskId, msg.id)) return;
    if (!done) {
      if (!lease) return;
      lease.answer.add(text, seq);
      if (lease.answer.bytes > MAX_ANSWER) {
        this.onTaskError(w, taskId, 'SWARM_ERR_TASK_FAILED', `answer passed ${MAX_ANSWER} characters`, false);
      }
      return;
    }
    let full = text;
    if (lease) {
      const whole = lease.answer.finish(text, seq);
      if (!whole.ok) {
        // Pieces are missing: this attempt's answer cannot be trusted; run the task again.
        w.conn.sendError('SWARM_ERR_STREAM_GAP', whole.why, { re: msg.id, task_id: taskId });
        this.onTaskError(w, taskId, 'SWARM_ERR_STREAM_GAP', whole.why);
        return;
      }
      full = whole.text;
      // Its run time first: it decides how many leases the freed worker may hold (its queue or not).
      w.ran(receipt?.duration_ms ?? performance.now() - lease.leasedAt);
      this.freeSlot(w, taskId);
    }
    const store = this.hub.store;
    const rec = store.queue.get(taskId);
    if (!rec) {
      // Finished and archived already (the retention horizon): a late echo, quietly a duplicate.
      if (store.knows(taskId)) { this.hub.metrics.duplicateResults++; return; }
      w.conn.sendError('SWARM_ERR_UNKNOWN_TASK', `unknown task ${taskId}`, { re: msg.id, task_id: taskId });
      return;
    }
    if (!lease && (seq ?? 0) > 0) {
      // A late final frame (its lease expired or was released): the pieces before it are gone.
      this.hub.log.warn({ worker: w.id, task: taskId, seq }, 'final frame of a streamed answer without its lease dropped');
      return;
    }
    w.done++;
    if (receipt) this.hub.metrics.receipt(receipt);
    void store.complete(taskId, { text: full, receipt, worker: w.id, attempt: receipt?.attempt ?? rec.attempts })
      .then((outcome) => { if (outcome === 'duplicate') this.hub.metrics.duplicateResults++; })
      // Not recorded: the store put the task back to run again once the journal can write.
      .catch((err) => this.hub.log.error({ err, task: taskId }, 'journal write failed; result not recorded'));
  }

  /** A task ERROR from a worker: the task is named by task_id, or else by `re` naming its TASK_REQ. */
  onError(w: WorkerEntry, msg: Message<'ERROR'>): void {
    const taskId = msg.payload.task_id ?? w.leaseByReq(msg.re) ?? (msg.payload.code === 'SWARM_ERR_TASK_FAILED' ? w.soleLease(msg.re) : undefined);
    // A permanent engine failure (its model does not load) fails the task now: every worker loads the same model.
    if (taskId) this.onTaskError(w, taskId, msg.payload.code, msg.payload.msg, msg.payload.permanent ? false : undefined);
    else this.hub.log.warn({ worker: w.id, code: msg.payload.code, msg: msg.payload.msg }, 'worker reported error');
  }

  /**
   * A TASK_RES or ERROR that failed validation (it was answered with its code) still ends the
   * attempt it is about, when that can be told from `payload.task_id` or the envelope `re`:
   * otherwise the task would sit leased until its lease expires.
   */
  onBadFrame(w: WorkerEntry, frame: unknown, why: string): void {
    if (this.hub.registry.get(w.id) !== w || !frame || typeof frame !== 'object') return;
    const f = frame as Record<string, unknown>;
    if (f.type !== Type.ERROR && f.type !== Type.TASK_RES) return;
    const p = f.payload && typeof f.payload === 'object' ? f.payload as Record<string, unknown> : {};
    const taskId = typeof p.task_id === 'string' && w.inflight.has(p.task_id) ? p.task_id : w.leaseByReq(f.re);
    if (taskId === undefined) return;
    this.onTaskError(w, taskId, 'SWARM_ERR_TASK_FAILED', `worker sent an invalid ${f.type}: ${why}`.slice(0, 4000));
  }

  /**
   * A final TASK_RES from a worker without the task's lease is recorded by no one: only the worker
   * holding the lease may answer (another worker's "result" would otherwise be kept and the real
   * one dropped as a duplicate). False when it is refused; true for a task already final (counted
   * as a duplicate below) so late echoes of finished work stay quiet. A worker whose lease was lost
   * because the hub stalled did run the task: its result is recorded.
   */
  private lateResult(w: WorkerEntry, taskId: string, re: string): boolean {
    const rec = this.hub.store.queue.get(taskId);
    if (!rec || rec.state === 'done' || rec.state === 'failed') return true;
    if (rec.stallLost?.includes(w.id)) return true;
    this.hub.log.warn({ worker: w.id, task: taskId, holder: rec.state === 'leased' ? rec.worker : undefined }, 'final TASK_RES from a worker that does not hold the lease refused');
    w.conn.sendError('SWARM_ERR_UNKNOWN_TASK', `task ${taskId} is not leased to ${w.id}; its result is not recorded`, { re, task_id: taskId });
    return false;
  }

  private onTaskError(w: WorkerEntry, taskId: string, code: ErrorCode, text: string, retryable = isRetryable(code)): void {
    if (!w.inflight.has(taskId)) return;
    const store = this.hub.store;
    this.freeSlot(w, taskId);
    if (code === 'SWARM_ERR_SLOTS_FULL') { w.refusedQueued(); this.hub.metrics.queuedGivenBack++; store.unlease(taskId, w.id); return; }
    if (code === 'SWARM_ERR_SHUTDOWN') {
      // The worker is stopping (SIGTERM: `podman stop`, a rolling restart) and gave the task back: not
      // the task's fault, so it goes back at once without using an attempt, and the worker gets no more.
      this.hub.dispatcher.withdraw(w);
      store.unlease(taskId, w.id);
      this.hub.log.info({ worker: w.id, task: taskId }, 'task given back by a stopping worker; requeued without using an attempt');
      return;
    }
    if (code === 'SWARM_ERR_ENGINE_START' && retryable) {
      // Not the task's fault: it goes back without using an attempt, and this worker gets no task
      // for a while (its engine retries) so the task finds another worker meanwhile.
      store.unlease(taskId, w.id);
      this.hub.dispatcher.withdraw(w);
      setTimeout(() => { if (this.hub.registry.get(w.id) === w) this.hub.dispatcher.offer(w); }, ENGINE_COOLDOWN_MS).unref();
      this.hub.log.warn({ worker: w.id, task: taskId, msg: text }, 'worker engine failed to start; task requeued without using an attempt');
      return;
    }
    this.hub.log.warn({ worker: w.id, task: taskId, code, msg: text }, 'task failed on worker');
    // A retry wakes the dispatcher through the store's `requeued` event (at its backoff's end).
    void store.fail(taskId, w.id, { code, msg: text }, retryable)
      .catch((err) => this.hub.log.error({ err, task: taskId }, 'journal write failed'));
  }

  private freeSlot(w: WorkerEntry, taskId: string): void {
    w.release(taskId);
    this.hub.dispatcher.offer(w);
  }
}
