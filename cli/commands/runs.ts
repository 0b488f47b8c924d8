import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { SwarmError } from '../../protocol/errors.js';
import { fail } from '../exit.js';
import { call, remoteOptions, swarmOptions, remoteTarget, type RemoteOptions } from '../http.js';
import { stateDir } from '../state.js';
import { runningHub } from '../running.js';

/** A run as its folder records it. */
export interface RunRecord {
  run: string;
  dir: string;
  passport: { run: string; created_at: string; experiment: string; topology: string; seed: number; temperature: number; replay_of?: string; models: { path: string; sha256?: string }[] };
  result?: { verdict?: string; reason?: string; output: string; details?: Record<string, unknown>; metrics?: Record<string, unknown> };
}

export function readRunDir(dir: string): RunRecord | undefined {
  try {
    const passport = JSON.parse(fs.readFileSync(path.join(dir, 'passport.json'), 'utf8')) as RunRecord['passport'];
    let result: RunRecord['result'];
    try { result = JSON.parse(fs.readFileSync(path.join(dir, 'result.json'), 'utf8')) as RunRecord['result']; } catch { /* running */ }
    return { run: passport.run, dir, passport, result };
  } catch { return undefined; }
}

function runsDir(o: { stateDir?: string }): string { return path.join(stateDir(o.stateDir), 'runs'); }

function listRuns(dir: string): RunRecord[] {
  let names: string[] = [];
  try { names = fs.readdirSync(dir); } catch { return []; }
  return names.sort().reverse().flatMap((n) => { const r = readRunDir(path.join(dir, n)); return r ? [r] : []; });
}

/** A run by its id or a unique prefix of it (like git): `20261123-1843` or the date-less tail. */
export function resolveRunId(dir: string, id: string): string {
  if (fs.existsSync(path.join(dir, id, 'passport.json'))) return id;
  let names: string[] = [];
  try { names = fs.readdirSync(dir); } catch { /* no runs yet */ }
  const hits = id ? names.filter((n) => n.startsWith(id) || (id.length >= 4 && n.endsWith(`-${id}`))) : [];
  if (hits.length === 1) return hits[0]!;
  if (hits.length > 1) throw new SwarmError('SWARM_ERR_CONFIG', `run id "${id}" is ambiguous: ${hits.slice(0, 5).join(', ')}${hits.length > 5 ? `, … (${hits.length})` : ''}`);
  throw new SwarmError('SWARM_ERR_UNKNOWN_RUN', `no run ${id} in ${dir} (see \`swarm runs ls\`)`);
}

function need(dir: string, id: string): RunRecord {
  const full = resolveRunId(dir, id);
  const r = readRunDir(path.join(dir, full));
  if (!r) throw new SwarmError('SWARM_ERR_UNKNOWN_RUN', `no run ${id} in ${dir} (see \`swarm runs ls\`)`);
  return r;
}

const METRICS = ['nodes', 'failed', 'tokens_out', 'wall_ms', 'tokens_per_s', 'latency_p50_ms', 'latency_p95_ms', 'latency_max_ms'] as const;

/** A table of metrics per run, with deltas against the first. */
export function compareRuns(runs: RunRecord[]): string {
  const num = (r: RunRecord, k: string) => Number((r.result?.metrics as Record<string, unknown> | undefined)?.[k] ?? NaN);
  const head = ['metric', ...runs.map((r) => r.run), ...runs.slice(1).map((r) => `Δ ${r.run.slice(-4)}`)];
  const rows: string[][] = [
    ['verdict', ...runs.map((r) => r.result?.verdict ?? 'running'), ...runs.slice(1).map((r) => (r.result?.verdict === runs[0]!.result?.verdict ? 'same' : 'differs'))],
    ['seed', ...runs.map((r) => String(r.passport.seed)), ...runs.slice(1).map((r) => String(r.passport.seed - runs[0]!.passport.seed))],
    ...METRICS.map((k) => {
      const base = num(runs[0]!, k);
      return [k, ...runs.map((r) => fmt(num(r, k))), ...runs.slice(1).map((r) => delta(num(r, k), base))];
    }),
    ['output', ...runs.map((r) => `${(r.result?.output ?? '').length} chars`), ...runs.slice(1).map((r) => (r.result?.output === runs[0]!.result?.output ? 'same' : 'differs'))],
  ];
  const widths = head.map((_, i) => Math.max(head[i]!.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ');
  return [line(head), ...rows.map(line)].join('\n');
}

const fmt = (n: number) => (Number.isFinite(n) ? (Number.isInteger(n) ? String(n) : n.toFixed(1)) : '-');
function delta(v: number, base: number): string {
  if (!Number.isFinite(v) || !Number.isFinite(base)) return '-';
  const d = v - base;
  const pct = base !== 0 ? ` (${d >= 0 ? '+' : ''}${((d / base) * 100).toFixed(0)}%)` : '';
  return `${d >= 0 ? '+' : ''}${fmt(d)}${pct}`;
}

export function registerRuns(program: Command): void {
  const runs = program.command('runs').description('list, show and compare recorded runs (read from the state directory)');
  swarmOptions(runs.command('ls')
    .description('list runs, newest first')
    .option('--json', 'print JSON', false))
    .action(async (o: RemoteOptions & { stateDir?: string; json: boolean }) => {
      try {
        const remote = remoteTarget(o);
        if (remote) {
          // A remote swarm's run folders are on its machine: its control API lists them.
          const r = await call<{ runs: { run: string; experiment?: string; topology?: string; state?: string; outcome?: { verdict?: string } }[] }>(remote, 'GET', '/runs');
          if (o.json) { process.stdout.write(JSON.stringify(r) + '\n'); return; }
          if (!r.runs.length) { process.stdout.write('no runs yet\n'); return; }
          for (const v of r.runs) process.stdout.write(`${v.run}  ${(v.topology ?? '-').padEnd(14)} ${(v.outcome?.verdict ?? v.state ?? '-').padEnd(13)} ${v.experiment ?? ''}\n`);
          return;
        }
        const list = listRuns(runsDir(o));
        if (o.json) { process.stdout.write(JSON.stringify({ runs: list.map((r) => ({ run: r.run, experiment: r.passport.experiment, topology: r.passport.topology, verdict: r.result?.verdict ?? 'running', created_at: r.passport.created_at, metrics: r.result?.metrics })) }) + '\n'); return; }
        if (!list.length) { process.stdout.write('no runs yet (start one with `swarm run EXPERIMENT`)\n'); return; }
        process.stdout.write(`${'RUN'.padEnd(list[0]!.run.length)}  ${'TOPOLOGY'.padEnd(14)} ${'VERDICT'.padEnd(13)} ${'NODES'.padStart(5)}        ${'WALL'.padEnd(7)} EXPERIMENT\n`);
        for (const r of list) {
          const m = r.result?.metrics as { nodes?: number; wall_ms?: number } | undefined;
          process.stdout.write(`${r.run}  ${r.passport.topology.padEnd(14)} ${(r.result?.verdict ?? 'running').padEnd(13)} ${String(m?.nodes ?? '-').padStart(5)} nodes  ${(m?.wall_ms !== undefined ? `${(m.wall_ms / 1000).toFixed(1)} s` : '-').padEnd(7)} ${r.passport.experiment}\n`);
        }
      } catch (err) { fail(err, o.json); }
    });
  runs.command('show')
    .description('show a run: its report (report.md), or JSON')
    .argument('<run>', 'run id, or a unique prefix of it (or its last part: the 4 letters after the time)')
    .option('--state-dir <dir>', 'state directory')
    .option('--json', 'print JSON (passport and result)', false)
    .action((id: string, o: { stateDir?: string; json: boolean }) => {
      try {
        const r = need(runsDir(o), id);
        if (o.json) { process.stdout.write(JSON.stringify({ run: r.run, dir: r.dir, passport: r.passport, result: r.result }) + '\n'); return; }
        const md = path.join(r.dir, 'report.md');
        process.stdout.write(fs.existsSync(md) ? fs.readFileSync(md, 'utf8') : `run ${r.run}: still running (no report yet)\n`);
        process.stdout.write(`\nfolder: ${r.dir}\n`);
      } catch (err) { fail(err, o.json); }
    });
  remoteOptions(runs.command('cancel')
    .description('cancel a running run: no more nodes are issued, its outstanding tasks stop on the workers, and it is recorded as cancelled')
    .argument('<run>', 'run id')
    .option('--reason <text>', 'why (recorded in events.jsonl, the report and result.json)', 'cancelled by operator')
    .option('--state-dir <dir>', 'state directory')
    .option('--json', 'print JSON', false))
    .action(async (id: string, o: RemoteOptions & { stateDir?: string; json: boolean; reason: string }) => {
      try {
        const hub = remoteTarget(o) ?? runningHub(stateDir(o.stateDir));
        let full = id;
        try { full = resolveRunId(runsDir(o), id); } catch { /* the hub may know it still */ }
        const v = await call<{ run: string; cancelled: boolean; tasks_cancelled?: number; outcome?: { verdict?: string; reason?: string }; dir: string }>(
          hub, 'POST', `/runs/${encodeURIComponent(full)}/cancel`, { reason: o.reason }, 120_000);
        if (o.json) { process.stdout.write(JSON.stringify(v) + '\n'); return; }
        process.stdout.write(v.cancelled
          ? `run ${v.run} cancelled (${v.tasks_cancelled ?? 0} outstanding task(s) cancelled): ${v.outcome?.reason ?? o.reason}\nfolder: ${v.dir}\n`
          : `run ${v.run} had already ended: ${v.outcome?.verdict ?? 'done'}${v.outcome?.reason ? ` — ${v.outcome.reason}` : ''}\n`);
      } catch (err) { fail(err, o.json); }
    });
  runs.command('compare')
    .description('compare runs: metric deltas against the first')
    .argument('<a>', 'run id')
    .argument('<b...>', 'run id(s)')
    .option('--state-dir <dir>', 'state directory')
    .option('--json', 'print JSON', false)
    .action((a: string, b: string[], o: { stateDir?: string; json: boolean }) => {
      try {
        const dir = runsDir(o);
        const list = [a, ...b].map((id) => need(dir, id));
        if (o.json) {
          const base = list[0]!.result?.metrics as Record<string, number> | undefined;
          process.stdout.write(JSON.stringify({ runs: list.map((r) => ({ run: r.run, verdict: r.result?.verdict, metrics: r.result?.metrics, delta: Object.fromEntries(METRICS.map((k) => [k, Number((r.result?.metrics as Record<string, number> | undefined)?.[k]) - Number(base?.[k])])), same_output: r.result?.output === list[0]!.result?.output })) }) + '\n');
          return;
        }
        process.stdout.write(compareRuns(list) + '\n');
      } catch (err) { fail(err, o.json); }
    });
}
