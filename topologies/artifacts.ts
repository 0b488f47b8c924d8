import fs from 'node:fs';
import path from 'node:path';
import type { Passport } from './passport.js';
import { renderHtml, renderMarkdown, summarize, type NodeRecord, type RunReport } from './report.js';
import type { RunOutcome, RunSink, TaskRequest } from './runner.js';
import { parseJsonObject } from './structured.js';
import { experimentMarkdown, writeExperimentReport } from './experiment/report.js';
import type { ExperimentResult } from './experiment/finalize.js';
import { DETAIL_NODES, clipDetail } from './report-nodes.js';
import type { NodeResult, NodeTask, RunSpec } from './types.js';

const WRITE_CONCURRENCY = 16;

/** A node id as a folder name (`map/17` -> `map.17`). */
export const nodeDir = (node: string): string => node.replaceAll('/', '.');

/**
 * The run folder (`runs/<runId>/`): passport.json, spec.json, events.jsonl, nodes.jsonl (one line
 * per finished node: its input, rendered prompt, output and metrics), the same as files in
 * `nodes/<node>/{input.json,prompt.txt,output.txt,metrics.json}` for the first
 * `artifacts.node_folders` nodes, and at the end result.json, report.md and report.html.
 * Writes are asynchronous with bounded concurrency; `close()` waits for them.
 */
export class RunFolder implements RunSink {
  readonly nodes = new Map<string, NodeRecord>();
  private readonly events: fs.WriteStream;
  private readonly nodeLines: fs.WriteStream;
  /** Nodes that have a folder, and what they asked (kept until their line in nodes.jsonl is written). */
  private readonly folders = new Set<string>();
  private readonly recorded = new Set<string>();
  private readonly asked = new Map<string, { vars: unknown; prompt: string; request: unknown }>();
  /** Writes waiting, and how many run now: bounded concurrency, since a serial chain is latency-bound. */
  private readonly queue: (() => Promise<void>)[] = [];
  private inflight = 0;
  private idle: (() => void)[] = [];
  private wave = 0;
  private lastSubmitAt = -1;
  private closed?: Promise<void>;
  outcome?: RunOutcome;

  private constructor(readonly dir: string, readonly spec: RunSpec, readonly passport: Passport, private readonly startedAt: number) {
    this.events = fs.createWriteStream(path.join(dir, 'events.jsonl'), { flags: 'a' });
    this.events.on('error', () => { /* a full disk must not crash the hub; the report will be short */ });
    this.nodeLines = fs.createWriteStream(path.join(dir, 'nodes.jsonl'), { flags: 'a' });
    this.nodeLines.on('error', () => {});
  }

  /** Create the folder of a new run, or reopen it to resume. */
  static async open(dir: string, spec: RunSpec, passport: Passport, resumed = false): Promise<RunFolder> {
    await fs.promises.mkdir(path.join(dir, 'nodes'), { recursive: true });
    // A resumed run may land on another host (failover): write what is missing.
    const missing = async (f: string) => !resumed || !(await fs.promises.stat(path.join(dir, f)).catch(() => undefined));
    if (await missing('passport.json')) await fs.promises.writeFile(path.join(dir, 'passport.json'), JSON.stringify(passport, null, 2));
    if (await missing('spec.json')) await fs.promises.writeFile(path.join(dir, 'spec.json'), JSON.stringify(spec));
    const f = new RunFolder(dir, spec, passport, Date.now());
    if (resumed) {
      // Nodes recorded before a restart come back with their results; do not record them twice.
      const text = await fs.promises.readFile(path.join(dir, 'nodes.jsonl'), 'utf8').catch(() => '');
      for (const line of text.split('\n')) {
        try { f.recorded.add((JSON.parse(line) as { node: string }).node); } catch { /* a torn last line */ }
      }
    }
    f.event({ type: resumed ? 'run_resumed' : 'run_started', run: passport.run, topology: spec.experiment.topology });
    return f;
  }

  event(e: Record<string, unknown>): void {
    this.events.write(`${JSON.stringify({ t: Date.now(), ...e })}\n`);
  }

  submitted(task: NodeTask, req: TaskRequest, at: number): void {
    if (at !== this.lastSubmitAt) { this.wave++; this.lastSubmitAt = at; }
    const detail = this.nodes.size < DETAIL_NODES ? { prompt: clipDetail(task.prompt) } : {};
    this.nodes.set(task.node, { node: task.node, role: task.role, after: task.after ?? [], wave: this.wave, submitted_at: at, state: 'running', ...detail });
    this.event({ type: 'node_submitted', node: task.node, role: task.role, task: req.id });
    const d = path.join(this.dir, 'nodes', nodeDir(task.node));
    // The run's whole input is in spec.json; repeating it per node would make the folder O(nodes × input).
    const vars = task.input.input === this.spec.inputs.text ? { ...task.input, input: '(the run input: spec.json inputs.text)' } : task.input;
    const request = { ...req, prompt: undefined };
    this.asked.set(task.node, { vars, prompt: task.prompt, request });
    if (this.folders.size >= this.spec.experiment.artifacts.node_folders) return;
    this.folders.add(task.node);
    const input = JSON.stringify({ node: task.node, role: task.role, after: task.after ?? [], vars, request }, null, 2);
    this.write(async () => {
      await fs.promises.mkdir(d, { recursive: true });
      await Promise.all([fs.promises.writeFile(path.join(d, 'input.json'), input), fs.promises.writeFile(path.join(d, 'prompt.txt'), task.prompt)]);
    });
  }

  finished(node: string, r: NodeResult, at: number): void {
    const rec = this.nodes.get(node) ?? { node, role: '?', after: [], wave: this.wave, submitted_at: at, state: 'running' as const };
    const rc = r.receipt ?? {};
    Object.assign(rec, {
      state: r.ok ? 'done' : 'failed', finished_at: at, worker: r.worker ?? rc.worker, error: r.error,
      tokens_in: rc.tokens_in, tokens_out: rc.tokens_out, duration_ms: rc.duration_ms, ttft_ms: rc.ttft_ms, tokens_per_s: rc.tokens_per_s,
      // A structured role whose answer does not parse gets `no answer` (what its topology records as garbage).
      ...(rec.prompt !== undefined ? { output: clipDetail(r.text) } : {}),
      verdict: r.ok ? answerOf(r.text) ?? ((this.asked.get(node)?.request as { json_schema?: unknown } | undefined)?.json_schema ? 'no answer' : undefined) : undefined,
    });
    this.nodes.set(node, rec);
    this.event({ type: r.ok ? 'node_done' : 'node_failed', node, worker: rec.worker, error: r.error, tokens_out: rc.tokens_out, duration_ms: rc.duration_ms });
    const d = path.join(this.dir, 'nodes', nodeDir(node));
    const metrics = { node, state: rec.state, worker: rec.worker, submitted_at: rec.submitted_at, finished_at: at, wall_ms: at - rec.submitted_at, receipt: r.receipt ?? null, error: r.error ?? null };
    const asked = this.asked.get(node);
    this.asked.delete(node);
    if (!this.recorded.has(node)) this.nodeLines.write(`${JSON.stringify({ node, role: rec.role, after: rec.after, input: asked?.vars, prompt: asked?.prompt, request: asked?.request, output: r.text, metrics })}\n`);
    if (!this.folders.has(node)) return;
    this.write(async () => {
      await fs.promises.mkdir(d, { recursive: true });
      await Promise.all([fs.promises.writeFile(path.join(d, 'output.txt'), r.text), fs.promises.writeFile(path.join(d, 'metrics.json'), JSON.stringify(metrics, null, 2))]);
    });
  }

  done(outcome: RunOutcome): void {
    this.outcome = outcome;
    // A cancelled run's unfinished nodes are cancelled, not running: their tasks fail with SWARM_ERR_CANCELLED.
    if (outcome.verdict === 'cancelled') {
      for (const n of this.nodes.values()) if (n.state === 'running') Object.assign(n, { state: 'cancelled', error: { code: 'SWARM_ERR_CANCELLED', msg: outcome.reason ?? 'run cancelled' } });
    }
    this.event({ type: 'run_done', verdict: outcome.verdict, reason: outcome.reason });
    const report = this.report();
    // After every node's files: the report is the last word on the run.
    const experiment = outcome.details?.experiment as ExperimentResult | undefined;
    void this.drained().then(async () => {
      // nodes.jsonl must be on disk before the experiment page reads the answering nodes' prompts from it.
      if (experiment) await new Promise<void>((r) => this.nodeLines.write('', () => r()));
      await fs.promises.writeFile(path.join(this.dir, 'report.md'), renderMarkdown(report) + (experiment ? experimentMarkdown(experiment, this.passport) : ''));
      if (experiment) await writeExperimentReport(this.dir, experiment, this.passport);
      await fs.promises.writeFile(path.join(this.dir, 'report.html'), renderHtml(report));
      // result.json last: its presence marks the run finished (a restarted hub resumes the others).
      await fs.promises.writeFile(path.join(this.dir, 'result.json'), JSON.stringify({ ...outcome, metrics: report.metrics }, null, 2));
    }).catch(() => { /* best effort: a run is not failed by its report */ }).finally(() => { this.reported = true; this.wake(); });
  }
  private reported = false;

  report(): RunReport {
    const nodes = [...this.nodes.values()];
    return { passport: this.passport, outcome: this.outcome, nodes, metrics: summarize(nodes, this.startedAt, this.outcome) };
  }

  /** Wait for every pending write and close events.jsonl. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      await this.drained();
      while (this.outcome && !this.reported) await new Promise<void>((r) => this.idle.push(r));
      await Promise.all([new Promise<void>((r) => this.events.end(() => r())), new Promise<void>((r) => this.nodeLines.end(() => r()))]);
    })();
    return this.closed;
  }

  private write(fn: () => Promise<void>): void {
    this.queue.push(fn);
    this.pump();
  }

  private pump(): void {
    while (this.inflight < WRITE_CONCURRENCY && this.queue.length) {
      const fn = this.queue.shift()!;
      this.inflight++;
      fn().catch(() => { /* best effort: a run is not failed by its artifacts */ }).finally(() => { this.inflight--; this.pump(); this.wake(); });
    }
  }

  private wake(): void {
    const waiting = this.idle;
    this.idle = [];
    for (const r of waiting) r();
  }

  /** Resolves once no write is queued or running. */
  private async drained(): Promise<void> {
    while (this.inflight > 0 || this.queue.length > 0) await new Promise<void>((r) => this.idle.push(r));
  }
}

/** The decision in a structured answer (`{"verdict": …}`, `{"action": …}`, `{"winner": …}`, `{"scores": […]}`), if any. */
export function answerOf(text: string): string | undefined {
  if (!text.trimStart().startsWith('{')) return undefined;
  const o = parseJsonObject(text);
  if (!o) return undefined;
  for (const k of ['verdict', 'action', 'winner'] as const) if (typeof o[k] === 'string' && o[k]) return (o[k] as string).slice(0, 24);
  if (Array.isArray(o.scores)) return `scores ${o.scores.slice(0, 8).join(',')}`;
  return undefined;
}
