/**
 * The hub's start, from exec to listening: `swarm hub` on a fresh state directory (empty, or a copy
 * of --from's journal and snapshot), started --starts times each way, alternated: its code from the
 * bundle (dist/hub-bundle, the default) and as modules (SWARM_HUB_BUNDLE=0). Per start, from its log:
 * `boot_ms` (exec to the journal's open: node and the modules), `cpu_ms` (its CPU at `journal
 * replayed`), and the wall time until its log says `hub listening`. --busy N runs N busy loops
 * (`setsid sh -c 'while :; do :; done'`) beside it, as a loaded host; the load average is recorded.
 * --compare DIR alternates this build's bundle with another built checkout's (`other`) instead (DIR/dist/cli/main.js:
 * a change to what runs before the bundle, measured side by side); a start whose stderr says its
 * bundle is stale (it ran its modules) is counted in `stale`.
 * Run: `npm run build && node dist/bench/hub-boot.js [--starts 10] [--busy 4] [--from DIR] [--compare DIR]`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CLI, arg, checkArgs } from './args.js';

const ABOUT = 'the hub from exec to listening, its code from the bundle and as modules, alternated';
const STARTS = Number(arg('starts', '10', 'starts each way'));
const BUSY = Number(arg('busy', '0', 'busy loops beside it'));
const FROM = arg('from', '', 'a state directory whose journal and snapshot each start replays (a copy)');
const COMPARE = arg('compare', '', 'another built checkout, its bundle alternated with this one\'s (instead of the modules)');
checkArgs('hub-boot', ABOUT);

interface Row { boot: number; cpu: number; wall: number; stale: boolean }
type Kind = 'bundle' | 'modules' | 'other';
const KINDS: readonly Kind[] = COMPARE ? ['other', 'bundle'] : ['modules', 'bundle'];

async function start(kind: Kind): Promise<Row> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-bench-boot-'));
  try {
    for (const f of FROM ? ['snapshot.ndjson', 'journal.ndjson'] : []) if (fs.existsSync(path.join(FROM, f))) fs.copyFileSync(path.join(FROM, f), path.join(dir, f));
    const log = path.join(dir, 'hub.log');
    const env = { ...process.env, SWARM_HUB_BUNDLE: kind === 'modules' ? '0' : '1' };
    const t0 = performance.now();
    const cli = kind === 'other' ? path.join(COMPARE, 'dist/cli/main.js') : CLI;
    const p = spawn(process.execPath, [cli, 'hub', '--state-dir', dir, '--log-file', log, '--insecure-no-auth'], { stdio: ['ignore', 'ignore', 'pipe'], env });
    let err = '';
    p.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
    try {
      for (let i = 0; i < 24_000; i++) {
        await new Promise((r) => setTimeout(r, 5));
        let text = '';
        try { text = fs.readFileSync(log, 'utf8'); } catch { continue; }
        if (!text.includes('"msg":"hub listening"')) continue;
        const m = /"boot_ms":(\d+),"bind_ms":\d+,"replay_ms":\d+,"cpu_ms":(\d+)/.exec(text);
        if (!m) throw new Error(`no timings in ${log}`);
        return { boot: Number(m[1]), cpu: Number(m[2]), wall: Math.round(performance.now() - t0), stale: /bundle .* is stale/.test(err) };
      }
      throw new Error('the hub did not listen within 120 s');
    } finally {
      p.kill('SIGKILL');
      await new Promise((r) => (p.exitCode !== null || p.signalCode !== null ? r(undefined) : p.once('exit', r)));
    }
  } finally { fs.rmSync(dir, { recursive: true, force: true }); }
}

const busy: ChildProcess[] = [];
for (let i = 0; i < BUSY; i++) busy.push(spawn('setsid', ['sh', '-c', 'while :; do :; done'], { stdio: 'ignore' }));
const stopBusy = () => { for (const b of busy) try { b.kill('SIGKILL'); } catch { /* gone */ } };
process.once('exit', stopBusy);
try {
  if (BUSY) await new Promise((r) => setTimeout(r, 2000));
  const rows: Record<Kind, Row[]> = { bundle: [], modules: [], other: [] };
  const loads: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    loads.push(os.loadavg()[0]!);
    for (const kind of i % 2 ? [...KINDS].reverse() : KINDS) rows[kind].push(await start(kind));
  }
  const range = (v: number[]) => { const s = [...v].sort((a, b) => a - b); return { min: s[0], median: s[s.length >> 1], max: s.at(-1) }; };
  const out = {
    starts: STARTS, busy: BUSY, from: FROM || null, compare: COMPARE || null, load: range(loads),
    ...Object.fromEntries(KINDS.map((k) => [k, { boot_ms: range(rows[k].map((r) => r.boot)), cpu_ms: range(rows[k].map((r) => r.cpu)), listen_ms: range(rows[k].map((r) => r.wall)), stale: rows[k].filter((r) => r.stale).length }])),
  };
  process.stdout.write(JSON.stringify(out) + '\n');
} finally { stopBusy(); }
