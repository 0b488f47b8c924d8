import type { NodeRecord } from './report.js';

/** Nodes whose prompt and output the report carries (the rest: nodes.jsonl). */
export const DETAIL_NODES = 1000;
/** Characters of a prompt or an output kept for the report; the whole text is in nodes.jsonl. */
export const DETAIL_CHARS = 4000;

const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** A prompt or output as kept for the report: cut at DETAIL_CHARS, saying how much was left out. */
export function clipDetail(text: string): string {
  return text.length > DETAIL_CHARS ? `${text.slice(0, DETAIL_CHARS)}\n… (${text.length - DETAIL_CHARS} more characters in nodes.jsonl)` : text;
}

/** Each node's rendered prompt and output, folded (`<details>`), in submission order. */
export function nodeDetailsHtml(nodes: NodeRecord[]): string {
  const shown = nodes.filter((n) => n.prompt !== undefined || n.output !== undefined).slice(0, DETAIL_NODES);
  if (!shown.length) return '';
  const items = shown.map((n) => {
    const err = n.error ? `<p class="muted">${esc(n.error.code)}: ${esc(n.error.msg)}</p>` : '';
    return `<details id="node-${esc(n.node)}"><summary><b>${esc(n.node)}</b> <span class="muted">${esc(n.role)} · ${n.state}${n.worker ? ` · ${esc(n.worker)}` : ''}${n.verdict ? ` · ${esc(n.verdict)}` : ''}</span></summary>`
      + `<h4>prompt</h4><pre>${esc(n.prompt ?? '(not recorded)')}</pre><h4>output</h4>${err}<pre>${esc(n.output ?? (n.state === 'done' ? '' : `(${n.state})`))}</pre></details>`;
  }).join('\n');
  return `<h2>Node prompts and outputs</h2><style>details{border-bottom:1px solid #eee;padding:4px 0}summary{cursor:pointer}h4{margin:8px 0 4px;font-size:12px;color:#555}</style>\n${items}`;
}
