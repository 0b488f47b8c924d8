import { constants } from 'node:os';
import { EngineProcess, type EngineExit } from '../llama-server/index.js';
import { stopGracefully } from '../lifecycle.js';

/** A running interactive CLI: text in, text out. */
export interface CliTransport {
  readonly pid: number | undefined;
  readonly alive: boolean;
  readonly exited: Promise<EngineExit>;
  write(text: string): boolean;
  /** Keep the event loop alive while a turn runs; returns the release. */
  hold(): () => void;
  signal(sig: NodeJS.Signals): void;
  stop(graceMs: number): Promise<EngineExit>;
  outputTail(n?: number): string;
}

/**
 * Pipes: the CLI's stdin/stdout are pipes, its stderr (logs) is kept as a tail. When the worker dies
 * the CLI reads EOF at its next prompt and exits; the fd-3 watchdog of EngineProcess stops it sooner.
 */
export function pipeTransport(bin: string, args: string[], onData: (t: string) => void): CliTransport {
  const p = new EngineProcess(bin, args, { stdin: true, onStdout: onData });
  return {
    get pid() { return p.pid; },
    get alive() { return p.alive; },
    exited: p.exited,
    write: (t) => p.write(t),
    hold: () => p.hold(),
    signal: (sig) => { if (p.alive && p.pid) try { process.kill(p.pid, sig); } catch { /* gone */ } },
    stop: (g) => p.stop(g),
    outputTail: (n) => p.outputTail(n),
  };
}

interface PtyLike {
  pid: number;
  write(data: string): void;
  kill(signal?: string): void;
  onData(cb: (d: string) => void): unknown;
  onExit(cb: (e: { exitCode: number; signal?: number }) => void): unknown;
}

/**
 * A pseudo-terminal through node-pty (not a dependency: `npm i node-pty` to use it). The CLI is the session leader of its
 * terminal, so when the worker dies the terminal hangs up and the kernel sends it SIGHUP.
 */
export async function ptyTransport(bin: string, args: string[], onData: (t: string) => void): Promise<CliTransport> {
  let mod: { spawn(file: string, args: string[], o: Record<string, unknown>): PtyLike };
  try {
    const name = 'node-pty';
    mod = (await import(name)) as typeof mod;
    if (typeof mod.spawn !== 'function') mod = (mod as unknown as { default: typeof mod }).default;
  } catch (err) {
    throw new Error(`transport=pty needs the node-pty package (${err instanceof Error ? err.message : String(err)})`);
  }
  // Wide and tall, so the line editor never wraps or scrolls our input.
  const t = mod.spawn(bin, args, { name: 'dumb', cols: 32000, rows: 200, env: { ...process.env, TERM: 'dumb' } });
  const tail: string[] = [];
  let exit: EngineExit | undefined;
  const exited = new Promise<EngineExit>((resolve) => {
    t.onExit((e) => {
      const signal = e.signal ? (Object.entries(constants.signals).find(([, n]) => n === e.signal)?.[0] as NodeJS.Signals | undefined) ?? null : null;
      exit = { code: signal ? null : e.exitCode, signal };
      resolve(exit);
    });
  });
  t.onData((d) => {
    for (const l of d.split(/\r?\n/)) if (l) { tail.push(l.replace(/\x1b\[[0-9;]*m/g, '')); if (tail.length > 60) tail.shift(); }
    onData(d);
  });
  const signal = (sig: NodeJS.Signals): void => { if (!exit) try { process.kill(t.pid, sig); } catch { /* gone */ } };
  return {
    get pid() { return exit ? undefined : t.pid; },
    get alive() { return !exit; },
    exited,
    write: (s) => { if (exit) return false; t.write(s); return true; },
    // node-pty keeps its own handles referenced while the terminal is open.
    hold: () => () => {},
    signal,
    stop: async (graceMs) => {
      if (exit) return exit;
      return stopGracefully(signal, exited, graceMs);
    },
    outputTail: (n = 20) => tail.slice(-n).join('\n'),
  };
}
