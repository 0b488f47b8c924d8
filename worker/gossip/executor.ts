import { WORKER_DEFAULTS } from '../config.js';
import type { Logger } from 'pino';
import type { Receipt } from '../../protocol/index.js';
import type { Membership } from './membership.js';
import type { Entry, Replica, ReplicaSpec } from './replica.js';
import { recordFailure } from './handback.js';
import { ACK_CH, ASSIGN_CH, NACK_CH, type Assign, type AssignReply, type Coordinator } from './coordinator.js';

/** What running one task produced. An error is retried elsewhere unless `final`. */
export type ExecOutcome = { text: string; receipt?: Receipt } | { error: { code: string; msg: string }; final?: boolean };

/** Runs one task (the worker's driver); must settle, never hang past the task's timeout. */
export type Execute = (spec: ReplicaSpec, attempt: number) => Promise<ExecOutcome>;


export interface ExecutorOptions { slots?: number; log?: Logger }

/**
 * The member side of gossip mode: accepts assignments from the current coordinator term (older
 * epochs are fenced off), runs them up to `slots` at a time, and records outcomes in the replica,
 * from where gossip spreads them. A result is recorded locally before anyone is told, so a member
 * that dies after finishing loses nothing that a peer has already pulled.
 */
export class Executor {
  private readonly running = new Set<string>();
  private readonly recorded: ((id: string, e: Entry) => void)[] = [];
  readonly stats = { ran: 0, fenced: 0, refused: 0 };

  constructor(
    private readonly ms: Membership,
    private readonly replica: Replica,
    private readonly coord: Coordinator,
    private readonly execute: Execute,
    private readonly opts: ExecutorOptions = {},
  ) {
    ms.onApp(ASSIGN_CH, (from, body) => this.onAssign(from, body as Assign));
  }

  /**
   * Called when an outcome this member produced for an assignment won in the replica. Not called for
   * entries merged from elsewhere (the hub, peers), so a listener sees each of its own results once.
   */
  onRecorded(fn: (id: string, e: Entry) => void): void { this.recorded.push(fn); }

  /** Task ids running here now. */
  get active(): string[] { return [...this.running]; }

  /** Mark a task as running here (one the hub assigned in star mode), so it is not started twice. */
  adopt(id: string): void { this.running.add(id); }
  release(id: string): void { this.running.delete(id); }

  /**
   * Every assignment is answered, so the coordinator never waits out a lease for nothing: an ack if
   * it runs here (now, or already under the hub or an earlier term) or is final (the entry goes back
   * with it); a nack if busy, or if fenced, with the fence, so the coordinator claims a newer term.
   */
  private onAssign(from: string, a: Assign): void {
    if (!a || typeof a.id !== 'string' || typeof a.epoch !== 'number' || typeof a.attempt !== 'number' || !a.spec) return;
    const reply = (ch: string, r: AssignReply) => this.ms.sendApp(from, ch, r);
    if (a.epoch < this.coord.fence) {
      this.stats.fenced++;
      reply(NACK_CH, { id: a.id, attempt: a.attempt, fence: this.coord.fence });
      return;
    }
    this.coord.observeEpoch(a.epoch);
    const st = this.replica.state(a.id);
    if (st === 'done' || st === 'failed') {
      reply(ACK_CH, { id: a.id, attempt: a.attempt });
      const e = this.replica.get(a.id)!;
      this.ms.sendApp(from, 'rs', { op: 'en', e: [{ ...e, spec: undefined }] });
      return;
    }
    if (this.running.has(a.id)) { reply(ACK_CH, { id: a.id, attempt: a.attempt }); return; }
    if (this.running.size >= (this.opts.slots ?? WORKER_DEFAULTS.agent.slots)) {
      this.stats.refused++;
      reply(NACK_CH, { id: a.id, attempt: a.attempt });
      return;
    }
    this.running.add(a.id);
    this.stats.ran++;
    reply(ACK_CH, { id: a.id, attempt: a.attempt });
    void this.run(from, a);
  }

  private async run(from: string, a: Assign): Promise<void> {
    let out: ExecOutcome;
    try { out = await this.execute(a.spec, a.attempt); }
    catch (err) { out = { error: { code: 'SWARM_ERR_TASK_FAILED', msg: (err as Error)?.message ?? String(err) } }; }
    this.running.delete(a.id);
    let won: Entry | undefined;
    if ('text' in out) {
      won = this.replica.record(a.id, { worker: this.ms.id, attempt: a.attempt, text: out.text, receipt: out.receipt });
    } else if (out.final) {
      won = recordFailure(this.replica, a.id, { worker: this.ms.id, attempt: a.attempt, error: out.error }) ? this.replica.get(a.id) : undefined;
    } else {
      this.ms.sendApp(from, NACK_CH, { id: a.id, attempt: a.attempt, ran: true, error: { code: out.error.code, msg: out.error.msg.slice(0, 4000) } } satisfies AssignReply);
    }
    const e = this.replica.get(a.id);
    if (won && e) for (const fn of this.recorded) fn(a.id, e);
    // Tell the coordinator directly too: faster than waiting for gossip to reach it.
    const leader = this.coord.leader;
    if (e && leader && leader !== this.ms.id) this.ms.sendApp(leader, 'rs', { op: 'en', e: [{ ...e, spec: undefined }] });
  }
}
