import type { Passport } from './passport.js';
import type { RunOutcome } from './runner.js';
import { graphSvg, legend, rolesSvg, timelineSvg } from './svg.js';
import { nodeDetailsHtml } from './report-nodes.js';

/** One node as the report sees it. */
export interface NodeRecord {
  node: string;
  role: string;
  after: string[];
  wave: number;
  /** `cancelled`: still running when its run was cancelled. */
  state: 'running' | 'done' | 'failed' | 'cancelled';
  submitted_at: number;
  finished_at?: number;
  worker?: string;
  error?: { code: string; msg: string };
  tokens_in?: number;
  tokens_out?: number;
  duration_ms?: number;
  ttft_ms?: number;
  tokens_per_s?: number;
  /** A structured answer's decision (verdict, action, winner, scores), for the graph and the table. */
  verdict?: string;
  /** The rendered prompt and the output, clipped (report-nodes.ts), for the report's drill-down. */
  prompt?: string;
  output?: string;
}

export interface RunMetrics {
  nodes: number;
  done: number;
  failed: number;
  /** Nodes still running when their run was cancelled. */
  cancelled: number;
  tokens_in: number;
  tokens_out: number;
  wall_ms: number;
  tokens_per_s: number;
  latency_p50_ms: number;
  latency_p95_ms: number;
  latency_max_ms: number;
  roles: Record<string, { nodes: number; failed: number; tokens_out: number; latency_mean_ms: number }>;
}

export interface RunReport { passport: Passport; outcome?: RunOutcome; nodes: NodeRecord[]; metrics: RunMetrics }

/** A node's latency: the worker's measured duration, else the wall time the runner saw. */
export const latency = (n: NodeRecord): number => n.duration_ms ?? (n.finished_at !== undefined ? n.finished_at - n.submitted_at : 0);

export function summarize(nodes: NodeRecord[], startedAt: number, outcome?: RunOutcome): RunMetrics {
  const fin = nodes.filter((n) => n.state === 'done' || n.state === 'failed');
  const lat = fin.map(latency).sort((a, b) => a - b);
  const q = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]! : 0);
  const wall = outcome?.progress.elapsed_ms ?? Math.max(0, ...fin.map((n) => (n.finished_at ?? startedAt) - startedAt));
  const tokensOut = fin.reduce((s, n) => s + (n.tokens_out ?? 0), 0);
  const roles: RunMetrics['roles'] = {};
  for (const n of fin) {
    const r = (roles[n.role] ??= { nodes: 0, failed: 0, tokens_out: 0, latency_mean_ms: 0 });
    r.nodes++;
    if (n.state === 'failed') r.failed++;
    r.tokens_out += n.tokens_out ?? 0;
    r.latency_mean_ms += (latency(n) - r.latency_mean_ms) / r.nodes;
  }
  return {
    nodes: nodes.length, done: fin.filter((n) => n.state === 'done').length, failed: fin.filter((n) => n.state === 'failed').length,
    cancelled: nodes.filter((n) => n.state === 'cancelled').length,
    tokens_in: fin.reduce((s, n) => s + (n.tokens_in ?? 0), 0), tokens_out: tokensOut, wall_ms: wall,
    tokens_per_s: wall > 0 ? (tokensOut * 1000) / wall : 0,
    latency_p50_ms: q(0.5), latency_p95_ms: q(0.95), latency_max_ms: lat.at(-1) ?? 0, roles,
  };
}

const fmt = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '-');

/** Facts worth a line at the top: winner, kappa, rounds, where a chain stopped. */
function highlights(o?: RunOutcome): [string, string][] {
  const d = o?.details ?? {};
  const out: [string, string][] = [];
  if (d.winner !== undefined) out.push(['winner', `contestant ${String(d.winner)} (${String(d.winner_node)})`]);
  if (d.kappa !== undefined) out.push([`judges' agreement (${String(d.kappa_method)} kappa)`, d.kappa === null ? 'undefined (all ratings in one category)' : fmt(d.kappa as number, 3)]);
  if (d.means) out.push(['mean scores', (d.means as number[]).map((m) => fmt(m, 2)).join(', ')]);
  if (d.wins) out.push(['pairwise wins', (d.wins as number[]).join(', ')]);
  if (d.rounds !== undefined) out.push(['rounds', String(d.rounds)]);
  if (d.turns_used !== undefined) out.push(['turns used', String(d.turns_used)]);
  if (d.stopped_at !== undefined) out.push(['stopped at', String(d.stopped_at)]);
  if (d.chunks !== undefined) out.push(['chunks / reducers / levels', `${String(d.chunks)} / ${String(d.reducers)} / ${String(d.levels)}`]);
  return out;
}

export function renderMarkdown(r: RunReport): string {
  const p = r.passport, o = r.outcome, m = r.metrics;
  const lines = [
    `# Run ${p.run}: ${p.experiment} (${p.topology})`, '',
    `- verdict: **${o?.verdict ?? 'running'}**${o?.reason ? ` — ${o.reason}` : ''}`,
    ...highlights(o).map(([k, v]) => `- ${k}: ${v}`),
    `- seed ${p.seed}, temperature ${p.temperature}, swarm ${p.swarm_version}, ${p.host.hostname} (${p.host.cpus} CPUs)`,
    ...byModel(p.models).map(({ roles, m: x }) => `- model (${roles.join(', ')}): ${x.path}${x.sha256 ? ` sha256 ${x.sha256.slice(0, 16)}…, ${x.size} bytes` : ` (${x.error})`}`),
    '', '## Metrics', '',
    `| nodes | done | failed | cancelled | tokens out | wall s | tokens/s | p50 ms | p95 ms | max ms |`,
    `|---|---|---|---|---|---|---|---|---|---|`,
    `| ${m.nodes} | ${m.done} | ${m.failed} | ${m.cancelled} | ${m.tokens_out} | ${fmt(m.wall_ms / 1000, 2)} | ${fmt(m.tokens_per_s, 1)} | ${fmt(m.latency_p50_ms)} | ${fmt(m.latency_p95_ms)} | ${fmt(m.latency_max_ms)} |`,
    '', '| role | nodes | failed | tokens out | mean latency ms |', '|---|---|---|---|---|',
    ...Object.entries(m.roles).map(([k, v]) => `| ${k} | ${v.nodes} | ${v.failed} | ${v.tokens_out} | ${fmt(v.latency_mean_ms)} |`),
    '', '## Output', '', '```', (o?.output ?? '').slice(0, 20_000), '```', '',
    '## Nodes', '', '| node | role | state | answer | worker | latency ms | tokens out |', '|---|---|---|---|---|---|---|',
    ...r.nodes.slice(0, 1000).map((n) => `| ${n.node} | ${n.role} | ${n.state}${n.error ? ` (${n.error.code})` : ''} | ${n.verdict ?? ''} | ${n.worker ?? ''} | ${n.finished_at !== undefined ? fmt(latency(n)) : '-'} | ${n.tokens_out ?? ''} |`),
    ...(r.nodes.length > 1000 ? [`| … ${r.nodes.length - 1000} more | | | | | | |`] : []),
    '',
  ];
  return lines.join('\n');
}

export const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** A self-contained page: no scripts, no external assets; charts are inline SVG. */
export function renderHtml(r: RunReport): string {
  const p = r.passport, o = r.outcome, m = r.metrics;
  const verdict = o?.verdict ?? 'running';
  const tone = /^(approved|passed|pass|done|winner)$/.test(verdict) ? '#2e7d32' : /^(failed|fail|rejected|stopped)$/.test(verdict) ? '#c62828' : '#ef6c00';
  const rows = r.nodes.slice(0, 1000).map((n) => `<tr class="${n.state}"><td>${esc(n.node)}</td><td>${esc(n.role)}</td><td>${n.state}${n.error ? ` <small>${esc(n.error.code)}</small>` : ''}</td><td>${esc(n.verdict ?? '')}</td><td>${esc(n.worker ?? '')}</td><td>${n.finished_at !== undefined ? fmt(latency(n)) : '-'}</td><td>${n.tokens_out ?? ''}</td></tr>`).join('');
  const d = o?.details ?? {};
  const mark = new Set([d.winner_node, d.node].filter((x): x is string => typeof x === 'string'));
  const output = (o?.output ?? '').slice(0, 20_000);
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(p.experiment)} · ${esc(p.run)}</title>
<style>body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}.badge{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;background:${tone}}
table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #eee;padding:3px 8px;text-align:left}tr.failed td,td.failed{color:#c62828}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px}dt{color:#666}pre{background:#f6f6f6;padding:10px;white-space:pre-wrap;max-height:300px;overflow:auto}
svg{max-width:100%;height:auto;border:1px solid #eee}.legend{font-size:12px;color:#555}.legend span{margin-right:14px}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
td.win{font-weight:bold;background:#fff8e1}.muted{color:#777}</style></head><body>
<h1>${esc(p.experiment)} <small>(${esc(p.topology)}, run ${esc(p.run)})</small></h1>
<p><span class="badge">${esc(verdict)}</span> ${esc(o?.reason ?? '')}</p>
<dl>${highlights(o).map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join('')}
<dt>nodes</dt><dd>${m.nodes} (${nodeCounts(r.nodes)})</dd><dt>wall time</dt><dd>${fmt(m.wall_ms / 1000, 2)} s</dd>
<dt>tokens out</dt><dd>${m.tokens_out} (${fmt(m.tokens_per_s, 1)} tokens/s)</dd><dt>latency p50 / p95 / max</dt><dd>${fmt(m.latency_p50_ms)} / ${fmt(m.latency_p95_ms)} / ${fmt(m.latency_max_ms)} ms</dd>
<dt>seed, temperature</dt><dd>${p.seed}, ${p.temperature}</dd><dt>host</dt><dd>${esc(p.host.hostname)}, ${p.host.cpus} × ${esc(p.host.cpu_model)}, node ${esc(p.host.node)}</dd>
${byModel(p.models).map(({ roles, m: x }) => `<dt>model (${esc(roles.join(', '))})</dt><dd>${esc(path(x.path))} ${x.sha256 ? `<small>sha256 ${x.sha256.slice(0, 16)}…, ${x.size} bytes</small>` : esc(x.error ?? '')}</dd>`).join('')}</dl>
${p.config?.inputs?.dataset !== undefined ? datasetGraph(r) : `<h2>Graph</h2>${graphSvg(r.nodes, mark)}${legend()}${mark.size ? `<p class="legend">outlined: ${[...mark].map(esc).join(', ')}</p>` : ''}`}
${arenaTable(d)}
<h2>Timeline</h2>${timelineSvg(r.nodes, m.wall_ms)}
<h2>Tokens and latency by role</h2>${rolesSvg(m)}
<h2>Output</h2>${output ? `<pre>${esc(output)}</pre>` : `<p class="muted">(no output${o ? `: ${esc(o.verdict ?? 'ended')}${o.reason ? `, ${esc(o.reason)}` : ''}` : ' yet'})</p>`}
<h2>Nodes</h2><table><tr><th>node</th><th>role</th><th>state</th><th>answer</th><th>worker</th><th>latency ms</th><th>tokens out</th></tr>${rows}</table>
${r.nodes.length > 1000 ? `<p>… ${r.nodes.length - 1000} more nodes in events.jsonl</p>` : ''}
${nodeDetailsHtml(r.nodes)}
</body></html>
`;
}

function path(p: string): string { return p.split('/').slice(-2).join('/'); }

const MAX_ITEM_ROWS = 500;

/**
 * A dataset run repeats one small graph per item and condition: one graph of hundreds of nodes is
 * unreadable, so the page draws the first item's topology graph and a table of every item instead.
 */
function datasetGraph(r: RunReport): string {
  const topo = r.passport.topology;
  const first = r.nodes.filter((n) => n.node.startsWith(`${topo}/0/`));
  const units = new Map<string, { item: number; cond: string; nodes: number; failed: number; tokens: number }>();
  const conds: string[] = [];
  for (const n of r.nodes) {
    const m = /^([^/]+)\/(\d+)\//.exec(n.node);
    if (!m) continue;
    const [, cond, item] = m;
    if (!conds.includes(cond!)) conds.push(cond!);
    const k = `${cond}/${item}`;
    const u = units.get(k) ?? { item: Number(item), cond: cond!, nodes: 0, failed: 0, tokens: 0 };
    u.nodes++; if (n.state === 'failed') u.failed++; u.tokens += (n.tokens_in ?? 0) + (n.tokens_out ?? 0);
    units.set(k, u);
  }
  const items = [...new Set([...units.values()].map((u) => u.item))].sort((a, b) => a - b);
  const body = items.slice(0, MAX_ITEM_ROWS).map((i) => `<tr><td>${i}</td>${conds.map((c) => {
    const u = units.get(`${c}/${i}`);
    return u ? `<td${u.failed ? ' class="failed"' : ''}>${u.nodes} node${u.nodes === 1 ? '' : 's'}${u.failed ? `, ${u.failed} failed` : ''} · ${u.tokens} tokens</td>` : '<td></td>';
  }).join('')}</tr>`).join('');
  return `<h2>Graph of item 0 (${esc(topo)})</h2>${first.length ? graphSvg(first, new Set()) : '<p class="muted">(no node of item 0 yet)</p>'}${legend()}
<p class="muted">Every item runs the same graph under its own prefix (<code>${esc(topo)}/&lt;item&gt;/…</code>); the answers and scores are in <a href="experiment.html">experiment.html</a>.</p>
<h2>Items</h2><table><tr><th>item</th>${conds.map((c) => `<th>${esc(c)}</th>`).join('')}</tr>${body}</table>${items.length > MAX_ITEM_ROWS ? `<p class="muted">… ${items.length - MAX_ITEM_ROWS} more items</p>` : ''}`;
}

/** `8 done, 2 cancelled`: the states the nodes are in. */
function nodeCounts(nodes: NodeRecord[]): string {
  const c = new Map<string, number>();
  for (const n of nodes) c.set(n.state, (c.get(n.state) ?? 0) + 1);
  return [...c].map(([k, v]) => `${v} ${k}`).join(', ') || 'none';
}

/** Roles that share a model file, together (a one-model run lists it once). */
function byModel(models: Passport['models']): { roles: string[]; m: Passport['models'][number] }[] {
  const out = new Map<string, { roles: string[]; m: Passport['models'][number] }>();
  for (const m of models) {
    const k = `${m.path}\u0000${m.sha256 ?? m.error ?? ''}`;
    const g = out.get(k);
    if (g) g.roles.push(m.role); else out.set(k, { roles: [m.role], m });
  }
  return [...out.values()];
}

/** Arena: every judge's scores (rubric) or wins (pairwise) per contestant, the winner's column marked. */
function arenaTable(d: Record<string, unknown>): string {
  const means = d.means as number[] | undefined, wins = d.wins as number[] | undefined;
  const per = means ?? wins;
  if (!per) return '';
  const win = typeof d.winner === 'number' ? d.winner : -1;
  const cell = (v: string, i: number) => `<td${i === win ? ' class="win"' : ''}>${v}</td>`;
  const head = `<tr><th></th>${per.map((_, i) => `<th>contestant ${i}${i === win ? ' (winner)' : ''}</th>`).join('')}</tr>`;
  // Rubric: each usable judge's scores. Pairwise: each judge's wins per contestant, from its picks.
  const pairs = (d.pairs as [number, number][] | undefined) ?? [];
  const rowsOf = means ? ((d.scores as number[][] | undefined) ?? [])
    : ((d.ratings as (string | null)[][] | undefined) ?? []).map((picks) => {
      const w = per.map(() => 0);
      picks.forEach((p, k) => { const pair = pairs[k]; if (pair && (p === 'A' || p === 'B')) w[p === 'A' ? pair[0] : pair[1]]!++; });
      return w;
    });
  const judges = rowsOf.map((row, j) => `<tr><td>judge ${j}</td>${row.map((v, i) => cell(String(v), i)).join('')}</tr>`).join('');
  const total = `<tr><td><b>${means ? 'mean' : 'wins'}</b></td>${per.map((v, i) => cell(means ? fmt(v, 2) : String(v), i)).join('')}</tr>`;
  return `<h2>Judges</h2><table>${head}${judges}${total}</table>${Number(d.judges_invalid) > 0 ? `<p class="muted">${String(d.judges_invalid)} judge(s) gave no usable score and are left out.</p>` : ''}`;
}
