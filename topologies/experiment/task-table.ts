import path from 'node:path';
import type { Group, SweepFile } from './sweep.js';

/** The grid key whose values are tasks (datasets). */
export const TASK_AXIS = 'inputs.dataset';

/**
 * Du et al.'s table across tasks: a row per task (the `inputs.dataset` grid values, else the
 * experiment's one dataset), a column per method (the condition, with any other grid values),
 * each cell the group's mean ± SE [95% CI] and n.
 */
export interface TaskTable { tasks: string[]; methods: string[]; cell(task: string, method: string): Group | undefined }

const taskName = (v: string) => path.basename(v).replace(/\.jsonl?$/, '');

export function taskTable(f: Pick<SweepFile, 'grid'>, groups: Group[], fallback: string): TaskTable {
  const others = f.grid.filter((a) => a.key !== TASK_AXIS);
  const task = (g: Group) => (g.params[TASK_AXIS] !== undefined ? taskName(g.params[TASK_AXIS]) : fallback);
  const method = (g: Group) => [g.condition, ...others.map((a) => `${a.key.split('.').at(-1)}=${g.params[a.key]}`)].join(' · ');
  const tasks: string[] = [], methods: string[] = [];
  const at = new Map<string, Group>();
  for (const g of groups) {
    const t = task(g), m = method(g);
    if (!tasks.includes(t)) tasks.push(t);
    if (!methods.includes(m)) methods.push(m);
    at.set(`${t}\u0000${m}`, g);
  }
  return { tasks, methods, cell: (t, m) => at.get(`${t}\u0000${m}`) };
}

const f3 = (n: number) => (Number.isFinite(n) ? n.toFixed(3) : '');
const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function taskTableHtml(t: TaskTable): string {
  const head = `<tr><th>task</th>${t.methods.map((m) => `<th>${esc(m)}</th>`).join('')}</tr>`;
  const rows = t.tasks.map((task) => `<tr><td>${esc(task)}</td>${t.methods.map((m) => {
    const g = t.cell(task, m);
    return g ? `<td><b>${f3(g.summary.mean)}</b> ± ${f3(g.summary.se)} <span class="muted">[${f3(g.summary.ci[0])}, ${f3(g.summary.ci[1])}] n=${g.summary.n}</span></td>` : '<td></td>';
  }).join('')}</tr>`).join('');
  return `<table>${head}${rows}</table>`;
}

/** The same table as CSV: a row per task; per method its mean, se, CI bounds and n. */
export function taskTableCsv(t: TaskTable): string {
  const q = (s: string) => (/[",\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s);
  const head = ['task', ...t.methods.flatMap((m) => ['mean', 'se', 'ci_lo', 'ci_hi', 'n'].map((k) => `${m} ${k}`))];
  const rows = t.tasks.map((task) => [task, ...t.methods.flatMap((m) => {
    const g = t.cell(task, m);
    return g ? [f3(g.summary.mean), f3(g.summary.se), f3(g.summary.ci[0]), f3(g.summary.ci[1]), String(g.summary.n)] : ['', '', '', '', ''];
  })]);
  return [head, ...rows].map((r) => r.map(q).join(',')).join('\n') + '\n';
}
