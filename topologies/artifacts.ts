import fs from 'node:fs';
import path from 'node:path';
import type { Passport } from './passport.js';
import { renderHtml, renderMarkdown, summarize, type NodeRecord, type RunReport } from './report.js';
import type { RunOutcome, RunSink, TaskRequest } from './runner.js';
import type { NodeResult, NodeTask, RunSpec } from './types.js';

/** A node id as a folder name (`map/17` -> `map.17`). */
export const nodeDir = (node: string): string => node.replaceAll('/', '.');

/**
 * The run folder (`runs/<runId>/`): passport.json, spec.json, events.jsonl, per node
 * `nodes/<node>/{input.json,prompt.txt,output.txt,metrics.json}`, and at the end result.json,
 * report.md and report.html. Writes are asynchronous and ordered; `close()` waits for them.
 */
export class RunFolder implements RunSink {
  readonly nodes = new Map<string, NodeRecord>();
  private readonly events: fs.WriteStream;
  private chain: Promise<unknown> = Promise.resolve();
  private wave = 0;
  private lastSubmitAt = -1;
  private closed?: Promise<void>;
  outcome?: RunOutcome;

  private constructor(readonly dir: string, readonly spec: RunSpec, readonly passport: Passport, private readonly startedAt: number) {
    this.events = fs.createWriteStream(path.join(dir, 'events.jsonl'), { flags: 'a' });
    this.events.on('error', () => { /* a full disk must not crash the hub; the report will be short */ });
  }

  /** Create the folder of a new run, or reopen it to resume. */
  static async open(dir: string, spec: RunSpec, passport: Passport, resumed = false): Promise<RunFolder> {
    await fs.promises.mkdir(path.join(dir, 'nodes'), { recursive: true });
    // A resumed run may land on another host (failover): write what is missing.
    const missing = async (f: string) => !resumed || !(await fs.promises.stat(path.join(dir, f)).catch(() => undefined));
    if (await missing('passport.json')) await fs.promises.writeFile(path.join(dir, 'passport.json'), JSON.stringify(passport, null, 2));
    if (await missing('spec.json')) await fs.promises.writeFile(path.join(dir, 'spec.json'), JSON.stringify(spec));
    const f = new RunFolder(dir, spec, passport, Date.now());
    f.event({ type: resumed ? 'run_resumed' : 'run_started', run: passport.run, topology: spec.experiment.topology });
    return f;
  }

  event(e: Record<string, unknown>): void {
    this.events.write(`${JSON.stringify({ t: Date.now(), ...e })}\n`);
  }

  submitted(task: NodeTask, req: TaskRequest, at: number): void {
    if (at !== this.lastSubmitAt) { this.wave++; this.lastSubmitAt = at; }
    this.nodes.set(task.node, { node: task.node, role: task.role, after: task.after ?? [], wave: this.wave, submitted_at: at, state: 'running' });
    this.event({ type: 'node_submitted', node: task.node, role: task.role, task: req.id });
    const d = path.join(this.dir, 'nodes', nodeDir(task.node));
    this.write(async () => {
      await fs.promises.mkdir(d, { recursive: true });
      await fs.promises.writeFile(path.join(d, 'input.json'), JSON.stringify({ node: task.node, role: task.role, after: task.after ?? [], vars: task.input, request: { ...req, prompt: undefined } }, null, 2));
      await fs.promises.writeFile(path.join(d, 'prompt.txt'), task.prompt);
    });
  }

  finished(node: string, r: NodeResult, at: number): void {
    const rec = this.nodes.get(node) ?? { node, role: '?', after: [], wave: this.wave, submitted_at: at, state: 'running' as const };
    const rc = r.receipt ?? {};
    Object.assign(rec, {
      state: r.ok ? 'done' : 'failed', finished_at: at, worker: r.worker ?? rc.worker, error: r.error,
      tokens_in: rc.tokens_in, tokens_out: rc.tokens_out, duration_ms: rc.duration_ms, ttft_ms: rc.ttft_ms, tokens_per_s: rc.tokens_per_s,
    });
    this.nodes.set(node, rec);
    this.event({ type: r.ok ? 'node_done' : 'node_failed', node, worker: rec.worker, error: r.error, tokens_out: rc.tokens_out, duration_ms: rc.duration_ms });
    const d = path.join(this.dir, 'nodes', nodeDir(node));
    const metrics = { node, state: rec.state, worker: rec.worker, submitted_at: rec.submitted_at, finished_at: at, wall_ms: at - rec.submitted_at, receipt: r.receipt ?? null, error: r.error ?? null };
    this.write(async () => {
      await fs.promises.mkdir(d, { recursive: true });
      await fs.promises.writeFile(path.join(d, 'output.txt'), r.text);
      await fs.promises.writeFile(path.join(d, 'metrics.json'), JSON.stringify(metrics, null, 2));
    });
  }

  done(outcome: RunOutcome): void {
    this.outcome = outcome;
    this.event({ type: 'run_done', verdict: outcome.verdict, reason: outcome.reason });
    const report = this.report();
    this.write(async () => {
      await fs.promises.writeFile(path.join(this.dir, 'report.md'), renderMarkdown(report));
      await fs.promises.writeFile(path.join(this.dir, 'report.html'), renderHtml(report));
      // result.json last: its presence marks the run finished (a restarted hub resumes the others).
      await fs.promises.writeFile(path.join(this.dir, 'result.json'), JSON.stringify({ ...outcome, metrics: report.metrics }, null, 2));
    });
  }

  report(): RunReport {
    const nodes = [...this.nodes.values()];
    return { passport: this.passport, outcome: this.outcome, nodes, metrics: summarize(nodes, this.startedAt, this.outcome) };
  }

  /** Wait for every pending write and close events.jsonl. */
  close(): Promise<void> {
    this.closed ??= this.chain.then(() => new Promise<void>((r) => this.events.end(() => r())));
    return this.closed;
  }

  private write(fn: () => Promise<void>): void {
    this.chain = this.chain.then(fn).catch(() => { /* best effort: a run is not failed by its report */ });
  }
}
