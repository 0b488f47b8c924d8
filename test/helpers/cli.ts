import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Repo root and the compiled CLI (`npm test` builds first). */
import { ROOT } from './paths.js';
export { ROOT };
export const CLI = path.join(ROOT, 'dist/cli/main.js');

/** Run `swarm …` to completion. */
export function swarm(args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string; timeoutMs?: number } = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd: opts.cwd, env: { ...process.env, ...opts.env }, input: opts.input, encoding: 'utf8', timeout: opts.timeoutMs ?? 120_000,
  });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

/** Start `swarm …` in the background; its own process group so a test can kill it whole. */
export function swarmBg(args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  return { child, output: () => out };
}

/** A `swarm` command running in the background (in this process group): its output so far, and its exit code once `exited`. */
export interface SwarmRun { pid: number; code: number | null; out: string; exited: Promise<void> }

/** Start `swarm ARGS` in the background; stdout and stderr are gathered together in `out`. */
export function swarmRun(args: string[]): SwarmRun {
  const c = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const run: SwarmRun = { pid: c.pid!, code: null, out: '', exited: new Promise((resolve) => c.on('exit', (code) => { run.code = code; resolve(); })) };
  c.stdout.on('data', (d: Buffer) => { run.out += d.toString(); });
  c.stderr.on('data', (d: Buffer) => { run.out += d.toString(); });
  return run;
}

/** True if the pid exists and is not a zombie. */
export function alive(pid: number): boolean {
  try { process.kill(pid, 0); } catch { return false; }
  try { const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8'); return s[s.lastIndexOf(')') + 2] !== 'Z'; } catch { return false; }
}

/** Pids of live processes whose command line mentions `needle` (e.g. a state dir). */
export function pidsMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (cmd.includes(needle) && alive(Number(d))) out.push(Number(d));
    } catch { /* gone */ }
  }
  return out;
}

export { until, sleep } from './wait.js';

/** Read hub.json of a state dir. */
export function hubFile(dir: string): { pid: number; host: string; port: number; control: { host: string; port: number }; token?: string } | undefined {
  try { return JSON.parse(fs.readFileSync(path.join(dir, 'hub.json'), 'utf8')); } catch { return undefined; }
}

/** Call the control API of a state dir's hub. */
export async function api<T = unknown>(dir: string, method: string, p: string, body?: unknown): Promise<T> {
  const h = hubFile(dir);
  if (!h) throw new Error('no hub.json');
  const res = await fetch(`http://${h.control.host}:${h.control.port}${p}`, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...(h.token ? { authorization: `Bearer ${h.token}` } : {}) },
  });
  const text = await res.text();
  return (res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text) as T;
}

/** Records of the hub journal of a state dir, by type. */
export function journal(dir: string): { t: string; id?: string; spec?: { id: string } }[] {
  const f = path.join(dir, 'journal.ndjson');
  if (!fs.existsSync(f)) return [];
  return fs.readFileSync(f, 'utf8').split('\n').filter(Boolean).flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } });
}

/**
 * A fresh directory for a swarm's state that outlives the test body: on teardown every swarm in it or
 * in a directory directly under it is brought down, then it is removed. (tap's t.testdir() is removed before later teardowns run, and
 * `swarm down` needs the state dir to find what to stop.)
 */
export function tempDir(t: { teardown(fn: () => void | Promise<void>): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-test-'));
  t.teardown(() => {
    // Every state dir directly under it (tests name them state, state2, ...): a swarm left in any of
    // them would outlive the run.
    const subdirs = fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => path.join(dir, e.name)) : [];
    for (const d of [dir, ...subdirs]) if (fs.existsSync(path.join(d, 'hub.json')) || fs.existsSync(path.join(d, 'pids'))) swarm(['down', '--state-dir', d]);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}
