import { Histogram } from './histogram.js';
import type { StoreEvent } from './store-events.js';
import type { Receipt } from '../protocol/index.js';

const MS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000];

/** Counters and histograms the hub exposes on /metrics. */
export class HubMetrics {
  submitted = 0;
  completed = 0;
  failed = 0;
  duplicateResults = 0;
  /** Tasks leased into a worker's queue while its slots ran (lease-ahead, prefetch), and those given back unstarted. */
  leasedQueued = 0;
  queuedGivenBack = 0;
  tokensIn = 0;
  tokensOut = 0;
  readonly protocolErrors = new Map<string, number>();
  /** Connections closed at accept because their port's cap (hub/conn-caps.ts) was reached. */
  readonly connectionsRefused = { worker: 0, control: 0 };
  readonly dispatchLatency = new Histogram(MS);
  readonly taskDuration = new Histogram(MS);
  readonly ttft = new Histogram(MS);

  dispatched(ms: number): void { this.dispatchLatency.observe(ms); }

  receipt(r: Receipt): void {
    this.tokensIn += r.tokens_in ?? 0;
    this.tokensOut += r.tokens_out ?? 0;
    this.taskDuration.observe(r.duration_ms);
    if (r.ttft_ms !== undefined) this.ttft.observe(r.ttft_ms);
  }

  /** The store's events: tasks accepted and finished are counted as they happen. */
  readonly onStoreEvent = (e: StoreEvent): void => {
    if (e.type === 'accepted') this.submitted++;
    else if (e.type === 'done') this.completed++;
    else if (e.type === 'failed') this.failed++;
  };

  /** Prometheus text exposition. */
  render(workers: Record<string, number>, tasks: Record<string, number>): string {
    const out: string[] = [];
    out.push('# HELP swarm_workers Connected workers by state.', '# TYPE swarm_workers gauge');
    for (const [k, v] of Object.entries(workers)) out.push(`swarm_workers{state="${k}"} ${v}`);
    out.push('# HELP swarm_tasks Tasks by state.', '# TYPE swarm_tasks gauge');
    for (const [k, v] of Object.entries(tasks)) out.push(`swarm_tasks{state="${k}"} ${v}`);
    const counter = (name: string, help: string, v: number) => out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`, `${name} ${v}`);
    counter('swarm_tasks_submitted_total', 'Tasks accepted (not counting idempotent duplicates).', this.submitted);
    counter('swarm_tasks_completed_total', 'Tasks whose result was recorded.', this.completed);
    counter('swarm_tasks_failed_total', 'Tasks that failed on every allowed attempt.', this.failed);
    counter('swarm_results_duplicate_total', 'Results dropped because the task already had one.', this.duplicateResults);
    counter('swarm_leases_queued_total', 'Tasks leased into a worker\'s queue while its slots ran (prefetch of short tasks, lease-ahead).', this.leasedQueued);
    counter('swarm_leases_queued_given_back_total', 'Of those, tasks the worker gave back unstarted (SLOTS_FULL: its hold ran out behind a longer task).', this.queuedGivenBack);
    counter('swarm_tokens_in_total', 'Prompt tokens reported by workers.', this.tokensIn);
    counter('swarm_tokens_out_total', 'Generated tokens reported by workers.', this.tokensOut);
    out.push('# HELP swarm_protocol_errors_total Bad frames received, by code.', '# TYPE swarm_protocol_errors_total counter');
    for (const [k, v] of this.protocolErrors) out.push(`swarm_protocol_errors_total{code="${k}"} ${v}`);
    out.push('# HELP swarm_connections_refused_total Connections closed at accept: their port had its cap open already.', '# TYPE swarm_connections_refused_total counter');
    for (const [k, v] of Object.entries(this.connectionsRefused)) out.push(`swarm_connections_refused_total{port="${k}"} ${v}`);
    out.push(this.dispatchLatency.render('swarm_dispatch_latency_ms', 'From a task and a free slot both being ready to its TASK_REQ being sent.'));
    out.push(this.taskDuration.render('swarm_task_duration_ms', 'Task duration as reported in receipts.'));
    out.push(this.ttft.render('swarm_time_to_first_token_ms', 'Time to first token as reported in receipts.'));
    return out.join('\n') + '\n';
  }
}
