import type { Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { ROOT, swarmRun, until, type SwarmRun } from './cli.js';

// A `swarm down` caught mid-stop, for what runs beside it (test/cli/down-concurrent, up-during-down).

/** A process `down` takes for the swarm's batched engine: it names the state directory's engines folder, and ignores SIGTERM. */
export function slowEngine(t: { teardown(fn: () => void): void }, base: string, state: string): number {
  const script = path.join(base, 'batched', 'host.js');
  fs.mkdirSync(path.dirname(script), { recursive: true });
  fs.writeFileSync(script, "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);\n");
  fs.mkdirSync(path.join(state, 'engines'), { recursive: true });
  const c = spawn(process.execPath, [script, path.join(state, 'engines') + path.sep], { detached: true, stdio: 'ignore' });
  c.unref();
  t.teardown(() => { try { process.kill(c.pid!, 'SIGKILL'); } catch { /* gone */ } });
  return c.pid!;
}

/** The JSON line a command printed. */
export const json = (out: string): Record<string, unknown> => JSON.parse(out.split('\n').find((l) => l.startsWith('{')) ?? '{}') as Record<string, unknown>;

/**
 * Start `swarm down`, wait until it has stopped the hub (hub.json gone) and is still at work, and
 * pause it there (SIGSTOP), so that what runs next meets a stop under way however slow it starts.
 */
export async function downUnderWay(t: Test, state: string, args: string[] = [], run: (args: string[]) => SwarmRun = swarmRun) {
  const first = run(['down', '--state-dir', state, ...args]);
  let done = false;
  void first.exited.then(() => { done = true; });
  t.ok(await until(() => done || !fs.existsSync(path.join(state, 'hub.json')), 30_000, 5), 'the first down stopped the hub');
  try { process.kill(first.pid, 'SIGSTOP'); } catch { /* gone */ }
  t.teardown(() => { try { process.kill(first.pid, 'SIGCONT'); } catch { /* gone */ } });
  t.notOk(done, 'and is still stopping the rest');
  return first;
}

/** Once `next` waits for the paused `first` (says so), or has ended, let `first` go on. */
export async function thenResume(first: { pid: number }, next: { out: string; code: number | null }): Promise<void> {
  await until(() => next.code !== null || /waiting for it/.test(next.out), 30_000);
  try { process.kill(first.pid, 'SIGCONT'); } catch { /* gone */ }
}

/** `swarm ARGS` as a user runs it: through its shebang, by a relative path (its command line is not node's argv). */
export function asTyped(args: string[]): SwarmRun {
  const c = spawn('./dist/cli/main.js', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const run: SwarmRun = { pid: c.pid!, code: null, out: '', exited: new Promise((resolve) => c.on('exit', (code) => { run.code = code; resolve(); })) };
  c.stdout.on('data', (d: Buffer) => { run.out += d.toString(); });
  c.stderr.on('data', (d: Buffer) => { run.out += d.toString(); });
  return run;
}
