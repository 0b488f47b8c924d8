import { topology } from '../registry.js';
import { render } from '../template.js';
import type { Experiment } from '../schema.js';
import { voteKey } from '../scorers/index.js';
import type { NodeResult, NodeTask, Results, RunSpec, Step, Topology } from '../types.js';
import type { DatasetItem } from './dataset.js';

/** One condition's answer to one item, once it is known. */
export interface UnitDone {
  cond: string;
  item: number;
  answer: string;
  verdict?: string;
  reason?: string;
  /** The nodes that produced the answer (the grader's excluded): their tokens are the condition's cost. */
  nodes: string[];
  /** The node whose output is the answer (the merger, the vote's winner…), for drill-down. */
  final?: string;
  /** The grader's node, when the judge scorer grades it. */
  grade?: string;
  /** Agents of a vote. */
  k?: number;
}

/** How the votes' k was matched to the topology's measured cost. */
export interface Budget {
  k: number;
  method: 'given' | 'tokens' | 'calls';
  topology_per_item: number;
  single_per_item: number;
  calibration_items: number;
  /** The k that matching asked for, before the k_max cap (absent when given). */
  wanted?: number;
  /** k_max cut the matched k: the votes spend less than the topology. */
  capped?: boolean;
  text: string;
  /** What each condition spent over the whole run (set when the run is scored). */
  spent?: { topology_per_item: number; votes: { condition: string; tokens_per_item: number; vs_topology: number }[] };
}

/** The conditions of an experiment: its topology first, then the baselines (single is added when k is matched to it). */
export function conditionsOf(e: Experiment): string[] {
  const b = new Set<string>(e.baselines);
  if (e.baseline.k === undefined && (b.has('majority_vote') || b.has('self_consistency'))) b.add('single');
  return [e.topology, ...['single', 'majority_vote', 'self_consistency'].filter((x) => b.has(x))];
}

/** A view of the results under one unit's prefix that remembers which of its nodes were looked at. */
class Scoped {
  readonly seen = new Set<string>();
  constructor(private readonly results: Results, private readonly prefix: string) {}
  get(node: string): NodeResult | undefined {
    const r = this.results.get(this.prefix + node);
    if (r) this.seen.add(this.prefix + node);
    return r;
  }
  has(node: string): boolean { return this.results.has(this.prefix + node); }
}

/**
 * What a runner's results map has shown so far, kept beside it (results only grow): finished units,
 * units started and not finished, units waiting for the votes' k, and the first unit never looked
 * at. A step then costs the running units, not every unit of the dataset.
 */
interface Progress { done: Map<string, UnitDone>; started: Set<string>; deferred: Set<string>; cursor: number }
const progress = new WeakMap<Results, Progress>();
const budgets = new WeakMap<Results, Budget>();

/**
 * Runs an experiment over a dataset: every condition (the topology, each baseline) once per item,
 * node ids prefixed `<condition>/<item index>/`, at most `inputs.concurrency` units running at once
 * (item by item, so early items finish first). Pure in (spec, results) up to which units run first:
 * a resumed run rebuilds the same units and nodes.
 */
export const experimentTopology: Topology = {
  name: 'experiment',
  roles: (e) => [...topology(e.topology).roles(e)],
  defaults: {},
  next(spec, results, skip): Step {
    const e = spec.experiment, items = spec.inputs.dataset ?? [];
    // An exec scorer runs a command of the experiment's on the host that drives the run: only where its operator said so.
    if (e.scorer?.type === 'exec' && process.env.SWARM_EXEC_SCORERS !== '1') {
      return { tasks: [], done: { output: '', verdict: 'failed', reason: 'exec scorers run the experiment\'s command on the hub\'s host, and this hub does not allow it: start the swarm with SWARM_EXEC_SCORERS=1 in its environment' } };
    }
    const conds = conditionsOf(e);
    const total = items.length * conds.length;
    let st = progress.get(results);
    if (!st) { st = { done: new Map(), started: new Set(), deferred: new Set(), cursor: 0 }; progress.set(results, st); }
    const tasks: NodeTask[] = [];
    let active = 0;
    const unitAt = (key: string) => { const slash = key.lastIndexOf('/'); return { cond: key.slice(0, slash), i: Number(key.slice(slash + 1)) }; };
    /** Step one unit; true when it runs now (counts against the window). */
    const visit = (key: string, cond: string, i: number): 'done' | 'blocked' | 'running' => {
      const u = unitStep(spec, results, skip, cond, i, items[i]!);
      if (u.done) { st.done.set(key, u.done); return 'done'; }
      if (u.blocked) return 'blocked';
      tasks.push(...u.tasks);
      return 'running';
    };
    for (const key of [...st.started]) {
      const { cond, i } = unitAt(key);
      if (visit(key, cond, i) === 'done') st.started.delete(key); else active++;
    }
    for (const key of [...st.deferred]) {
      if (active >= e.inputs.concurrency) break;
      const { cond, i } = unitAt(key);
      const r = visit(key, cond, i);
      if (r === 'blocked') break; // the votes' k is not known yet: none of them can start
      st.deferred.delete(key);
      if (r === 'running') { st.started.add(key); active++; }
    }
    while (active < e.inputs.concurrency && st.cursor < total) {
      const i = Math.floor(st.cursor / conds.length), cond = conds[st.cursor % conds.length]!;
      const key = `${cond}/${i}`;
      st.cursor++;
      if (st.done.has(key)) continue;
      const r = visit(key, cond, i);
      if (r === 'blocked') st.deferred.add(key);
      else if (r === 'running') { st.started.add(key); active++; }
    }
    if (st.started.size || st.deferred.size || st.cursor < total) return { tasks };
    const units = [...st.done.values()].sort((a, b) => a.item - b.item || conds.indexOf(a.cond) - conds.indexOf(b.cond));
    return {
      tasks: [],
      done: {
        output: `${items.length} items × ${conds.length} conditions (${conds.join(', ')})`,
        verdict: 'scored',
        details: { units, ...(budgets.get(results) ? { budget: budgets.get(results) } : {}) },
      },
    };
  },
};

interface UnitStep { tasks: NodeTask[]; done?: UnitDone; blocked?: boolean }

const innerSpecs = new WeakMap<RunSpec, RunSpec[]>();

/** The run spec of one item: its input is the run's whole input. */
function itemSpec(spec: RunSpec, i: number, item: DatasetItem): RunSpec {
  const list = innerSpecs.get(spec) ?? [];
  innerSpecs.set(spec, list);
  return (list[i] ??= { experiment: spec.experiment, inputs: { text: item.input, items: [item.input], chunks: [{ source: item.id, index: 0, text: item.input }] } });
}

function unitStep(spec: RunSpec, results: Results, skip: { has(n: string): boolean } | undefined, cond: string, i: number, item: DatasetItem): UnitStep {
  const e = spec.experiment, prefix = `${cond}/${i}/`;
  const view = new Scoped(results, prefix);
  const skipView = { has: (n: string) => skip?.has(prefix + n) ?? false };
  let answer: Omit<UnitDone, 'cond' | 'item' | 'nodes'> | undefined;
  let tasks: NodeTask[] = [];
  if (cond === e.topology) {
    const step = topology(e.topology).next(itemSpec(spec, i, item), view as unknown as Results, skipView);
    if (step.done) {
      const final = lastSeen(view);
      const bad = final !== undefined && results.get(final)?.ok === false;
      // A failed node's error text is no answer: the unit is failed, never scored as if it were one.
      answer = bad || FAILED_VERDICTS.has(step.done.verdict ?? '')
        ? { answer: '', verdict: 'failed', reason: step.done.reason ?? (bad ? `${final} failed` : step.done.verdict), final }
        : { answer: step.done.output, verdict: step.done.verdict, reason: step.done.reason, final };
    }
    else tasks = step.tasks.map((t) => scope(e, t, prefix, item));
  } else {
    const k = cond === 'single' ? 1 : budget(spec, results)?.k;
    if (k === undefined) return { tasks: [], blocked: true };
    const vars = { ...item.fields, input: item.input };
    const agents = Array.from({ length: k }, (_, j) => (cond === 'single' ? 'answer' : `a${j}`));
    const got: { node: string; r: NodeResult }[] = [];
    for (const a of agents) {
      const r = view.get(a);
      if (r) { got.push({ node: prefix + a, r }); continue; }
      if (skipView.has(a)) continue;
      const role = e.roles.baseline!;
      tasks.push({
        node: prefix + a, role: 'baseline', prompt: render(role.prompt ?? '{{input}}', vars), input: { ...vars, item_id: item.id, condition: cond },
        ...(role.json_schema ? { json_schema: role.json_schema } : {}),
        ...(cond === 'self_consistency' ? { temperature: e.baseline.temperature } : {}),
      });
    }
    if (got.length === agents.length) answer = vote(e, got, cond === 'single' ? undefined : k);
  }
  if (!answer) return { tasks };
  const nodes = [...view.seen];
  if (e.scorer?.type === 'judge' && answer.verdict !== 'failed') {
    const g = view.get('grade');
    if (!g) {
      if (skipView.has('grade')) return { tasks: [] };
      const role = e.roles.grader!;
      const vars = { ...item.fields, input: item.input, expected: item.expected, answer: answer.answer };
      return {
        tasks: [{ node: `${prefix}grade`, role: 'grader', prompt: render(role.prompt ?? '', vars), input: { ...vars, item_id: item.id, condition: cond }, ...(role.json_schema ? { json_schema: role.json_schema } : {}), after: answer.final ? [answer.final] : [] }],
      };
    }
    return { tasks: [], done: { cond, item: i, ...answer, nodes, grade: `${prefix}grade` } };
  }
  return { tasks: [], done: { cond, item: i, ...answer, nodes } };
}

/** Topology verdicts that mean the unit has no answer (a node failed). */
const FAILED_VERDICTS = new Set(['failed', 'partial']);

/** The last node a finished topology looked at: its final node (merger, guard, last stage). */
function lastSeen(view: Scoped): string | undefined { return [...view.seen].at(-1); }

/** A topology's task, moved under the unit's prefix, its prompt rendered with the item's fields too. */
function scope(e: Experiment, t: NodeTask, prefix: string, item: DatasetItem): NodeTask {
  const tpl = e.roles[t.role]?.prompt;
  const vars = { ...item.fields, ...t.input };
  return {
    ...t, node: prefix + t.node, prompt: tpl !== undefined ? render(tpl, vars) : t.prompt, input: { ...t.input, item_id: item.id },
    ...(t.after ? { after: t.after.map((a) => prefix + a) } : {}),
  };
}

/** Plurality of the agents' answers as the scorer reads them; ties go to the answer given first. */
function vote(e: Experiment, got: { node: string; r: NodeResult }[], k: number | undefined): Omit<UnitDone, 'cond' | 'item' | 'nodes'> {
  const counts = new Map<string, { n: number; first: number }>();
  got.forEach(({ r }, j) => {
    if (!r.ok) return;
    const key = voteKey(e.scorer, r.text);
    if (!key) return;
    const c = counts.get(key);
    if (c) c.n++; else counts.set(key, { n: 1, first: j });
  });
  let best: { n: number; first: number } | undefined;
  for (const c of counts.values()) if (!best || c.n > best.n || (c.n === best.n && c.first < best.first)) best = c;
  const pick = best ? got[best.first]! : got.find((g) => g.r.ok) ?? got[0]!;
  const failed = got.filter((g) => !g.r.ok).length;
  return {
    answer: pick.r.ok ? pick.r.text : '', final: pick.node, ...(k !== undefined ? { k } : {}),
    verdict: failed === got.length ? 'failed' : 'answered',
    ...(k !== undefined && best ? { reason: `${best.n} of ${got.length} agents agree${failed ? `; ${failed} failed` : ''}` } : {}),
  };
}

/**
 * A receipt's tokens as compute: prompt tokens the engine evaluated (tokens_in less those its prefix
 * cache already held), cached prompt tokens, output tokens.
 */
export function computedTokens(rc: NonNullable<NodeResult['receipt']>): { prompt: number; cached: number; out: number } {
  const cached = Math.min(rc.tokens_cached ?? 0, rc.tokens_in ?? 0);
  return { prompt: (rc.tokens_in ?? 0) - cached, cached, out: rc.tokens_out ?? 0 };
}

/** Computed tokens (evaluated prompt + output) the given nodes used. */
function tokensOf(results: Results, nodes: string[]): number {
  let s = 0;
  for (const n of nodes) { const rc = results.get(n)?.receipt; if (rc) { const t = computedTokens(rc); s += t.prompt + t.out; } }
  return s;
}

/**
 * The votes' k: given, or matched to the topology's measured cost per item: k = round(topology
 * tokens per item / single-agent tokens per item) over the first `calibration_items` items of both,
 * clamped to [1, k_max]; model calls per item when no engine reports tokens. Undefined until those
 * items are done.
 */
export function budget(spec: RunSpec, results: Results): Budget | undefined {
  const e = spec.experiment;
  const hit = budgets.get(results);
  if (hit) return hit;
  if (e.baseline.k !== undefined) {
    const b: Budget = { k: e.baseline.k, method: 'given', topology_per_item: NaN, single_per_item: NaN, calibration_items: 0, text: `k = ${e.baseline.k}, as given (baseline.k)` };
    budgets.set(results, b);
    return b;
  }
  const memo = progress.get(results)?.done;
  const n = Math.min(e.baseline.calibration_items, spec.inputs.dataset?.length ?? 0);
  const topo: UnitDone[] = [], single: UnitDone[] = [];
  for (let i = 0; i < n; i++) {
    const t = memo?.get(`${e.topology}/${i}`), s = memo?.get(`single/${i}`);
    if (!t || !s) return undefined;
    topo.push(t); single.push(s);
  }
  const per = (us: UnitDone[], f: (u: UnitDone) => number) => us.reduce((a, u) => a + f(u), 0) / Math.max(1, us.length);
  let method: Budget['method'] = 'tokens';
  let tp = per(topo, (u) => tokensOf(results, u.nodes)), sp = per(single, (u) => tokensOf(results, u.nodes));
  if (!(sp > 0)) { method = 'calls'; tp = per(topo, (u) => u.nodes.length); sp = per(single, (u) => u.nodes.length); }
  const wanted = Math.round(tp / Math.max(sp, 1e-9));
  const k = Math.max(1, Math.min(e.baseline.k_max, wanted));
  const capped = wanted > e.baseline.k_max;
  const unit = method === 'tokens' ? 'computed tokens (evaluated prompt + output; prefix-cache hits excluded)' : 'model calls';
  const b: Budget = {
    k, method, topology_per_item: tp, single_per_item: sp, calibration_items: n, wanted, capped,
    text: `k = round(${tp.toFixed(1)} / ${sp.toFixed(1)}) = ${wanted}${k !== wanted ? `, clamped to ${k}` : ''}: ${e.topology}'s ${unit} per item over a single agent's, measured on the first ${n} item(s)`
      + (capped ? `; k_max = ${e.baseline.k_max} caps it, so the votes' budget is about ${Math.round((1 - k / wanted) * 100)}% below the topology's: not equal compute` : ''),
  };
  budgets.set(results, b);
  return b;
}
