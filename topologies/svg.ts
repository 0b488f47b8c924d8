import type { NodeRecord, RunMetrics } from './report.js';

const COLOR = { done: '#66bb6a', failed: '#ef5350', running: '#bdbdbd', cancelled: '#90a4ae' } as const;
const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const lat = (n: NodeRecord) => n.duration_ms ?? (n.finished_at !== undefined ? n.finished_at - n.submitted_at : 0);
const MAX_PER_COLUMN = 40;

/** The run's graph: columns by depth along `after` edges; each node coloured by status, with timing. */
export function graphSvg(nodes: NodeRecord[]): string {
  if (!nodes.length) return '<p>(no nodes)</p>';
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
  const W = 150, H = 24, GX = 46, GY = 6;
  const pos = new Map<string, { x: number; y: number }>();
  let body = '';
  let maxRows = 0;
  cols.forEach((col, c) => {
    const shown = col.length > MAX_PER_COLUMN ? col.slice(0, MAX_PER_COLUMN - 1) : col;
    maxRows = Math.max(maxRows, shown.length + (shown.length < col.length ? 1 : 0));
    shown.forEach((n, r) => {
      const x = 10 + c * (W + GX), y = 10 + r * (H + GY);
      pos.set(n.node, { x, y });
      const label = n.node.length > 20 ? `…${n.node.slice(-19)}` : n.node;
      const t = n.state === 'running' || n.state === 'cancelled' ? n.state : `${Math.round(lat(n))} ms`;
      body += `<g><title>${esc(n.node)} (${esc(n.role)}): ${n.state}, ${t}${n.worker ? ` on ${esc(n.worker)}` : ''}${n.error ? `, ${esc(n.error.code)}` : ''}</title>`
        + `<rect x="${x}" y="${y}" width="${W}" height="${H}" rx="4" fill="${COLOR[n.state]}"/>`
        + `<text x="${x + 5}" y="${y + 16}" font-size="11">${esc(label)} · ${esc(t)}</text></g>`;
    });
    if (shown.length < col.length) {
      const x = 10 + c * (W + GX), y = 10 + shown.length * (H + GY);
      const failed = col.slice(shown.length).filter((n) => n.state === 'failed').length;
      body += `<text x="${x + 5}" y="${y + 16}" font-size="11">+${col.length - shown.length} more${failed ? ` (${failed} failed)` : ''}</text>`;
    }
  });
  let edges = '';
  let count = 0;
  for (const n of nodes) {
    const to = pos.get(n.node);
    if (!to) continue;
    for (const a of n.after) {
      const from = pos.get(a);
      if (!from || ++count > 3000) continue;
      edges += `<line x1="${from.x + W}" y1="${from.y + H / 2}" x2="${to.x}" y2="${to.y + H / 2}" stroke="#9e9e9e" stroke-width="1"/>`;
    }
  }
  const width = 20 + cols.length * (W + GX) - GX, height = 20 + maxRows * (H + GY);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">${edges}${body}</svg>`;
}

/** When each node ran, from submission to result (the first 300 nodes by submission). */
export function timelineSvg(nodes: NodeRecord[]): string {
  const ns = [...nodes].sort((a, b) => a.submitted_at - b.submitted_at).slice(0, 300);
  if (!ns.length) return '<p>(no nodes)</p>';
  const t0 = ns[0]!.submitted_at;
  const t1 = Math.max(t0 + 1, ...ns.map((n) => n.finished_at ?? n.submitted_at));
  const L = 170, PW = 760, RH = 8;
  const x = (t: number) => L + ((t - t0) / (t1 - t0)) * PW;
  let rows = '';
  ns.forEach((n, i) => {
    const y = 20 + i * RH;
    const w = Math.max(1, x(n.finished_at ?? t1) - x(n.submitted_at));
    rows += `<g><title>${esc(n.node)}: ${Math.round((n.finished_at ?? t1) - n.submitted_at)} ms wall</title><rect x="${x(n.submitted_at).toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${RH - 2}" fill="${COLOR[n.state]}"/>`
      + (ns.length <= 60 ? `<text x="${L - 4}" y="${y + 6}" font-size="8" text-anchor="end">${esc(n.node.slice(-28))}</text>` : '') + '</g>';
  });
  const h = 40 + ns.length * RH;
  let ticks = '';
  for (let k = 0; k <= 5; k++) {
    const t = t0 + ((t1 - t0) * k) / 5;
    ticks += `<line x1="${x(t)}" y1="14" x2="${x(t)}" y2="${h - 16}" stroke="#eee"/><text x="${x(t)}" y="${h - 4}" font-size="10" text-anchor="middle">${((t - t0) / 1000).toFixed(2)} s</text>`;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${L + PW + 20}" height="${h}" viewBox="0 0 ${L + PW + 20} ${h}" font-family="sans-serif">${ticks}${rows}</svg>`;
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
    body += `<text x="${L - 6}" y="${y + 13}" font-size="11" text-anchor="end">${esc(name)}</text>`
      + `<rect x="${L}" y="${y}" width="${tw.toFixed(1)}" height="${RH - 6}" fill="#42a5f5"/><text x="${L + tw + 4}" y="${y + 13}" font-size="10">${r.tokens_out}</text>`
      + `<rect x="${L + BW + 120}" y="${y}" width="${lw.toFixed(1)}" height="${RH - 6}" fill="#ffa726"/><text x="${L + BW + 124 + lw}" y="${y + 13}" font-size="10">${Math.round(r.latency_mean_ms)} ms</text>`;
  });
  const w = L + 2 * BW + 200, h = 30 + roles.length * RH;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="sans-serif">${body}</svg>`;
}
