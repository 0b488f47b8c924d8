import type { Command } from 'commander';
import { alive, killGroup } from '../../hub/index.js';
import { fail } from '../exit.js';
import { call } from '../http.js';
import { int } from '../options.js';
import { readHubFile, recordedPids, stateDir } from '../state.js';

export function registerDown(program: Command): void {
  program.command('down')
    .description('stop the swarm of this state directory; no process of it is left behind')
    .option('--state-dir <dir>', 'state directory (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--timeout <ms>', 'wait this long for a clean stop before killing', int('--timeout', 1), 10_000)
    .option('--json', 'print JSON', false)
    .action(async (o: { stateDir?: string; timeout: number; json: boolean }) => {
      try {
        const dir = stateDir(o.stateDir);
        const hub = readHubFile(dir);
        let clean = false;
        if (hub && alive(hub.pid)) {
          await call(hub, 'POST', '/shutdown', {}, 5000).catch(() => undefined);
          clean = await until(() => !alive(hub.pid), o.timeout);
          if (!clean) killGroup(hub.pid, 'SIGKILL');
        }
        // Whatever survived (a killed hub leaves its workers): stop by pid files.
        const left = recordedPids(dir).filter((p) => alive(p.pid));
        for (const p of left) killGroup(p.pid, 'SIGTERM');
        await until(() => left.every((p) => !alive(p.pid)), 3000);
        for (const p of left) if (alive(p.pid)) killGroup(p.pid, 'SIGKILL');
        await until(() => left.every((p) => !alive(p.pid)), 3000);
        const remaining = recordedPids(dir).filter((p) => alive(p.pid)).length + (hub && alive(hub.pid) ? 1 : 0);
        const result = { stopped: Boolean(hub), clean, killed_leftovers: left.length, remaining };
        if (o.json) process.stdout.write(JSON.stringify(result) + '\n');
        else process.stdout.write(hub ? `swarm down: stopped${clean ? '' : ' (forced)'}${left.length ? `, ${left.length} leftover process(es) killed` : ''}\n` : `swarm down: no swarm was running in ${dir}\n`);
        process.exit(remaining ? 1 : 0);
      } catch (err) { fail(err, o.json); }
    });
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) { if (cond()) return true; await new Promise((r) => setTimeout(r, 25)); }
  return cond();
}
