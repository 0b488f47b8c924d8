import type { Command } from 'commander';
import { fail } from '../exit.js';
import { call } from '../http.js';
import { runningHub, stateDir } from '../state.js';

interface Status {
  hub: { pid: number; address?: { host: string; port: number }; uptime_s: number; mode: string };
  workers: { id: string; state: string; status: string; role: string; driver: string; inflight: number; done: number }[];
  tasks: { queued: number; leased: number; done: number; failed: number };
  metrics: { dispatch_p50_ms: number; dispatch_p99_ms: number; tokens_out: number };
}

export function registerStatus(program: Command): void {
  program.command('status')
    .description('show the running swarm: hub, workers, tasks')
    .option('--state-dir <dir>', 'state directory (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--json', 'print one JSON object', false)
    .action(async (o: { stateDir?: string; json: boolean }) => {
      try {
        const hub = runningHub(stateDir(o.stateDir));
        const s = await call<Status>(hub, 'GET', '/status');
        if (o.json) { process.stdout.write(JSON.stringify(s) + '\n'); return; }
        const byState = new Map<string, number>();
        for (const w of s.workers) byState.set(w.state, (byState.get(w.state) ?? 0) + 1);
        const lines = [
          `hub      ${s.hub.address?.host}:${s.hub.address?.port} pid ${s.hub.pid} up ${s.hub.uptime_s}s mode ${s.hub.mode}`,
          `workers  ${s.workers.length} (${[...byState].map(([k, v]) => `${v} ${k}`).join(', ') || 'none'})`,
          `tasks    ${s.tasks.queued} queued, ${s.tasks.leased} running, ${s.tasks.done} done, ${s.tasks.failed} failed`,
          `dispatch p50 ${s.metrics.dispatch_p50_ms.toFixed(3)} ms, p99 ${s.metrics.dispatch_p99_ms.toFixed(3)} ms; tokens out ${s.metrics.tokens_out}`,
        ];
        if (s.workers.length <= 40) {
          lines.push('', 'ID'.padEnd(24) + 'STATE'.padEnd(10) + 'ROLE'.padEnd(12) + 'DRIVER'.padEnd(12) + 'INFLIGHT  DONE');
          for (const w of s.workers) lines.push(w.id.padEnd(24) + w.state.padEnd(10) + (w.role || '-').padEnd(12) + w.driver.padEnd(12) + String(w.inflight).padEnd(10) + w.done);
        }
        process.stdout.write(lines.join('\n') + '\n');
      } catch (err) { fail(err, o.json); }
    });
}
