import type { NodeRecord, RunMetrics } from './report.js';

/** Node fill by state; a finished node whose structured answer says no (reject, STOP, fail, drift) is amber. */
export const COLOR = { done: '#66bb6a', failed: '#ef5350', running: '#bdbdbd', cancelled: '#90a4ae', negative: '#ffb74d' } as const;
const NEGATIVE = /^(reject|stop|fail|drift|no answer)$/i;
const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const lat = (n: NodeRecord) => n.duration_ms ?? (n.finished_at !== undefined ? n.finished_at - n.submitted_at : 0);
const MAX_PER_COLUMN = 40;
/** A column taller than this wraps into side-by-side sub-columns (a star's fan-out, a map stage). */
const ROWS = 12;

export const fill = (n: NodeRecord): string => (n.state === 'done' && n.verdict && NEGATIVE.test(n.verdict) ? COLOR.negative : COLOR[n.state]);

/** The part of the node ids every node shares up to a "/" (`pipeline/`, `arena/`): labels leave it out. */
export function commonPrefix(nodes: NodeRecord[]): string {
  if (!nodes.length) return '';
  let p = nodes[0]!.node.slice(0, nodes[0]!.node.lastIndexOf('/') + 1);
  for (const n of nodes) while (p && !n.node.startsWith(p)) p = p.slice(0, p.slice(0, -1).lastIndexOf('/') + 1);
  return p;
}

const natural = new Intl.Collator('en', { numeric: true });
const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

/** The legend of node colours. */
export function legend(): string {
  const items: [string, string][] = [[COLOR.done, 'done'], [COLOR.negative, 'done, answered no (reject, STOP, fail, drift) or no usable answer'], [COLOR.failed, 'failed'], [COLOR.running, 'running'], [COLOR.cancelled, 'cancelled']];
  return `<p class="legend">${items.map(([c, l]) => `<span><i style="background:${c}"></i>${esc(l)}</span>`).join('')}</p>`;
}

/**
 * The run's graph: columns by depth along `after` edges (tall columns wrap into sub-columns); each
 * node coloured by status, with its timing, worker and structured verdict. `mark` names nodes to
 * outline (the winner, where a chain stopped).
 */
export function graphSvg(nodes: NodeRecord[], mark: ReadonlySet<string> = new Set()): string {
  if (!nodes.length) return '<p>(no nodes)</p>';
  const prefix = commonPrefix(nodes);
  const byId = new Map(nodes.map((n) => [n.node, n]));
  const depth = new Map<string, number>();
  const depthOf = (n: NodeRecord): number => {
    const known = depth.get(n.node);
    if (known !== undefined) return known;
    depth.set(n.node, 0); // guards against cycles
    const d = n.after.reduce((m, a) => { const p = byId.get(a); return p ? Math.max(m, depthOf(p) + 1) : m; }, 0);
    depth.set(n.node, d);
    return d;
  };
  const cols: NodeRecord[][] = [];
  for (const n of nodes) (cols[depthOf(n)] ??= []).push(n);
  for (const col of cols) col?.sort((a, b) => natural.compare(a.node, b.node));
  const W = 160, H = 34, GX = 40, SGX = 10, GY = 6;
  const pos = new Map<string, { x: number; y: number }>();
  let body = '';
  let maxRows = 0;
  let x0 = 10;
  for (const col of cols) {
    if (!col) continue;
    const shown = col.length > MAX_PER_COLUMN ? col.slice(0, MAX_PER_COLUMN - 1) : col;
    const slots = shown.length + (shown.length < col.length ? 1 : 0);
    const subs = Math.ceil(slots / ROWS);
    const rows = Math.ceil(slots / subs);
    maxRows = Math.max(maxRows, rows);
    const at = (i: number) => ({ x: x0 + Math.floor(i / rows) * (W + SGX), y: 10 + (i % rows) * (H + GY) });
    shown.forEach((n, i) => {
      const { x, y } = at(i);
      pos.set(n.node, { x, y });
      const t = n.state === 'running' || n.state === 'cancelled' ? n.state : `${Math.round(lat(n))} ms`;
      const sub = [t, n.worker, n.verdict].filter(Boolean).join(' · ');
      const ring = mark.has(n.node) ? ' stroke="#f9a825" stroke-width="3"' : '';
      body += `<g><title>${esc(n.node)} (${esc(n.role)}): ${n.state}, ${esc(t)}${n.worker ? ` on ${esc(n.worker)}` : ''}${n.verdict ? `, answered ${esc(n.verdict)}` : ''}${n.error ? `, ${esc(n.error.code)}` : ''}</title>`
        + `<rect x="${x}" y="${y}" width="${W}" height="${H}" rx="4" fill="${fill(n)}"${ring}/>`
        + `<text x="${x + 6}" y="${y + 14}" font-size="11" font-weight="600">${esc(clip(n.node.slice(prefix.length), 25))}</text>`
        + `<text x="${x + 6}" y="${y + 27}" font-size="10" fill="#333">${esc(clip(sub, 29))}</text></g>`;
    });
    if (shown.length < col.length) {
      const { x, y } = at(shown.length);
      const failed = col.slice(shown.length).filter((n) => n.state === 'failed').length;
      body += `<text x="${x + 6}" y="${y + 20}" font-size="11">+${col.length - shown.length} more${failed ? ` (${failed} failed)` : ''}</text>`;
    }
    x0 += subs * (W + SGX) - SGX + GX;
  }
  let edges = '';
  let count = 0;
  for (const n of nodes) {
    const to = pos.get(n.node);
    if (!to) continue;
    for (const a of n.after) {
      const from = pos.get(a);
      if (!from || ++count > 3000) continue;
      // A gentle curve: straight lines from many sources into one node merge into a blot.
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2, mx = (x1 + x2) / 2;
      edges += `<path d="M${x1} ${y1}C${mx} ${y1} ${mx} ${y2} ${x2} ${y2}" fill="none" stroke="#b0b0b0" stroke-width="1"/>`;
    }
  }
  const width = x0 - GX + 10, height = 20 + maxRows * (H + GY) - GY;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">${edges}${body}</svg>`;
}

/** When each node ran, from submission to result (the first 300 nodes by submission). */
export function timelineSvg(nodes: NodeRecord[], wallMs = 0): string {
  const ns = [...nodes].sort((a, b) => a.submitted_at - b.submitted_at).slice(0, 300);
  if (!ns.length) return '<p>(no nodes)</p>';
  const prefix = commonPrefix(ns);
  const labelled = ns.length <= 60;
  const t0 = ns[0]!.submitted_at;
  // To the run's end: nodes still running when it ended (cancelled, aborted) reach that far.
  const t1 = Math.max(t0 + 1, t0 + wallMs, ...ns.map((n) => n.finished_at ?? n.submitted_at));
  const L = labelled ? 150 : 20, PW = 800, RH = labelled ? 16 : 5;
  const x = (t: number) => L + ((t - t0) / (t1 - t0)) * PW;
  let rows = '';
  ns.forEach((n, i) => {
    const y = 24 + i * RH;
    const w = Math.max(2, x(n.finished_at ?? t1) - x(n.submitted_at));
    const ms = Math.round((n.finished_at ?? t1) - n.submitted_at);
    rows += `<g><title>${esc(n.node)}: ${ms} ms wall${n.worker ? ` on ${esc(n.worker)}` : ''}</title><rect x="${x(n.submitted_at).toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${RH - (labelled ? 4 : 1)}" rx="${labelled ? 2 : 0}" fill="${fill(n)}"/>`
      + (labelled ? `<text x="${L - 6}" y="${y + 10}" font-size="10" text-anchor="end">${esc(clip(n.node.slice(prefix.length), 24))}</text>` : '') + '</g>';
  });
  const h = 44 + ns.length * RH;
  let ticks = '';
  for (let k = 0; k <= 5; k++) {
    const t = t0 + ((t1 - t0) * k) / 5;
    ticks += `<line x1="${x(t)}" y1="18" x2="${x(t)}" y2="${h - 18}" stroke="#e6e6e6"/><text x="${x(t)}" y="${h - 5}" font-size="10" text-anchor="${k === 0 ? 'start' : k === 5 ? 'end' : 'middle'}" fill="#555">${((t - t0) / 1000).toFixed(2)} s</text>`;
  }
  const note = nodes.length > ns.length ? `<text x="${L}" y="12" font-size="10" fill="#555">first ${ns.length} of ${nodes.length} nodes by submission</text>` : '';
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${L + PW + 20}" height="${h}" viewBox="0 0 ${L + PW + 20} ${h}" font-family="sans-serif">${note}${ticks}${rows}</svg>`;
}

/** Tokens out and mean latency per role, as horizontal bars. */
export function rolesSvg(m: RunMetrics): string {
  const roles = Object.entries(m.roles);
  if (!roles.length) return '<p>(no finished nodes)</p>';
  const maxTok = Math.max(1, ...roles.map(([, r]) => r.tokens_out));
  const maxLat = Math.max(1, ...roles.map(([, r]) => r.latency_mean_ms));
  const RH = 22, L = 110, BW = 300;
  let body = `<text x="${L}" y="14" font-size="11" font-weight="bold">tokens out</text><text x="${L + BW + 120}" y="14" font-size="11" font-weight="bold">mean latency</text>`;
  roles.forEach(([name, r], i) => {
    const y = 22 + i * RH;
    const tw = (r.tokens_out / maxTok) * BW, lw = (r.latency_mean_ms / maxLat) * BW;
    body += `<text x="${L - 6}" y="${y + 13}" font-size="11" text-anchor="end">${esc(clip(name, 16))}</text>`
      + `<rect x="${L}" y="${y}" width="${tw.toFixed(1)}" height="${RH - 6}" fill="#42a5f5"/><text x="${L + tw + 4}" y="${y + 13}" font-size="10">${r.tokens_out}</text>`
      + `<rect x="${L + BW + 120}" y="${y}" width="${lw.toFixed(1)}" height="${RH - 6}" fill="#ffa726"/><text x="${L + BW + 124 + lw}" y="${y + 13}" font-size="10">${Math.round(r.latency_mean_ms)} ms</text>`;
  });
  const w = L + 2 * BW + 200, h = 30 + roles.length * RH;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="sans-serif">${body}</svg>`;
}
