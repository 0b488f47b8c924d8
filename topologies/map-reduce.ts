import { failure, task } from './common.js';
import { GUARD_SCHEMA, GuardVerdict, parseWith } from './structured.js';
import type { NodeResult, NodeTask, Topology } from './types.js';

/**
 * `map-reduce`: one mapper per input chunk, a tree of reducers with fan-in k (`map_reduce.fan_in`)
 * until one output is left, then a guard that checks it. Each node's output feeds exactly one
 * parent. Node ids: `map/<i>`, `reduce/<level>/<j>` (level 1 reads mappers), `guard`.
 */
export const mapReduce: Topology = {
  name: 'map-reduce',
  roles: () => ['mapper', 'reducer', 'guard'],
  defaults: {
    mapper: { prompt: 'Summarise this text:\n{{chunk}}' },
    reducer: { prompt: 'Combine these partial summaries into one:\n{{parts}}' },
    guard: {
      prompt: 'Check this summary of the input for errors:\n{{output}}\nReply with JSON {"verdict": "pass" or "fail", "reason": "why"}.',
      json_schema: GUARD_SCHEMA,
    },
  },
  next(spec, results, skip) {
    const chunks = spec.inputs.chunks;
    const k = spec.experiment.map_reduce.fan_in;
    if (chunks.length === 0) return { tasks: [], done: { output: '', verdict: 'failed', reason: 'the input has no chunks (empty text, file or folder)' } };
    const tasks: NodeTask[] = [];
    let failed = 0;
    const want = (node: string, make: () => NodeTask) => { if (!skip?.has(node)) tasks.push(make()); };
    // Level 0: the mappers. A level is complete when every node in it has a result.
    let level: (string | undefined)[] = [];
    let names: string[] = [];
    for (let i = 0; i < chunks.length; i++) {
      const node = `map/${i}`;
      const r = results.get(node);
      names.push(node);
      if (!r) { level.push(undefined); want(node, () => task(spec, 'mapper', node, { chunk: chunks[i]!.text, source: chunks[i]!.source, index: i })); continue; }
      if (!r.ok) failed++;
      level.push(text(node, r));
    }
    let depth = 0;
    let reducers = 0;
    // Reducers run as soon as their own k inputs are in, without waiting for the whole level.
    while (depth === 0 || level.length > 1) {
      depth++;
      const up: (string | undefined)[] = [];
      const upNames: string[] = [];
      for (let j = 0; j * k < level.length; j++) {
        const node = `reduce/${depth}/${j}`;
        reducers++;
        upNames.push(node);
        const r = results.get(node);
        if (r) { if (!r.ok) failed++; up.push(text(node, r)); continue; }
        up.push(undefined);
        const parts = level.slice(j * k, (j + 1) * k);
        if (parts.every((p) => p !== undefined)) {
          const from = names.slice(j * k, (j + 1) * k);
          want(node, () => task(spec, 'reducer', node, { parts: parts.join('\n---\n'), from, level: depth }, from));
        }
      }
      level = up;
      names = upNames;
    }
    const root = level[0];
    if (root === undefined) return { tasks };
    const g = results.get('guard');
    if (!g) { want('guard', () => task(spec, 'guard', 'guard', { output: root }, [names[0]!])); return { tasks }; }
    const details = { chunks: chunks.length, fan_in: k, levels: depth, reducers, failed_nodes: failed };
    if (!g.ok) return { tasks: [], done: { output: root, verdict: 'failed', reason: failure('guard', g), details } };
    const v = parseWith(GuardVerdict, g.text);
    if (!v) return { tasks: [], done: { output: root, verdict: 'fail', reason: 'the guard gave no usable verdict', details } };
    return { tasks: [], done: { output: root, verdict: v.verdict, reason: v.reason || (failed ? `${failed} node(s) failed` : undefined), details } };
  },
};

function text(node: string, r: NodeResult): string {
  return r.ok ? r.text : `[${failure(node, r)}]`;
}
