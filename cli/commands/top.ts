import type { Command } from 'commander';
import type { DashState, RunRow, WorkerRow } from '../../hub/dashboard/types.js';
import { SwarmError } from '../../protocol/errors.js';
import { fail } from '../exit.js';
import { remoteOptions, remoteTarget, type RemoteOptions } from '../http.js';
import { follow } from '../events.js';
import { stateDir } from '../state.js';
import { runningHub } from '../running.js';

/** How often a plain (not a terminal) `swarm top` repeats an unchanged state. */
const PLAIN_REPEAT_MS = 10_000;
const BARS = '▁▂▃▄▅▆▇█';
const pad = (s: string | number, n: number): string => { const t = String(s); return t.length >= n ? `${t.slice(0, n - 1)} ` : t.padEnd(n); };
/** The end of a long id: a run's task ids differ in their last part (the node). */
const tail = (s: string, n: number): string => (s.length > n ? `…${s.slice(s.length - n + 1)}` : s);
const ago = (ms: number): string => (ms < 120_000 ? `${Math.max(0, Math.round(ms / 1000))}s` : `${Math.round(ms / 60_000)}m`);

/** A sparkline of one chart column (the last `width` samples). */
export function spark(values: number[], width: number): string {
  const v = values.slice(-width);
  const max = Math.max(1, ...v);
  return v.map((x) => BARS[Math.min(BARS.length - 1, Math.round((x / max) * (BARS.length - 1)))]).join('');
}

function workerState(w: WorkerRow): string { return w.state === 'dead' ? (w.supervised ? 'dead*' : 'dead') : w.state; }

function runLine(r: RunRow): string {
  const states = new Map<string, number>();
  for (const n of r.nodes) states.set(n.state, (states.get(n.state) ?? 0) + 1);
  const nodes = [...states].map(([k, v]) => `${v} ${k}`).join(', ');
  return `${pad(r.run, 24)}${pad(r.topology, 16)}${pad(r.state === 'running' ? 'running' : r.verdict ?? 'done', 14)}${r.done}/${r.submitted} nodes (${nodes || 'none'}) ${r.tokens_per_s} tok/s ${(r.elapsed_ms / 1000).toFixed(1)}s`;
}

/** The full-screen view: header, queue, workers (as many as fit), runs. */
export function screen(s: DashState, cols: number, rows: number, now = Date.now()): string[] {
  const q = s.queue, h = s.hub;
  const dead = s.workers.filter((w) => w.state === 'dead').length;
  const busy = s.workers.filter((w) => w.tasks.length > 0).length;
  const out = [
    `swarm top · ${h.name} ${h.address ? `${h.address.host}:${h.address.port}` : ''} · mode ${h.mode} · coordinator ${h.coordinator} · up ${ago(now - h.started_at)} · q quits`,
    `workers ${s.workers.length - dead} connected, ${busy} busy, ${dead} dead`,
    `queue   ${q.queued} queued · ${q.leased} running · ${q.done} done · ${q.failed} failed · dispatch p50 ${q.dispatch_p50_ms.toFixed(2)} ms p99 ${q.dispatch_p99_ms.toFixed(2)} ms · ${q.tps} tok/s`,
    `        waiting ${spark(s.history.map((x) => x[1] + x[2]), Math.max(10, Math.min(60, cols - 50)))}  tok/s ${spark(s.history.map((x) => x[5]), 30)}`,
    '',
  ];
  const runs = s.runs.slice(0, 6);
  const room = Math.max(1, rows - out.length - 2 - (runs.length ? runs.length + 2 : 0));
  out.push(pad('WORKER', 14) + pad('STATE', 9) + pad('ROLE', 12) + pad('DRIVER', 10) + pad('HOST', 10) + pad('TASK', 28) + pad('TOK/S', 7) + pad('DONE', 6) + 'HEARD');
  for (const w of s.workers.slice(0, room)) {
    out.push(pad(w.id + (w.respawns ? `+${w.respawns}` : ''), 14) + pad(workerState(w), 9) + pad(w.role || '-', 12) + pad(w.driver, 10) + pad(w.host, 10)
      + pad(tail(w.tasks[0] ?? '', 27), 28) + pad(w.tps, 7) + pad(w.done, 6) + ago(now - (w.dead_since ?? w.last_seen)));
  }
  if (s.workers.length > room) out.push(`… ${s.workers.length - room} more workers`);
  if (runs.length) { out.push('', 'RUNS'); for (const r of runs) out.push(runLine(r)); }
  return out.map((l) => (l.length > cols ? l.slice(0, cols) : l));
}

/** One plain line (not a terminal): what changed is visible line by line in a log. */
export function plainLine(s: DashState): string {
  const q = s.queue;
  const dead = s.workers.filter((w) => w.state === 'dead').length;
  const busy = s.workers.filter((w) => w.tasks.length > 0).length;
  const runs = s.runs.filter((r) => r.state === 'running').map((r) => `${r.run} ${r.done}/${r.submitted}`).join(', ');
  return `mode ${s.hub.mode} workers ${s.workers.length - dead} (${busy} busy, ${dead} dead) queue ${q.queued} queued ${q.leased} running ${q.done} done ${q.failed} failed ${q.tps} tok/s runs ${runs || 'none running'}`;
}

export function registerTop(program: Command): void {
  remoteOptions(program.command('top')
    .description('live terminal view of the running swarm: workers, queue, runs (q quits; plain lines when not a terminal)')
    .option('--state-dir <dir>', 'state directory (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--once', 'print the current state once and exit', false)
    .option('--json', 'print the state as JSON: one object with --once, else one line per change', false))
    .action(async (o: RemoteOptions & { stateDir?: string; once: boolean; json: boolean }) => {
      try {
        const hub = remoteTarget(o) ?? runningHub(stateDir(o.stateDir));
        await top(hub, o.once, o.json);
        // A piped stdin keeps the loop alive after it is paused: leave now that the screen is restored.
        process.exit(0);
      } catch (err) { fail(err, o.json); }
    });
}

async function top(hub: Parameters<typeof follow>[0], once: boolean, json: boolean): Promise<void> {
  const out = process.stdout;
  const tty = Boolean(out.isTTY) && !once && !json;
  let state: DashState | undefined;
  let link = 'connecting';
  let lastPlain = '';
  let drawTimer: NodeJS.Timeout | undefined;
  let unreachable: string | undefined;
  let answered: number | undefined;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const draw = () => {
    drawTimer = undefined;
    if (!state) return;
    if (!tty) {
      const line = json ? JSON.stringify(state) : plainLine(state);
      if (line !== lastPlain) { lastPlain = line; out.write(json ? `${line}\n` : `${new Date().toISOString().slice(11, 19)} ${line}\n`); }
      return;
    }
    const lines = screen(state, out.columns || 100, out.rows || 30);
    if (link !== 'live') lines[0] = `${lines[0]} · hub ${link}`;
    out.write(`\x1b[H${lines.map((l) => `${l}\x1b[K`).join('\n')}\x1b[J`);
  };
  const schedule = () => { drawTimer ??= setTimeout(draw, tty ? 250 : 1000); };
  const stream = follow(hub, (s) => {
    state = s;
    if (once) { out.write(json ? JSON.stringify(s) + '\n' : screen(s, 200, 10_000).join('\n') + '\n'); quit(); return; }
    schedule();
  }, (up, why, status) => {
    // --once prints the state as it is now: a hub that cannot be reached has none to print (it retried forever).
    if (!up && once) { unreachable = why ?? '?'; answered = status; quit(); return; }
    link = up ? 'live' : `unreachable (${why ?? '?'}), retrying`; if (!up && !tty && !json) out.write(`hub ${link}\n`); schedule();
  });
  // Without a terminal, the state again every 10 s even when unchanged: a log shows the swarm is
  // still watched, and a reader that left (`swarm top | head -3`) is noticed by the next write.
  const ticker = tty ? setInterval(draw, 1000) : once ? undefined : setInterval(() => { lastPlain = ''; draw(); }, PLAIN_REPEAT_MS);
  const quit = () => {
    stream.stop();
    if (ticker) clearInterval(ticker);
    if (drawTimer) clearTimeout(drawTimer);
    if (tty) out.write('\x1b[?25h\x1b[?1049l');
    if (process.stdin.isTTY) process.stdin.setRawMode(false);
    process.stdin.pause();
    resolveDone();
  };
  if (tty) out.write('\x1b[?1049h\x1b[?25l\x1b[H\x1b[2Jconnecting to the hub…');
  if (!once) {
    if (process.stdin.isTTY) process.stdin.setRawMode(true);
    process.stdin.setEncoding('utf8');
    // q, Q, Ctrl-C (raw mode delivers it as a byte, not SIGINT), or end of input in a pipe.
    process.stdin.on('data', (c: string) => { if (/[qQ\u0003]/.test(c)) quit(); });
    process.once('SIGINT', quit);
    process.once('SIGTERM', quit);
    if (tty) out.on('resize', draw);
  }
  await done;
  const where = `${hub.control.host}:${hub.control.port}`;
  if (answered === 401) throw new SwarmError('SWARM_ERR_AUTH', `the hub at ${where} refused the token (HTTP 401)`);
  // It is there but did not give its live view (restarting, shutting down, too busy): not "cannot be reached".
  if (answered !== undefined) throw new SwarmError(answered === 503 ? 'SWARM_ERR_SHUTDOWN' : 'SWARM_ERR_NO_SWARM', `the hub at ${where} answered HTTP ${answered} to its live view; try again`);
  if (unreachable !== undefined) throw new SwarmError('SWARM_ERR_NO_SWARM', `the hub at ${where} cannot be reached: ${unreachable}`);
}
