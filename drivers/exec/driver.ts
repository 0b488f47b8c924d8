import { SwarmError } from '../../protocol/index.js';
import { killGroup } from '../lifecycle.js';
import { describeEnd, startCommand } from '../run-command.js';
import { StopFilter } from '../stop-filter.js';
import { driverOptions } from '../options.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';

/** Settings of the exec driver (`--driver-opt cmd='…'`). */
export interface ExecOptions { cmd: string; killGraceMs: number; maxOutput: number }

export function parseExecOptions(raw: Record<string, string>): ExecOptions {
  const o = driverOptions<'exec'>('exec', raw);
  if (!o.cmd) throw new SwarmError('SWARM_ERR_CONFIG', 'the exec driver needs --driver-opt cmd=\'COMMAND\' (run with /bin/sh; the prompt is on stdin and in $SWARM_PROMPT)');
  return { cmd: o.cmd, killGraceMs: o.kill_grace_ms, maxOutput: o.max_output };
}

/**
 * One command per task (spec 7.1, one-shot engines): the prompt goes to stdin and $SWARM_PROMPT,
 * stdout is the answer (streamed), the exit code is the sentinel (0 = done, else the task failed).
 * The command runs in its own process group; cancelling kills the whole group.
 */
export class ExecDriver implements Driver {
  readonly name = 'exec';
  readonly options: ExecOptions;
  private readonly running = new Set<number>();
  constructor(config: DriverConfig) { this.options = parseExecOptions(config.options); }

  async start(): Promise<void> {}
  async stop(): Promise<void> { for (const pid of this.running) killGroup(pid, 'SIGKILL'); }
  pids(): number[] { return [...this.running]; }

  async *chat(prompt: string, opts: ChatOptions = {}): AsyncGenerator<string, ChatStats | void, void> {
    const o = this.options;
    const cmd = startCommand('/bin/sh', ['-c', o.cmd], {
      input: prompt, killGraceMs: o.killGraceMs, maxBuffer: o.maxOutput, stream: true, signal: opts.signal,
      env: { ...process.env, SWARM_PROMPT: prompt, SWARM_MAX_TOKENS: opts.maxTokens === undefined ? '' : String(opts.maxTokens) },
    });
    const pid = cmd.pid;
    if (pid !== undefined) this.running.add(pid);
    const filter = new StopFilter(opts.stop ?? []);
    let size = 0;
    let stopped = false;
    try {
      for await (const chunk of cmd.stdout ?? []) {
        const text = String(chunk);
        size += text.length;
        if (size > o.maxOutput) throw new SwarmError('SWARM_ERR_TASK_FAILED', `exec output passed ${o.maxOutput} bytes`);
        const out = filter.push(text);
        if (out) yield out;
        if (filter.stopped) { stopped = true; break; }
      }
      if (stopped) { cmd.kill('SIGTERM'); return {}; }
      const r = await cmd.result;
      if (opts.signal?.aborted) return {};
      if (r.error) throw new SwarmError('SWARM_ERR_TASK_FAILED', `command did not start: ${r.error.message}`);
      if (r.exitCode !== 0) {
        throw new SwarmError('SWARM_ERR_TASK_FAILED', `command ${describeEnd(r)}${r.stderr ? `: ${r.stderr.slice(-2000)}` : ''}`);
      }
      const rest = filter.end();
      if (rest) yield rest;
      return {};
    } finally {
      cmd.kill('SIGKILL');
      if (pid !== undefined) this.running.delete(pid);
    }
  }
}

export function execFactory(config: DriverConfig): Driver { return new ExecDriver(config); }
