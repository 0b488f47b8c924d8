import fs from 'node:fs';
import path from 'node:path';
import type { Passport } from '../passport.js';
import { chart } from './charts.js';
import type { ExperimentResult } from './finalize.js';
import { formatMcNemar } from './stats.js';
import { budgetLines, ciNote, holmNote } from './notes.js';

const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : '-');
const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : '-');
const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);
const MAX_ROWS = 500;

/** Drivers that are not models: their numbers only test the machinery. */
export function simulatedNote(p: Pick<Passport, 'drivers'>, x?: Pick<ExperimentResult, 'drivers'>): string | undefined {
  return p.drivers.some((d) => d.driver === 'simulated') || x?.drivers?.includes('simulated')
    ? 'SIMULATED DRIVER: answers are synthetic (right with a set probability), for testing the experiment machinery. These numbers say nothing about any model.'
    : undefined;
}

/** What ran: the model files (or the driver when it has none). */
export function modelLine(p: Pick<Passport, 'models' | 'drivers'>, x?: Pick<ExperimentResult, 'drivers'>): string {
  const models = [...new Set(p.models.map((m) => `${path.basename(m.path)}${m.sha256 ? ` (sha256 ${m.sha256.slice(0, 12)}…)` : m.error ? ` (${m.error})` : ''}`))];
  const drivers = [...new Set([...(x?.drivers ?? []), ...(x?.drivers?.length ? [] : p.drivers.map((d) => d.driver))])];
  const modelText = models.length ? ` on ${models.join(', ')}` : drivers.some((d) => !['echo', 'simulated', 'exec'].includes(d)) ? ' (model not recorded: the swarm was started without naming it to this run)' : '';
  return `driver ${drivers.join(', ') || '(unknown)'}${modelText}`;
}

/** The experiment section of report.md. */
export function experimentMarkdown(x: ExperimentResult, p: Passport): string {
  const sim = simulatedNote(p, x);
  return [
    '', '## Experiment', '',
    ...(sim ? [`> **${sim}**`, ''] : []),
    `${x.items} items, scorer \`${x.scorer}\`, ${modelLine(p, x)}.`, '',
    '| condition | n | failed | mean | ± se | 95% CI | tokens/item | cached/item | wall s/item | k |', '|---|---|---|---|---|---|---|---|---|---|',
    ...x.conditions.map((c) => `| ${c.name} | ${c.n} | ${c.failed} | ${f3(c.mean)} | ${f3(c.se)} | [${f3(c.ci[0])}, ${f3(c.ci[1])}] | ${f1(c.tokens_per_item)} | ${f1(c.cached_tokens_per_item ?? 0)} | ${f1(c.wall_ms_per_item / 1000)} | ${c.k ?? ''} |`),
    '', `${ciNote(x)}. Tokens/item are computed tokens (evaluated prompt + output); prompt tokens served from the prefix cache are apart.`, '',
    ...budgetLines(x).map((l) => `${l}.`), ...(x.budget ? [''] : []),
    ...x.comparisons.map((c) => `- ${c.a} − ${c.b}: ${c.mean_diff >= 0 ? '+' : ''}${f3(c.mean_diff)} (paired 95% CI [${f3(c.ci[0])}, ${f3(c.ci[1])}], n = ${c.n})${c.mcnemar ? `; ${formatMcNemar(c.mcnemar)}` : ''}`),
    ...(holmNote(x) ? ['', holmNote(x)!] : []),
    '', 'Per item: experiment.html.', '',
  ].join('\n');
}

/** The self-contained experiment page: numbers, charts, and every item's answers with prompt and output one click away. */
export function experimentHtml(x: ExperimentResult, p: Passport, io: ReadonlyMap<string, { prompt: string; output: string }>): string {
  const sim = simulatedNote(p, x);
  const conds = x.conditions.map((c) => c.name);
  const rows = x.conditions.map((c) => `<tr><td>${esc(c.name)}</td><td>${c.n}</td><td><b>${f3(c.mean)}</b> ± ${f3(c.se)}</td><td>[${f3(c.ci[0])}, ${f3(c.ci[1])}]</td><td>${f1(c.tokens_per_item)}</td><td>${f1(c.cached_tokens_per_item ?? 0)}</td><td>${f1(c.tokens_out_per_item)}</td><td>${f1(c.wall_ms_per_item / 1000)}</td><td>${f1(c.nodes_per_item)}</td><td>${c.k ?? ''}</td><td>${c.failed}</td></tr>`).join('');
  const comps = x.comparisons.map((c) => `<tr><td>${esc(c.a)} − ${esc(c.b)}</td><td>${c.n}</td><td>${c.mean_diff >= 0 ? '+' : ''}${f3(c.mean_diff)}</td><td>[${f3(c.ci[0])}, ${f3(c.ci[1])}]</td><td>${c.mcnemar ? esc(formatMcNemar(c.mcnemar)) : '<span class="muted">scores not binary: no McNemar</span>'}</td></tr>`).join('');
  const acc = chart({ title: 'Accuracy by condition', xLabel: 'condition', categories: conds, series: x.conditions.map((c, i) => ({ name: c.name, points: [{ x: i, y: c.mean, lo: c.ci[0], hi: c.ci[1] }] })) });
  const cost = chart({ title: 'Accuracy against cost', xLabel: 'computed tokens per item (evaluated prompt + output)', series: x.conditions.map((c) => ({ name: c.name, points: [{ x: c.tokens_per_item, y: c.mean, lo: c.ci[0], hi: c.ci[1] }] })) });
  const items = x.rows.slice(0, MAX_ROWS).map((r, i) => `<tr id="item-${i}"><td>${esc(r.id)}</td><td class="q">${esc(clip(r.input, 160))}</td><td>${esc(r.expected)}</td>${conds.map((c) => {
    const cell = r.cells[c];
    if (!cell) return '<td></td>';
    const s = cell.score;
    const cls = s === null ? 'na' : s >= 1 ? 'ok' : s <= 0 ? 'no' : 'part';
    const id = `io-${i}-${c}`;
    const node = cell.node ? io.get(cell.node) : undefined;
    return `<td class="${cls}"><a href="#${id}">${s === null ? '–' : s.toFixed(s % 1 ? 2 : 0)} · ${esc(clip(cell.extracted ?? cell.answer, 40)) || `<i>(${esc(cell.error ?? 'empty')})</i>`}</a>`
      + `<div class="io" id="${id}"><a href="#item-${i}" class="x">close</a><b>node</b> ${esc(cell.node ?? '?')}${cell.error ? ` <span class="muted">(${esc(cell.error)})</span>` : ''}<b>prompt</b><pre>${esc(clip(node?.prompt ?? '(not recorded)', 2000))}</pre><b>output</b><pre>${esc(clip(node?.output ?? cell.answer, 2000))}</pre></div></td>`;
  }).join('')}</tr>`).join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(p.experiment)} · experiment · ${esc(p.run)}</title>
<style>body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1150px;color:#222;padding:0 16px}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #eee;padding:3px 8px;text-align:left;vertical-align:top}
.sim{background:#fff3cd;border:2px solid #e0a800;padding:8px 12px;font-weight:600}.muted{color:#777}svg{max-width:100%;height:auto;border:1px solid #eee;margin:4px 8px 4px 0}
td.ok a{color:#1b5e20}td.no a{color:#b71c1c}td.part a{color:#e65100}td.na a{color:#777}td a{text-decoration:none}td.q{max-width:260px;color:#444}
.io{display:none;position:fixed;top:5%;left:10%;right:10%;max-height:85%;overflow:auto;background:#fff;border:1px solid #999;box-shadow:0 4px 24px #0004;padding:12px;z-index:9}
.io:target{display:block}.io pre{background:#f6f6f6;padding:8px;white-space:pre-wrap}.io b{display:block;margin-top:6px}.x{float:right}</style></head><body>
<h1>${esc(p.experiment)} <small>(${esc(p.topology)} against baselines, run ${esc(p.run)})</small></h1>
${sim ? `<p class="sim">${esc(sim)}</p>` : ''}
<p>${x.items} items · scorer <code>${esc(x.scorer)}</code> · ${esc(modelLine(p, x))} · seed ${p.seed} · <a href="report.html">run report</a></p>
<h2>Conditions</h2><table><tr><th>condition</th><th>n</th><th>mean ± se</th><th>95% CI</th><th>tokens/item (computed)</th><th>cached prompt tokens/item</th><th>output tokens/item</th><th>wall s/item</th><th>nodes/item</th><th>k</th><th>failed</th></tr>${rows}</table>
<p class="muted">${esc(ciNote(x))}. Tokens/item: prompt tokens the engine evaluated plus output tokens; prompt tokens served from its prefix cache are counted apart, not as compute.</p>
${budgetLines(x).map((l, i) => `<p>${i === 0 ? `<b>${esc(l.split(':')[0]!)}:</b>${esc(l.slice(l.indexOf(':') + 1))}` : esc(l)}.</p>`).join('')}
${comps ? `<h2>Paired comparisons (same items)</h2><table><tr><th>difference</th><th>n</th><th>mean</th><th>paired bootstrap 95% CI</th><th>McNemar (raw p, Holm-adjusted p)</th></tr>${comps}</table>${holmNote(x) ? `<p class="muted">${esc(holmNote(x)!)}</p>` : ''}` : ''}
<h2>Charts</h2>${acc}${cost}
<h2>Items</h2><p class="muted">Each cell: score · the answer as scored. Click it for the node's prompt and output.</p>
<table><tr><th>id</th><th>input</th><th>expected</th>${conds.map((c) => `<th>${esc(c)}</th>`).join('')}</tr>${items}</table>
${x.rows.length > MAX_ROWS ? `<p class="muted">… ${x.rows.length - MAX_ROWS} more items in result.json (details.experiment.rows)</p>` : ''}
</body></html>
`;
}

/** Write experiment.html into a finished run's folder, with the prompts and outputs of the answering nodes from nodes.jsonl. */
export async function writeExperimentReport(dir: string, x: ExperimentResult, p: Passport): Promise<void> {
  const want = new Set<string>();
  for (const r of x.rows.slice(0, MAX_ROWS)) for (const c of Object.values(r.cells)) if (c.node) want.add(c.node);
  const io = new Map<string, { prompt: string; output: string }>();
  const text = await fs.promises.readFile(path.join(dir, 'nodes.jsonl'), 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      const o = JSON.parse(line) as { node: string; prompt?: string; output?: string };
      if (want.has(o.node)) io.set(o.node, { prompt: o.prompt ?? '', output: o.output ?? '' });
    } catch { /* a torn line */ }
  }
  await fs.promises.writeFile(path.join(dir, 'experiment.html'), experimentHtml(x, p, io));
}
