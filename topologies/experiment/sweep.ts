import { SwarmError } from '../../protocol/index.js';
import type { Experiment } from '../schema.js';
import type { ExperimentResult } from './finalize.js';
import { summarise, type Summary } from './stats.js';

/** One grid axis: a field (dotted path, or the `agents` shorthand) and its values as given. */
export interface Axis { key: string; values: string[] }

/** One cell of a sweep: a point of the grid and a seed, and the run that answered it. */
export interface Cell {
  /** `agents=3 limits.rounds=2 seed=1`: stable, so a resumed sweep finds its cells. */
  key: string;
  params: Record<string, string>;
  seed: number;
  /** sha256 of what the cell runs (resolved experiment, engine, model and dataset hashes): a changed cell runs again. */
  hash?: string;
  /** sha256 of the cell's dataset file, as hashed into `hash`. */
  dataset_sha256?: string;
  run?: string;
  state: 'pending' | 'running' | 'done' | 'failed';
  /** Summary of the run's result (conditions and comparisons), once done. */
  result?: Pick<ExperimentResult, 'conditions' | 'comparisons' | 'budget' | 'items' | 'scorer'>;
  error?: string;
}

/** sweep.json. */
export interface SweepFile {
  experiment: string;
  file: string;
  topology: string;
  /** The experiment's own dataset (the task when the grid has no inputs.dataset axis). */
  dataset?: string;
  grid: Axis[];
  seeds: number;
  base_seed: number;
  /** The engine the cells run on (driver, its options, model), as hashed into each cell. */
  engine?: { driver?: string; driver_opt: Record<string, string>; model?: string };
  /** What ran: drivers and models, from the first finished run's passport. */
  ran?: string;
  simulated?: boolean;
  cells: Cell[];
  updated_at: string;
}

/** Parse `--grid key=v1,v2,v3`. */
export function parseAxis(s: string): Axis {
  const i = s.indexOf('=');
  if (i <= 0) throw new SwarmError('SWARM_ERR_CONFIG', `--grid ${s}: expected key=v1,v2,…`);
  const values = s.slice(i + 1).split(',').map((v) => v.trim()).filter(Boolean);
  if (!values.length) throw new SwarmError('SWARM_ERR_CONFIG', `--grid ${s}: no values`);
  return { key: s.slice(0, i).trim(), values };
}

/** The cartesian product of the axes, times the seeds (base, base+1, …), in a stable order. */
export function cells(axes: Axis[], seeds: number, baseSeed: number): Cell[] {
  let points: Record<string, string>[] = [{}];
  for (const a of axes) points = points.flatMap((p) => a.values.map((v) => ({ ...p, [a.key]: v })));
  const out: Cell[] = [];
  for (const params of points) {
    for (let s = 0; s < seeds; s++) {
      const seed = baseSeed + s;
      out.push({ key: [...Object.entries(params).map(([k, v]) => `${k}=${v}`), `seed=${seed}`].join(' '), params, seed, state: 'pending' });
    }
  }
  return out;
}

/**
 * The `--set` overrides of a cell. `agents=N` is a shorthand per topology: the number of debaters
 * (diamond-debate: the stances, extended with stance<i> or cut), contestants (arena), or voters of
 * the vote baselines (star).
 */
export function cellSets(e: Experiment, c: Cell): string[] {
  const sets: string[] = [];
  for (const [k, v] of Object.entries(c.params)) {
    if (k !== 'agents') { sets.push(`${k}=${v}`); continue; }
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new SwarmError('SWARM_ERR_CONFIG', `--grid agents: ${v} is not a positive integer`);
    if (e.topology === 'diamond-debate') {
      const st = Array.from({ length: n }, (_, i) => e.debate.stances[i] ?? `stance${i + 1}`);
      sets.push(`debate.stances=[${st.join(', ')}]`);
    } else if (e.topology === 'arena') sets.push(`roles.contestant.agents=${n}`);
    else if (e.topology === 'star') sets.push(`baseline.k=${n}`);
    else throw new SwarmError('SWARM_ERR_CONFIG', `--grid agents means debaters (diamond-debate), contestants (arena) or voters (star); for ${e.topology} give a field, e.g. --grid roles.<role>.agents=1,2`);
  }
  sets.push(`seed=${c.seed}`);
  return sets;
}

/** Cells of one grid point (all seeds) and a condition, pooled: per item, the mean score over seeds. */
export interface Group {
  params: Record<string, string>; label: string; condition: string; summary: Summary; tokens_per_item: number; wall_ms_per_item: number; runs: string[]; seeds: number;
  /** Failed items over the seeds' runs. */
  failed: number;
  /** The votes' k (of the first seed's run; a matched k may differ between seeds). */
  k?: number;
}

/**
 * Pool the seeds of each grid point: every item's score is averaged over the seeds first, so the
 * interval is over items (seeds of one item are not independent draws of the task).
 */
export function groups(f: SweepFile, rowsOf: (run: string) => { cells: Record<string, { score: number | null }> }[] | undefined, seed: number): Group[] {
  const byPoint = new Map<string, Cell[]>();
  for (const c of f.cells) {
    if (c.state !== 'done' || !c.result) continue;
    const k = Object.entries(c.params).map(([a, v]) => `${a}=${v}`).join(' ') || '(base)';
    byPoint.set(k, [...(byPoint.get(k) ?? []), c]);
  }
  const out: Group[] = [];
  for (const [label, cs] of byPoint) {
    const conds = cs[0]!.result!.conditions.map((c) => c.name);
    for (const cond of conds) {
      const perItem: number[][] = [];
      for (const c of cs) {
        const rows = rowsOf(c.run!);
        rows?.forEach((r, i) => { const s = r.cells[cond]?.score; if (s !== null && s !== undefined) (perItem[i] ??= []).push(s); });
      }
      const xs = perItem.filter((v) => v?.length).map((v) => v.reduce((a, b) => a + b, 0) / v.length);
      const cstats = cs.map((c) => c.result!.conditions.find((x) => x.name === cond)).filter((x) => x !== undefined);
      out.push({
        params: cs[0]!.params, label, condition: cond, summary: summarise(xs, seed), seeds: cs.length, runs: cs.map((c) => c.run!),
        failed: cstats.reduce((a, x) => a + (x.failed ?? 0), 0), ...(cstats[0]?.k !== undefined ? { k: cstats[0].k } : {}),
        tokens_per_item: cstats.reduce((a, x) => a + x.tokens_per_item, 0) / Math.max(1, cstats.length),
        wall_ms_per_item: cstats.reduce((a, x) => a + x.wall_ms_per_item, 0) / Math.max(1, cstats.length),
      });
    }
  }
  return out;
}
