/** Inline SVG charts for experiment and sweep pages: points with 95% error bars, lines per series. */

const esc = (s: string): string => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Series colours (colour-blind-safe Okabe–Ito). */
export const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#000000'];

export interface Point { x: number; y: number; lo?: number; hi?: number; label?: string }
export interface Series { name: string; points: Point[]; color?: string; dash?: string; marker?: Marker }

/** Point shapes: series stay apart in print and for readers who do not tell the colours apart. */
export const MARKERS = ['circle', 'square', 'triangle', 'diamond', 'down', 'cross'] as const;
export type Marker = (typeof MARKERS)[number];

/** One marker at (x, y), r its half-size. */
function mark(m: Marker, x: number, y: number, c: string, r: number, title = ''): string {
  const t = title ? `<title>${esc(title)}</title>` : '';
  const f = (n: number) => n.toFixed(1);
  switch (m) {
    case 'square': return `<rect x="${f(x - r)}" y="${f(y - r)}" width="${f(2 * r)}" height="${f(2 * r)}" fill="${c}">${t}</rect>`;
    case 'triangle': return `<polygon points="${f(x)},${f(y - r - 1)} ${f(x - r - 1)},${f(y + r)} ${f(x + r + 1)},${f(y + r)}" fill="${c}">${t}</polygon>`;
    case 'down': return `<polygon points="${f(x)},${f(y + r + 1)} ${f(x - r - 1)},${f(y - r)} ${f(x + r + 1)},${f(y - r)}" fill="${c}">${t}</polygon>`;
    case 'diamond': return `<polygon points="${f(x)},${f(y - r - 1)} ${f(x + r + 1)},${f(y)} ${f(x)},${f(y + r + 1)} ${f(x - r - 1)},${f(y)}" fill="${c}">${t}</polygon>`;
    case 'cross': return `<path d="M${f(x - r)},${f(y - r)}L${f(x + r)},${f(y + r)}M${f(x - r)},${f(y + r)}L${f(x + r)},${f(y - r)}" stroke="${c}" stroke-width="2">${t}</path>`;
    default: return `<circle cx="${f(x)}" cy="${f(y)}" r="${f(r)}" fill="${c}">${t}</circle>`;
  }
}

const nice = (v: number) => (v === 0 ? '0' : Math.abs(v) >= 1000 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(1) : v.toFixed(2));

/**
 * A chart of series: a point per x with its 95% interval as an error bar, joined by lines when
 * `lines`; y from 0 to 1 (accuracy). x is categorical (evenly spaced, labelled) when `categories` is
 * given, else numeric (tokens per item, say; `logX` for costs spanning decades).
 */
export function chart(o: { title: string; xLabel: string; yLabel?: string; series: Series[]; lines?: boolean; categories?: string[]; logX?: boolean; width?: number; height?: number }): string {
  const longest = Math.max(0, ...o.series.map((x) => x.name.length));
  const R = Math.min(300, Math.max(120, 44 + longest * 6.2));
  const W = (o.width ?? 560) + Math.max(0, R - 150), H = Math.max(o.height ?? 300, 48 + o.series.length * 16), L = 52, T = 28, B = 44;
  const pw = W - L - R, ph = H - T - B;
  const all = o.series.flatMap((s) => s.points);
  const tx = (v: number) => (o.logX ? Math.log10(Math.max(v, 1e-9)) : v);
  let x0 = Math.min(...all.map((p) => tx(p.x))), x1 = Math.max(...all.map((p) => tx(p.x)));
  if (o.categories) { x0 = -0.5; x1 = o.categories.length - 0.5; }
  if (!Number.isFinite(x0)) { x0 = 0; x1 = 1; }
  if (!o.categories && !o.logX) { x0 = Math.min(0, x0); x1 = x1 > x0 ? x1 + (x1 - x0) * 0.08 : x0 + 1; }
  else if (x1 - x0 < 1e-9) { x0 -= 0.5; x1 += 0.5; } else if (!o.categories) { const pad = (x1 - x0) * 0.08; x0 -= pad; x1 += pad; }
  const px = (v: number) => L + ((tx(v) - x0) / (x1 - x0)) * pw;
  const pxc = (v: number) => L + ((v - x0) / (x1 - x0)) * pw;
  const py = (v: number) => T + (1 - Math.max(0, Math.min(1, v))) * ph;
  const parts: string[] = [];
  parts.push(`<text x="${L}" y="16" font-size="13" font-weight="600">${esc(o.title)}</text>`);
  for (let g = 0; g <= 4; g++) {
    const v = g / 4, y = py(v);
    parts.push(`<line x1="${L}" x2="${L + pw}" y1="${y}" y2="${y}" stroke="#eee"/><text x="${L - 6}" y="${y + 4}" font-size="10" text-anchor="end">${v.toFixed(2)}</text>`);
  }
  parts.push(`<line x1="${L}" x2="${L}" y1="${T}" y2="${T + ph}" stroke="#999"/><line x1="${L}" x2="${L + pw}" y1="${T + ph}" y2="${T + ph}" stroke="#999"/>`);
  if (o.categories) o.categories.forEach((c, i) => parts.push(`<text x="${pxc(i)}" y="${T + ph + 14}" font-size="10" text-anchor="middle">${esc(c)}</text>`));
  else {
    for (let g = 0; g <= 4; g++) {
      const tv = x0 + ((x1 - x0) * g) / 4, v = o.logX ? 10 ** tv : tv;
      parts.push(`<text x="${L + (pw * g) / 4}" y="${T + ph + 14}" font-size="10" text-anchor="middle">${nice(v)}</text>`);
    }
  }
  parts.push(`<text x="${L + pw / 2}" y="${H - 8}" font-size="11" text-anchor="middle">${esc(o.xLabel)}</text>`);
  parts.push(`<text transform="translate(13 ${T + ph / 2}) rotate(-90)" font-size="11" text-anchor="middle">${esc(o.yLabel ?? 'accuracy (mean score, 95% CI)')}</text>`);
  const nS = o.series.length;
  o.series.forEach((s, si) => {
    const c = s.color ?? PALETTE[si % PALETTE.length]!;
    const shape = s.marker ?? MARKERS[si % MARKERS.length]!;
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : '';
    // Categorical x: series side by side so their error bars do not overlap.
    const dx = o.categories ? (si - (nS - 1) / 2) * Math.min(10, (pw / Math.max(1, o.categories.length)) / (nS + 1)) : 0;
    const X = (p: Point) => (o.categories ? pxc(p.x) + dx : px(p.x));
    const pts = [...s.points].sort((a, b) => a.x - b.x);
    if (o.lines && pts.length > 1) parts.push(`<polyline fill="none" stroke="${c}" stroke-width="1.6"${dash} points="${pts.map((p) => `${X(p).toFixed(1)},${py(p.y).toFixed(1)}`).join(' ')}"/>`);
    for (const p of pts) {
      const x = X(p);
      if (p.lo !== undefined && p.hi !== undefined) parts.push(`<line x1="${x}" x2="${x}" y1="${py(p.lo)}" y2="${py(p.hi)}" stroke="${c}"/><line x1="${x - 4}" x2="${x + 4}" y1="${py(p.lo)}" y2="${py(p.lo)}" stroke="${c}"/><line x1="${x - 4}" x2="${x + 4}" y1="${py(p.hi)}" y2="${py(p.hi)}" stroke="${c}"/>`);
      parts.push(mark(shape, x, py(p.y), c, 3.5, `${s.name}${p.label ? ` ${p.label}` : ''}: ${p.y.toFixed(3)}${p.lo !== undefined ? ` [${p.lo.toFixed(3)}, ${p.hi!.toFixed(3)}]` : ''}`));
    }
    const ly = T + 8 + si * 16;
    parts.push(`<line x1="${L + pw + 14}" x2="${L + pw + 30}" y1="${ly}" y2="${ly}" stroke="${c}" stroke-width="2"${dash}/>${mark(shape, L + pw + 22, ly, c, 3.5)}<text x="${L + pw + 36}" y="${ly + 4}" font-size="11">${esc(s.name)}</text>`);
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(o.title)}">${parts.join('')}</svg>`;
}
