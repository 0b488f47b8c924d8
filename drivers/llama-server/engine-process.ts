import type { ChildProcess } from 'node:child_process';
import { keepLoopAlive, killGroup, startProcess, stopGracefully, trackChild, untrackChild } from '../lifecycle.js';

/** Kept for the drivers that import it from here; it lives with the rest of the lifecycle. */
export { keepLoopAlive };

/** How an engine process ended. */
export interface EngineExit { code: number | null; signal: NodeJS.Signals | null }

export interface EngineProcessOptions {
  env?: NodeJS.ProcessEnv;
  /** Give the engine a stdin pipe (write with `write()`); otherwise its stdin is /dev/null. */
  stdin?: boolean;
  /** Lines of stderr/stdout kept for error messages. */
  tailLines?: number;
  /** Called with each output line (stdout and stderr). */
  onLine?: (line: string) => void;
  /** Take stdout raw (decoded UTF-8 chunks) instead of as tail lines. */
  onStdout?: (text: string) => void;
}

/** One engine subprocess in its own process group, with a kept output tail and orphan protection. */
export class EngineProcess {
  readonly child: ChildProcess;
  /** Resolves once, with the first reason the process ended. */
  readonly exited: Promise<EngineExit>;
  private exit: EngineExit | undefined;
  private readonly tail: string[] = [];
  private partial = '';

  constructor(readonly file: string, readonly args: string[], private readonly opts: EngineProcessOptions = {}) {
    this.child = startProcess(file, args, { watchdog: 'swarm-engine', stdio: [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe', 'pipe'], env: opts.env });
    if (this.child.pid !== undefined) trackChild(this.child.pid);
    // The fd-3 pipe must stay open for the engine's lifetime, and must never keep our event loop alive.
    this.watch?.on('error', () => {});
    this.child.stdin?.on('error', () => {});
    if (opts.onStdout) {
      const onStdout = opts.onStdout;
      this.child.stdout?.setEncoding('utf8');
      this.child.stdout?.on('data', (t: string) => onStdout(t));
    } else this.child.stdout?.on('data', (b: Buffer) => this.feed(b));
    this.child.stderr?.on('data', (b: Buffer) => this.feed(b));
    this.exited = new Promise((resolve) => {
      const done = (e: EngineExit): void => {
        if (this.exit) return;
        this.exit = e;
        if (this.child.pid !== undefined) untrackChild(this.child.pid);
        this.watch?.destroy(); // lets the watcher go
        this.child.stdin?.destroy();
        resolve(e);
      };
      this.child.once('exit', (code, signal) => done({ code, signal }));
      this.child.once('error', (err) => { this.pushLine(`spawn error: ${err.message}`); done({ code: null, signal: null }); });
    });
    this.child.unref();
    (this.child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    (this.child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
    (this.child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    (this.watch as unknown as { unref?: () => void } | undefined)?.unref?.();
  }

  private get watch(): NodeJS.WritableStream & { destroy(): void; on(ev: 'error', f: () => void): unknown } | undefined {
    return (this.child.stdio[3] ?? undefined) as never;
  }

  /**
   * Keep our event loop alive while we wait for output (a turn in progress); the process and its
   * pipes are unref'd otherwise, so an idle engine never holds a worker open. Returns the release.
   */
  hold(): () => void {
    const out = this.child.stdout as unknown as { ref?: () => void; unref?: () => void } | null;
    out?.ref?.();
    let held = true;
    return () => { if (held) { held = false; out?.unref?.(); } };
  }

  /** Write to the engine's stdin (needs `stdin: true`). False when the pipe is gone. */
  write(text: string): boolean {
    const s = this.child.stdin;
    if (!s || s.destroyed || !this.alive) return false;
    s.write(text);
    return true;
  }

  get pid(): number | undefined { return this.child.pid; }
  get alive(): boolean { return this.exit === undefined && this.child.pid !== undefined; }
  get exitInfo(): EngineExit | undefined { return this.exit; }

  /** The last lines the engine printed (for error messages). */
  outputTail(n = 20): string { return this.tail.slice(-n).join('\n'); }

  private feed(b: Buffer): void {
    const parts = (this.partial + b.toString('utf8')).split('\n');
    this.partial = parts.pop() ?? '';
    if (this.partial.length > 4096) { this.pushLine(this.partial); this.partial = ''; }
    for (const l of parts) this.pushLine(l);
  }

  private pushLine(l: string): void {
    this.tail.push(l);
    if (this.tail.length > (this.opts.tailLines ?? 60)) this.tail.shift();
    this.opts.onLine?.(l);
  }

  /** Signal the whole process group (engine and watcher). */
  kill(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    killGroup(pid, signal);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. Idempotent. */
  async stop(graceMs = 3000): Promise<EngineExit> {
    if (this.exit) { this.kill('SIGKILL'); return this.exit; }
    const e = await stopGracefully((sig) => this.kill(sig), this.exited, graceMs);
    // The watcher is in the group too; with the engine gone it must not linger.
    this.kill('SIGKILL');
    return e;
  }
}

/** A free loopback TCP port: bind port 0, read the port, close. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
