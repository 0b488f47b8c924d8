import { SwarmError } from '../../protocol/index.js';
import { killGroup, trackChild, untrackChild } from '../lifecycle.js';
import { StopFilter } from '../stop-filter.js';
import { checkKnown, intOption } from '../options.js';
import type { ChatOptions, ChatStats, Driver, DriverConfig } from '../types.js';

const KNOWN = ['cmd', 'kill_grace_ms', 'max_output'] as const;

/** Settings of the exec driver (`--driver-opt cmd='…'`). */
export interface ExecOptions { cmd: string; killGraceMs: number; maxOutput: number }

export function parseExecOptions(o: Record<string, string>): ExecOptions {
  checkKnown('exec', o, KNOWN);
  if (!o.cmd) throw new SwarmError('SWARM_ERR_CONFIG', 'the exec driver needs --driver-opt cmd=\'COMMAND\' (run with /bin/sh; the prompt is on stdin and in $SWARM_PROMPT)');
  return { cmd: o.cmd, killGraceMs: intOption('exec', o, 'kill_grace_ms', 2000), maxOutput: intOption('exec', o, 'max_output', 16 * 1024 * 1024, 1) };
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
    // Loaded on first use: execa adds ~15 MB to a process, and most workers never run the exec driver.
    const { execa } = await import('execa');
    const proc = execa({
      shell: '/bin/sh', input: prompt, detached: true, reject: false, stripFinalNewline: false,
      env: { SWARM_PROMPT: prompt, SWARM_MAX_TOKENS: opts.maxTokens === undefined ? '' : String(opts.maxTokens) },
      forceKillAfterDelay: o.killGraceMs, maxBuffer: o.maxOutput,
    })`${o.cmd}`;
    const pid = proc.pid;
    if (pid !== undefined) { this.running.add(pid); trackChild(pid); }
    const onAbort = (): void => { if (pid !== undefined) killGroup(pid, 'SIGTERM'); };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const filter = new StopFilter(opts.stop ?? []);
    let size = 0;
    let stopped = false;
    try {
      for await (const chunk of proc.iterable({ preserveNewlines: true })) {
        size += chunk.length;
        if (size > o.maxOutput) throw new SwarmError('SWARM_ERR_TASK_FAILED', `exec output passed ${o.maxOutput} bytes`);
        const text = filter.push(chunk);
        if (text) yield text;
        if (filter.stopped) { stopped = true; break; }
      }
      if (stopped) { if (pid !== undefined) killGroup(pid, 'SIGTERM'); return {}; }
      const r = await proc;
      if (opts.signal?.aborted) return {};
      if (r.exitCode !== 0) {
        const why = r.signal ? `killed by ${r.signal}` : `exit code ${r.exitCode}`;
        throw new SwarmError('SWARM_ERR_TASK_FAILED', `command ${why}${r.stderr ? `: ${String(r.stderr).slice(-2000)}` : ''}`);
      }
      const rest = filter.end();
      if (rest) yield rest;
      return {};
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      if (pid !== undefined) { killGroup(pid, 'SIGKILL'); this.running.delete(pid); untrackChild(pid); }
      proc.catch(() => {});
    }
  }
}

export function execFactory(config: DriverConfig): Driver { return new ExecDriver(config); }
