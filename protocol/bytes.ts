/**
 * Sizes as people write and read them: the one parser and the one printer every part uses (the hub's
 * `--retain`/`--archive-max` and status, the planner, the renderer, the CLI). Here because protocol/
 * imports no other part, so hub/ and deploy/ both import it without importing each other for it.
 */

const UNITS: Readonly<Record<string, number>> = {
  '': 1, b: 1, k: 1024, ki: 1024, kib: 1024, m: 1024 ** 2, mi: 1024 ** 2, mib: 1024 ** 2,
  g: 1024 ** 3, gi: 1024 ** 3, gib: 1024 ** 3, t: 1024 ** 4, ti: 1024 ** 4, tib: 1024 ** 4,
  kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12,
};

/**
 * Parse "16G", "16GiB", "512M", "15.5g", "16GB" into bytes. Bare letters and `iB` are binary
 * (16G = 16 GiB, as `free -g` and Kubernetes `16Gi` mean it); an explicit `GB`/`MB` is decimal.
 * A bare number is bytes. Throws on anything else.
 */
export function parseSize(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(v);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`not a size: "${v}" (e.g. 16G, 512M, 16GB)`);
  return Math.round(Number(m[1]) * unit);
}

const PRINTED: readonly (readonly [string, number, number])[] = [
  ['TiB', 1024 ** 4, 2], ['GiB', 1024 ** 3, 2], ['MiB', 1024 ** 2, 1], ['KiB', 1024, 1],
];

/**
 * Bytes in the largest binary unit they reach, trailing zeros dropped: `96 MiB`, `1020.4 KiB`,
 * `4.82 GiB`, `2 GiB`, `900 B` (two decimals from GiB up, where a tenth is 100 MiB; one below).
 */
export function formatBytes(n: number): string {
  const abs = Math.abs(n);
  for (const [u, f, d] of PRINTED) if (abs >= f) return `${+(n / f).toFixed(d)} ${u}`;
  return `${n} B`;
}
