import fs from 'node:fs';
import path from 'node:path';
import { SwarmError } from '../protocol/index.js';
import { readBounded } from '../protocol/read-bounded.js';
import type { Experiment } from './schema.js';
import type { ResolvedInputs } from './types.js';
import { loadDataset } from './experiment/dataset.js';

/**
 * Read an experiment's inputs once, before the run, so topologies stay pure functions of data.
 * Paths are relative to `baseDir` (the experiment file's folder). Items: `inputs.items`, else one
 * per file of the folder, else the non-empty lines of the file or text.
 */
export function resolveInputs(e: Experiment, baseDir: string): ResolvedInputs {
  const i = e.inputs;
  if (i.dataset !== undefined) {
    // Each item is its own input; the run-wide text, items and chunks stay empty.
    const dataset = loadDataset(path.resolve(baseDir, i.dataset), { limit: i.limit, shuffle_seed: i.shuffle_seed });
    return { text: '', items: [], chunks: [], dataset, base_dir: path.resolve(baseDir) };
  }
  const sources: { source: string; text: string }[] = [];
  if (i.text !== undefined) sources.push({ source: 'inputs.text', text: i.text });
  if (i.file !== undefined) sources.push({ source: i.file, text: read(path.resolve(baseDir, i.file)) });
  if (i.folder !== undefined) {
    const root = path.resolve(baseDir, i.folder);
    for (const f of listFiles(root, i.extensions, i.max_files)) sources.push({ source: path.relative(baseDir, f) || f, text: read(f) });
  }
  if (i.items) i.items.forEach((t, n) => sources.push({ source: `inputs.items.${n}`, text: t }));
  const text = sources.map((s) => s.text).join('\n');
  const items = i.items ? [...i.items]
    : i.folder !== undefined ? sources.filter((s) => !s.source.startsWith('inputs.') && s.source !== i.file).map((s) => s.text)
    : text.split('\n').map((l) => l.trim()).filter(Boolean);
  const chunks: ResolvedInputs['chunks'] = [];
  for (const s of sources) for (const c of chunk(s.text, i.chunk_chars)) chunks.push({ source: s.source, index: chunks.length, text: c });
  if (chunks.length > e.limits.max_nodes) {
    throw new SwarmError('SWARM_ERR_CONFIG', `${chunks.length} chunks is over limits.max_nodes (${e.limits.max_nodes}); raise inputs.chunk_chars or the limit`);
  }
  return { text, items, chunks };
}

/** Split text into pieces of at most `size` characters, breaking after a newline where one is near. */
export function chunk(text: string, size: number): string[] {
  const out: string[] = [];
  let at = 0;
  while (at < text.length) {
    let end = Math.min(text.length, at + size);
    if (end < text.length) {
      const nl = text.lastIndexOf('\n', end - 1);
      if (nl >= at + size / 2) end = nl + 1;
    }
    const piece = text.slice(at, end);
    if (piece.trim()) out.push(piece);
    at = end;
  }
  return out;
}

/** An input file (a prompt, a document to map) is read whole: bounded, so a device or a model file given by mistake is refused. */
const MAX_INPUT_BYTES = 256 * 1024 * 1024;

function read(file: string): string {
  try { return readBounded(file, MAX_INPUT_BYTES); } catch (err) {
    throw new SwarmError('SWARM_ERR_CONFIG', `cannot read input ${file}: ${(err as Error).message}`);
  }
}

/** Files under `root`, sorted, hidden ones skipped, at most `max`. */
function listFiles(root: string, exts: string[] | undefined, max: number): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    let entries: fs.Dirent[];
    try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch (err) {
      throw new SwarmError('SWARM_ERR_CONFIG', `cannot read input folder ${dir}: ${(err as Error).message}`);
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const d of entries) {
      if (d.name.startsWith('.')) continue;
      const p = path.join(dir, d.name);
      if (d.isDirectory()) walk(p);
      else if (d.isFile() && (!exts || exts.some((x) => d.name.endsWith(x)))) {
        if (out.length >= max) throw new SwarmError('SWARM_ERR_CONFIG', `more than inputs.max_files (${max}) files under ${root}`);
        out.push(p);
      }
    }
  };
  walk(root);
  return out;
}
