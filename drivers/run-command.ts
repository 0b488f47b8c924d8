/**
 * One-shot commands (openssl, a build step, a scorer, the exec driver's command): run a program in a
 * process group of its own, feed it its input, capture its output up to a bound, stop it on timeout
 * or abort (SIGTERM to the group, SIGKILL after a grace), and report how it ended. On top of
 * lifecycle.ts, so long-lived and one-shot children share one spawn, one group kill and one
 * exit-time cleanup.
 */
import type { Readable } from 'node:stream';
import { killGroup, startProcess, stopGracefully, trackChild, untrackChild } from './lifecycle.js';

export interface CommandOptions {
  cwd?: string;
  /** The whole environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** Written to stdin, which then closes; without it stdin is /dev/null. */
  input?: string;
  /** Stop the command after this long (SIGTERM, then SIGKILL after killGraceMs); `timedOut` says so. */
  timeoutMs?: number;
  /** Between SIGTERM and SIGKILL of the group (default 2000). */
  killGraceMs?: number;
  /** Stop the command as on timeout; `aborted` says so. */
  signal?: AbortSignal;
  /**
   * Characters of stdout and of stderr held in the result (default 16 MiB each). A stream that passes
   * it stops the command as on timeout and sets `overflow`. With `stream`, only stderr is held.
   */
  maxBuffer?: number;
  /** false: hold no output in the result (a build's megabytes), only hand it to `onLine` (default true). */
  hold?: boolean;
  /** Hand stdout to the caller as `stdout` (decoded text) instead of holding it in the result. */
  stream?: boolean;
  /**
   * Run in a process group of its own (default true), so a stop takes its children too; false keeps
   * it in ours, where a terminal's Ctrl-C reaches it, and a stop signals it alone.
   */
  group?: boolean;
  /** Each complete line of stdout and stderr, as it comes (a build's progress). */
  onLine?: (line: string) => void;
}

/** How a command ended. `error` is set when it never ran (ENOENT: no such program). */
export interface CommandResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  aborted: boolean;
  overflow: boolean;
  error?: NodeJS.ErrnoException;
}

/** A started command: its pid, its stdout when streamed, and its ending. */
export interface RunningCommand {
  readonly pid: number | undefined;
  /** With `stream: true`: stdout as text chunks (iterate with for await). */
  readonly stdout: Readable | null;
  readonly result: Promise<CommandResult>;
  /** Signal the command's whole group. */
  kill(signal: NodeJS.Signals): void;
}

/** Run a command to its end. */
export function runCommand(file: string, args: readonly string[], o: Omit<CommandOptions, 'stream'> = {}): Promise<CommandResult> {
  return startCommand(file, args, o).result;
}

/**
 * Start a command. Its group is killed (SIGKILL) once it has exited, so nothing it left in the
 * background outlives it or holds its pipes open, and at this process's exit (killAllChildren).
 * Never rejects: a program that cannot start is `error` in the result.
 */
export function startCommand(file: string, args: readonly string[], o: CommandOptions = {}): RunningCommand {
  const max = o.maxBuffer ?? 16 * 1024 * 1024;
  const group = o.group ?? true;
  const r: CommandResult = { exitCode: null, signal: null, stdout: '', stderr: '', timedOut: false, aborted: false, overflow: false };
  let child;
  try {
    child = startProcess(file, args, { cwd: o.cwd, env: o.env, group, stdio: [o.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  } catch (err) {
    r.error = err as NodeJS.ErrnoException;
    return { pid: undefined, stdout: null, result: Promise.resolve(r), kill: () => {} };
  }
  const pid = child.pid;
  if (pid !== undefined && group) trackChild(pid);
  let ended = false;
  const kill = (sig: NodeJS.Signals): void => {
    if (pid === undefined) return;
    if (group) killGroup(pid, sig);
    else if (!ended) try { process.kill(pid, sig); } catch { /* gone */ }
  };
  const exited = new Promise<void>((resolve) => { child.once('exit', () => resolve()); child.once('error', () => resolve()); });
  let stopping = false;
  const stop = (why: 'timedOut' | 'aborted' | 'overflow'): void => {
    if (stopping || r.exitCode !== null || r.signal !== null) return;
    stopping = true;
    r[why] = true;
    void stopGracefully(kill, exited, o.killGraceMs ?? 2000);
  };

  const lines = o.onLine ? lineSplitter(o.onLine) : undefined;
  const hold = (key: 'stdout' | 'stderr') => (text: string): void => {
    lines?.push(key, text);
    if (r.overflow || o.hold === false) return;
    r[key] += text;
    if (r[key].length > max) { r[key] = r[key].slice(0, max); stop('overflow'); }
  };
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', hold('stderr'));
  child.stdout!.setEncoding('utf8');
  if (!o.stream) child.stdout!.on('data', hold('stdout'));
  else if (lines) child.stdout!.on('data', (t: string) => lines.push('stdout', t));
  if (child.stdin) {
    child.stdin.on('error', () => { /* a command that does not read its input */ });
    child.stdin.end(o.input);
  }

  const timer = o.timeoutMs === undefined ? undefined : setTimeout(() => stop('timedOut'), o.timeoutMs);
  const onAbort = (): void => stop('aborted');
  if (o.signal?.aborted) onAbort();
  else o.signal?.addEventListener('abort', onAbort, { once: true });

  const result = new Promise<CommandResult>((resolve) => {
    const end = (): void => {
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
      lines?.end();
      if (pid !== undefined) untrackChild(pid);
      resolve(r);
    };
    child.once('error', (err) => { r.error = err; if (pid === undefined) end(); });
    child.once('exit', (code, sig) => { r.exitCode = code; r.signal = sig; kill('SIGKILL'); ended = true; });
    child.once('close', end);
  });
  return { pid, stdout: o.stream ? child.stdout : null, result, kill };
}

/** Calls `onLine` with each complete line of either stream, and the unfinished ones at the end. */
function lineSplitter(onLine: (line: string) => void): { push(key: string, text: string): void; end(): void } {
  const partial = new Map<string, string>();
  return {
    push(key, text) {
      const parts = ((partial.get(key) ?? '') + text).split('\n');
      partial.set(key, parts.pop() ?? '');
      for (const l of parts) onLine(l);
    },
    end() { for (const l of partial.values()) if (l) onLine(l); partial.clear(); },
  };
}

/** One line on how a command failed: `exit code 3`, `killed by SIGTERM`, `timed out after N ms`, … */
export function describeEnd(r: CommandResult, o: { timeoutMs?: number } = {}): string {
  if (r.error) return r.error.message;
  if (r.timedOut) return `timed out after ${o.timeoutMs ?? '?'} ms`;
  if (r.overflow) return 'output passed its bound';
  return r.signal ? `killed by ${r.signal}` : `exit code ${r.exitCode}`;
}
