import { SwarmError, seededRandom } from '../../protocol/index.js';
import { readBounded } from '../../protocol/read-bounded.js';

/** A dataset is read whole: bounded, so a device or a model file given by mistake is refused. */
const MAX_DATASET_BYTES = 512 * 1024 * 1024;

/** One dataset item: its id, the text every role sees as {{input}}, its other fields, the answer wanted. */
export interface DatasetItem {
  id: string;
  /** `input`, else `question`, else `prompt`, else `text`: what {{input}} renders to. */
  input: string;
  /** The item's fields other than `id` and `expected`, for prompts (`{{choices}}`). */
  fields: Record<string, unknown>;
  /** The reference answer; absent when the item has none (it is then not scored). */
  expected?: unknown;
}

const INPUT_KEYS = ['input', 'question', 'prompt', 'text'] as const;

/** Seeded PRNG: shuffles and bootstraps repeat exactly from their seed. */
export const rng = seededRandom;

/** Parse JSONL items; an error names the line. Ids default to the line number and must be unique. */
export function parseDataset(text: string, source: string): DatasetItem[] {
  const out: DatasetItem[] = [];
  const seen = new Set<string>();
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!.trim();
    if (!line) continue;
    let v: unknown;
    try { v = JSON.parse(line); } catch (err) {
      throw new SwarmError('SWARM_ERR_CONFIG', `${source}:${n + 1}: not JSON: ${(err as Error).message}`);
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new SwarmError('SWARM_ERR_CONFIG', `${source}:${n + 1}: an item is a JSON object`);
    const o = v as Record<string, unknown>;
    const id = o.id === undefined ? String(n + 1) : String(o.id);
    if (seen.has(id)) throw new SwarmError('SWARM_ERR_CONFIG', `${source}:${n + 1}: duplicate id "${id}"`);
    seen.add(id);
    const key = INPUT_KEYS.find((k) => typeof o[k] === 'string');
    const { id: _id, expected, ...fields } = o;
    const input = key ? (o[key] as string) : JSON.stringify(fields);
    out.push({ id, input, fields, ...(expected !== undefined ? { expected } : {}) });
  }
  if (!out.length) throw new SwarmError('SWARM_ERR_CONFIG', `${source}: no items`);
  return out;
}

/** Read a dataset file, shuffle it when a seed is given, then keep the first `limit` items. */
export function loadDataset(file: string, o: { limit?: number; shuffle_seed?: number } = {}): DatasetItem[] {
  let text: string;
  try { text = readBounded(file, MAX_DATASET_BYTES); } catch (err) {
    throw new SwarmError('SWARM_ERR_CONFIG', `cannot read dataset ${file}: ${(err as Error).message}`);
  }
  const items = parseDataset(text, file);
  if (o.shuffle_seed !== undefined) {
    const r = rng(o.shuffle_seed);
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
  }
  return o.limit !== undefined ? items.slice(0, o.limit) : items;
}
