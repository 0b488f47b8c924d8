import { MARKERS, PALETTE, chart, type Series } from './charts.js';
import type { Group, SweepFile } from './sweep.js';
import { formatMcNemar } from './stats.js';
import { taskTable, taskTableHtml } from './task-table.js';

const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : '-');
const MAX_ITEMS = 300;

export interface SweepPage {
  file: SweepFile;
  groups: Group[];
  /** Items (id, expected) and, per run, each item's cells, for the per-item table. */
  items: { id: string; expected: string }[];
  rowsOf: (run: string) => { cells: Record<string, { score: number | null }> }[] | undefined;
  /** Link to a run's experiment page from the sweep folder. */
  href: (run: string) => string;
}

/** A colour from red (0) through amber to green (1). */
function heat(s: number): string {
  const h = Math.round(120 * Math.max(0, Math.min(1, s)));
  return `hsl(${h} 60% 55%)`;
}

/** sweep.html: accuracy against each grid axis and against tokens, with 95% intervals; a per-item grid one click from each answer. */
export function sweepHtml(p: SweepPage): string {
  const f = p.file, g = p.groups;
  const conds = [...new Set(g.map((x) => x.condition))];
  const charts: string[] = [];
  const short = (k: string) => k.split('.').at(-1)!;
  const DASHES = ['', '6 3', '2 3', '8 3 2 3'];
  for (const axis of f.grid) {
    const others = f.grid.filter((a) => a.key !== axis.key);
    const series = new Map<string, Series>();
    const combos: string[] = [];
    for (const x of g) {
      const rest = others.map((a) => `${short(a.key)}=${x.params[a.key]}`).join(' ');
      if (!combos.includes(rest)) combos.push(rest);
      const name = rest ? `${x.condition} · ${rest}` : x.condition;
      // Every series its own colour; the marker says the condition, the line style the other axes' values.
      const s = series.get(name) ?? { name, points: [], color: PALETTE[series.size % PALETTE.length], marker: MARKERS[conds.indexOf(x.condition) % MARKERS.length], dash: DASHES[combos.indexOf(rest) % DASHES.length] };
      const i = axis.values.indexOf(x.params[axis.key]!);
      s.points.push({ x: i, y: x.summary.mean, lo: x.summary.ci[0], hi: x.summary.ci[1], label: `${axis.key}=${x.params[axis.key]}` });
      series.set(name, s);
    }
    charts.push(chart({ title: `Accuracy against ${axis.key}`, xLabel: axis.key, categories: axis.values, series: [...series.values()].slice(0, 16), lines: true, width: 640 }));
  }
  if (!f.grid.length) charts.push(chart({ title: 'Accuracy by condition', xLabel: 'condition', categories: conds, series: conds.map((c, i) => ({ name: c, points: g.filter((x) => x.condition === c).map((x) => ({ x: i, y: x.summary.mean, lo: x.summary.ci[0], hi: x.summary.ci[1] })) })) }));
  const bySeries = new Map<string, Series>();
  for (const x of g) {
    const s = bySeries.get(x.condition) ?? { name: x.condition, points: [] };
    s.points.push({ x: x.tokens_per_item, y: x.summary.mean, lo: x.summary.ci[0], hi: x.summary.ci[1], label: x.label });
    bySeries.set(x.condition, s);
  }
  charts.push(chart({ title: 'Accuracy against cost (each point a grid cell)', xLabel: 'computed tokens per item (evaluated prompt + output)', series: [...bySeries.values()], width: 640 }));
  const table = g.map((x) => `<tr><td>${esc(x.label)}</td><td>${esc(x.condition)}</td><td>${x.summary.n}</td><td>${x.seeds}</td><td><b>${f3(x.summary.mean)}</b> ± ${f3(x.summary.se)}</td><td>[${f3(x.summary.ci[0])}, ${f3(x.summary.ci[1])}]</td><td>${x.failed}</td><td>${x.k ?? ''}</td><td>${x.tokens_per_item.toFixed(1)}</td><td>${(x.wall_ms_per_item / 1000).toFixed(2)}</td><td>${x.runs.map((r) => `<a href="${esc(p.href(r))}">${esc(r.slice(-4))}</a>`).join(' ')}</td></tr>`).join('');
  const labels = [...new Set(g.map((x) => x.label))];
  const cols = labels.flatMap((l) => conds.map((c) => ({ l, c, grp: g.find((x) => x.label === l && x.condition === c) })));
  const head1 = `<tr><th></th><th></th>${labels.map((l) => `<th colspan="${conds.length}" class="grp">${esc(l)}</th>`).join('')}</tr>`;
  const head2 = `<tr><th>item</th><th>expected</th>${cols.map((c, i) => `<th class="${i % conds.length === 0 ? 'sep' : ''}" title="${esc(`${c.l} · ${c.c}`)}">${esc(c.c.slice(0, 6))}</th>`).join('')}</tr>`;
  const body = p.items.slice(0, MAX_ITEMS).map((it, i) => `<tr><td>${esc(it.id)}</td><td>${esc(it.expected)}</td>${cols.map((c, ci) => {
    const runs = c.grp?.runs ?? [];
    const ss = runs.map((r) => p.rowsOf(r)?.[i]?.cells[c.c]?.score).filter((s): s is number => typeof s === 'number');
    const cls = ci % conds.length === 0 ? ' class="sep"' : '';
    if (!ss.length || !runs[0]) return `<td${cls}></td>`;
    const m = ss.reduce((a, b) => a + b, 0) / ss.length;
    return `<td${cls}><a class="sq" style="background:${heat(m)}" title="${esc(`${c.l} · ${c.c}: ${m.toFixed(2)} over ${ss.length} seed(s); click for the prompt and output`)}" href="${esc(p.href(runs[0]))}#io-${i}-${esc(c.c)}">${ss.length > 1 ? m.toFixed(1) : m >= 1 ? '✓' : m <= 0 ? '✗' : m.toFixed(1)}</a></td>`;
  }).join('')}</tr>`).join('');
  const pending = f.cells.filter((c) => c.state !== 'done');
  const paired = f.cells.filter((c) => c.state === 'done' && c.result).flatMap((c) => c.result!.comparisons.map((x) => `<tr><td>${c.run ? `<a href="${esc(p.href(c.run))}">${esc(c.key)}</a>` : esc(c.key)}</td><td>${esc(x.a)} − ${esc(x.b)}</td><td>${x.n}</td><td>${x.mean_diff >= 0 ? '+' : ''}${f3(x.mean_diff)}</td><td>[${f3(x.ci[0])}, ${f3(x.ci[1])}]</td><td>${x.mcnemar ? esc(formatMcNemar(x.mcnemar)) : '<span class="muted">scores not binary</span>'}</td></tr>`)).join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>sweep · ${esc(f.experiment)}</title>
<style>body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #eee;padding:3px 6px;text-align:left}.sim{background:#fff3cd;border:2px solid #e0a800;padding:8px 12px;font-weight:600}
svg{max-width:100%;height:auto;border:1px solid #eee;margin:4px 8px 4px 0}.muted{color:#777}a.sq{display:inline-block;min-width:18px;height:16px;border-radius:3px;color:#fff;font-size:10px;text-align:center;text-decoration:none;line-height:16px}
th.grp{border-left:2px solid #ccc;text-align:center}td:first-child{white-space:nowrap}.sep{border-left:2px solid #ccc}</style></head><body>
<h1>Sweep: ${esc(f.experiment)} <small>(${esc(f.topology)})</small></h1>
${f.simulated ? '<p class="sim">SIMULATED DRIVER: answers are synthetic (right with a set probability), for testing the experiment machinery. These numbers say nothing about any model.</p>' : ''}
<p>${esc(f.ran ?? '')} · grid ${f.grid.map((a) => `<code>${esc(a.key)}=${esc(a.values.join(','))}</code>`).join(' × ') || '(none)'} × ${f.seeds} seed(s) from ${f.base_seed} · ${f.cells.length} cells${pending.length ? `, <b>${pending.length} not finished</b>` : ''} · updated ${esc(f.updated_at)}</p>
<p class="muted">Each point: the mean score over items (per item averaged over seeds first), with a 95% interval over items: Clopper-Pearson when the scores are 0/1 (one seed), else a seeded bootstrap. Axes start at 0; each series has its own colour, marker and legend entry.</p>
<h2>Charts</h2>${charts.join('')}
<h2>Across tasks</h2><p class="muted">Rows: tasks (the <code>inputs.dataset</code> grid values); columns: methods. Each cell: mean ± SE [95% CI] n (items). Also in tasks.csv beside this page.</p>${taskTableHtml(taskTable(f, g, f.dataset ? f.dataset.split('/').at(-1)!.replace(/\.jsonl?$/, '') : f.experiment))}
<h2>Cells</h2><table><tr><th>grid point</th><th>condition</th><th>items</th><th>seeds</th><th>mean ± se</th><th>95% CI</th><th>failed</th><th>k</th><th>computed tokens/item</th><th>wall s/item</th><th>runs</th></tr>${table}</table>
<h2>Paired tests</h2><p class="muted">Per cell (grid point and seed), the topology against each baseline on the same items: mean difference, paired bootstrap 95% CI, McNemar's p raw and Holm-adjusted over that cell's tests. Cells are separate families: not adjusted across each other.</p>
<table><tr><th>cell</th><th>difference</th><th>n</th><th>mean</th><th>95% CI</th><th>McNemar</th></tr>${paired}</table>
<h2>Items</h2><p class="muted">Score per item (✓ right, ✗ wrong; the mean over seeds when there are several). Click a square for that answer's prompt and output.</p>
<table>${head1}${head2}${body}</table>${p.items.length > MAX_ITEMS ? `<p class="muted">… ${p.items.length - MAX_ITEMS} more items in the runs' experiment pages</p>` : ''}
</body></html>
`;
}
