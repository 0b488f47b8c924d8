import fs from 'node:fs';
import path from 'node:path';
import { alive } from '../lifecycle.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Stop the batched engines of a state directory and wait until they have exited. An engine outlives
 * its workers by design (it idles out a moment after the last one leaves), so a `swarm down` that
 * returned when the workers had gone left it running for seconds more. Only a process whose command
 * line names its own socket is signalled: a pid file whose pid was reused names someone else.
 * Returns the engines that were still running.
 */
export async function stopEngines(stateDir: string, graceMs = 3000): Promise<number> {
  const root = path.join(stateDir, 'engines');
  let names: string[];
  try { names = fs.readdirSync(root).filter((n) => n.endsWith('.pid')); } catch { return 0; }
  const pids = new Set<number>();
  for (const n of names) {
    let pid = NaN;
    try { pid = Number.parseInt(fs.readFileSync(path.join(root, n), 'utf8'), 10); } catch { /* damaged: the scan below finds it */ }
    if (pid > 0 && alive(pid) && isEngine(pid, n.slice(0, -4))) pids.add(pid);
  }
  // A pid file damaged or removed under a running engine: it is found by its config, which names this folder.
  for (const pid of enginesNaming(root)) pids.add(pid);
  for (const pid of pids) {
    // The engine runs in a process group of its own (started detached): the group holds nothing else.
    try { process.kill(-pid, 'SIGTERM'); } catch { try { process.kill(pid, 'SIGTERM'); } catch { /* gone */ } }
  }
  const left = (): number[] => [...pids].filter(alive);
  const deadline = Date.now() + graceMs;
  while (left().length && Date.now() < deadline) await sleep(20);
  for (const pid of left()) try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
  while (left().length && Date.now() < deadline + 2000) await sleep(20);
  return pids.size;
}

/** Engine processes whose config (on their command line) puts their files in `root`. */
function enginesNaming(root: string): number[] {
  const mark = JSON.stringify(path.resolve(root) + path.sep).slice(1, -1);
  const out: number[] = [];
  let procs: string[];
  try { procs = fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)); } catch { return out; }
  for (const n of procs) {
    const pid = Number(n);
    if (pid === process.pid) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${n}/cmdline`, 'utf8');
      if (HOST_SCRIPT.test(cmd) && cmd.includes(mark)) out.push(pid);
    } catch { /* gone, or another user's */ }
  }
  return out;
}

const HOST_SCRIPT = /[\\/]batched[\\/]host\.[jt]s\0/;

/** Is `pid` the engine with this id: its command line carries its config, whose socket is named by the id. */
function isEngine(pid: number, id: string): boolean {
  try {
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return HOST_SCRIPT.test(cmd) && (cmd.includes(`${id}.sock`) || cmd.includes('swarm-eng-'));
  } catch { return false; }
}
