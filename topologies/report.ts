import type { Passport } from './passport.js';
import type { RunOutcome } from './runner.js';
import { graphSvg, rolesSvg, timelineSvg } from './svg.js';

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
}

export interface RunMetrics {
  nodes: number;
  done: number;
  failed: number;
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
    ...p.models.map((x) => `- model (${x.role}): ${x.path}${x.sha256 ? ` sha256 ${x.sha256.slice(0, 16)}…, ${x.size} bytes` : ` (${x.error})`}`),
    '', '## Metrics', '',
    `| nodes | done | failed | tokens out | wall s | tokens/s | p50 ms | p95 ms | max ms |`,
    `|---|---|---|---|---|---|---|---|---|`,
    `| ${m.nodes} | ${m.done} | ${m.failed} | ${m.tokens_out} | ${fmt(m.wall_ms / 1000, 2)} | ${fmt(m.tokens_per_s, 1)} | ${fmt(m.latency_p50_ms)} | ${fmt(m.latency_p95_ms)} | ${fmt(m.latency_max_ms)} |`,
    '', '| role | nodes | failed | tokens out | mean latency ms |', '|---|---|---|---|---|',
    ...Object.entries(m.roles).map(([k, v]) => `| ${k} | ${v.nodes} | ${v.failed} | ${v.tokens_out} | ${fmt(v.latency_mean_ms)} |`),
    '', '## Output', '', '```', (o?.output ?? '').slice(0, 20_000), '```', '',
    '## Nodes', '', '| node | role | state | worker | latency ms | tokens out |', '|---|---|---|---|---|---|',
    ...r.nodes.slice(0, 1000).map((n) => `| ${n.node} | ${n.role} | ${n.state}${n.error ? ` (${n.error.code})` : ''} | ${n.worker ?? ''} | ${fmt(latency(n))} | ${n.tokens_out ?? ''} |`),
    ...(r.nodes.length > 1000 ? [`| … ${r.nodes.length - 1000} more | | | | | |`] : []),
    '',
  ];
  return lines.join('\n');
}

export const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** A self-contained page: no scripts, no external assets; charts are inline SVG. */
export function renderHtml(r: RunReport): string {
  const p = r.passport, o = r.outcome, m = r.metrics;
  const verdict = o?.verdict ?? 'running';
  const good = /^(approved|passed|pass|done|winner)$/.test(verdict);
  const rows = r.nodes.slice(0, 1000).map((n) => `<tr class="${n.state}"><td>${esc(n.node)}</td><td>${esc(n.role)}</td><td>${n.state}${n.error ? ` <small>${esc(n.error.code)}</small>` : ''}</td><td>${esc(n.worker ?? '')}</td><td>${fmt(latency(n))}</td><td>${n.tokens_out ?? ''}</td></tr>`).join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(p.experiment)} · ${esc(p.run)}</title>
<style>body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}.badge{display:inline-block;padding:2px 10px;border-radius:10px;color:#fff;background:${good ? '#2e7d32' : '#c62828'}}
table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #eee;padding:3px 8px;text-align:left}tr.failed td{color:#c62828}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px}dt{color:#666}pre{background:#f6f6f6;padding:10px;white-space:pre-wrap;max-height:300px;overflow:auto}
svg{max-width:100%;height:auto;border:1px solid #eee}</style></head><body>
<h1>${esc(p.experiment)} <small>(${esc(p.topology)}, run ${esc(p.run)})</small></h1>
<p><span class="badge">${esc(verdict)}</span> ${esc(o?.reason ?? '')}</p>
<dl>${highlights(o).map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join('')}
<dt>nodes</dt><dd>${m.nodes} (${m.failed} failed)</dd><dt>wall time</dt><dd>${fmt(m.wall_ms / 1000, 2)} s</dd>
<dt>tokens out</dt><dd>${m.tokens_out} (${fmt(m.tokens_per_s, 1)} tokens/s)</dd><dt>latency p50 / p95 / max</dt><dd>${fmt(m.latency_p50_ms)} / ${fmt(m.latency_p95_ms)} / ${fmt(m.latency_max_ms)} ms</dd>
<dt>seed, temperature</dt><dd>${p.seed}, ${p.temperature}</dd><dt>host</dt><dd>${esc(p.host.hostname)}, ${p.host.cpus} × ${esc(p.host.cpu_model)}, node ${esc(p.host.node)}</dd>
${p.models.map((x) => `<dt>model (${esc(x.role)})</dt><dd>${esc(path(x.path))} ${x.sha256 ? `<small>sha256 ${x.sha256.slice(0, 16)}…, ${x.size} bytes</small>` : esc(x.error ?? '')}</dd>`).join('')}</dl>
<h2>Graph</h2>${graphSvg(r.nodes)}
<h2>Timeline</h2>${timelineSvg(r.nodes)}
<h2>Tokens and latency by role</h2>${rolesSvg(m)}
<h2>Output</h2><pre>${esc((o?.output ?? '').slice(0, 20_000))}</pre>
<h2>Nodes</h2><table><tr><th>node</th><th>role</th><th>state</th><th>worker</th><th>latency ms</th><th>tokens out</th></tr>${rows}</table>
${r.nodes.length > 1000 ? `<p>… ${r.nodes.length - 1000} more nodes in events.jsonl</p>` : ''}
</body></html>
`;
}

function path(p: string): string { return p.split('/').slice(-2).join('/'); }
