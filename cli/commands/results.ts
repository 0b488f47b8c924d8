import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { readArchive } from '../../hub/archive-read.js';
import { archiveDir, archiveFiles } from '../../hub/archive.js';
import { parseDuration } from '../../hub/retention.js';
import { fail } from '../exit.js';
import { stateDir } from '../state.js';

interface ResultsOptions { stateDir?: string; json: boolean; since?: string; id: string[] }

/** `--since`: an ISO date or time, or a duration ago (`90m`, `24h`, `7d`). */
export function parseSince(v: string, now = Date.now()): number {
  const ago = parseDuration(v);
  if (ago > 0) return now - ago;
  const t = Date.parse(v);
  if (Number.isFinite(t)) return t;
  throw new SwarmError('SWARM_ERR_CONFIG', `--since ${JSON.stringify(v)}: expected an ISO date or a duration ago (90m, 24h, 7d)`);
}

export function registerResults(program: Command): void {
  program.command('results')
    .description('read the results archive: finished tasks that left the hot state (the --retain horizon); --json exports NDJSON')
    .option('--state-dir <dir>', 'the swarm\'s state directory (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--json', 'one JSON object per task per line (NDJSON), for export', false)
    .option('--since <when>', 'only tasks finished since then: an ISO date, or a duration ago (24h, 7d)')
    .option('--id <id>', 'only this task (repeatable)', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .action((o: ResultsOptions) => {
      try {
        const dir = stateDir(o.stateDir);
        const since = o.since !== undefined ? parseSince(o.since) : undefined;
        const ids = o.id.length ? new Set(o.id) : undefined;
        let out = '';
        let n = 0;
        const flush = () => { if (out) process.stdout.write(out); out = ''; };
        const rep = readArchive(dir, { since, ids }, (a) => {
          n++;
          if (o.json) {
            const { t: _t, ...task } = a;
            out += JSON.stringify(task) + '\n';
          } else {
            const what = a.state === 'done' ? (a.result?.text ?? '').replace(/\s+/g, ' ').slice(0, 80) : `${a.error?.code ?? ''}: ${a.error?.msg ?? ''}`.slice(0, 80);
            out += `${a.id}\t${a.state}\t${new Date(a.finished_at).toISOString()}\t${a.result?.worker ?? '-'}\t${what}\n`;
          }
          if (out.length > 64 * 1024) flush();
        });
        flush();
        // The files start past the first: the older ones were pruned (--archive-max) or removed by hand.
        const first = archiveFiles(archiveDir(dir))[0]?.[0];
        if (first !== undefined && first > 1) process.stderr.write(`swarm: note: results archived before results-${String(first).padStart(6, '0')}.ndjson were pruned (--archive-max) and are not shown\n`);
        if (rep.damaged) process.stderr.write(`swarm: warning: ${rep.damaged} damaged archive line(s) skipped in ${archiveDir(dir)}\n`);
        if (!o.json && n === 0) process.stderr.write(`no archived results${ids ? ' for those ids' : ''}${since !== undefined ? ' since then' : ''} in ${archiveDir(dir)} (tasks inside the --retain horizon are still hot: swarm status, GET /tasks/<id>)\n`);
        if (ids && n === 0) process.exitCode = 1;
      } catch (err) { fail(err, o.json); }
    });
}
