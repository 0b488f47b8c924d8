import { failure, task } from './common.js';
import type { Topology } from './types.js';

/** `star`: one independent task per input item, fanned out over the swarm. */
export const star: Topology = {
  name: 'star',
  roles: () => ['agent'],
  defaults: { agent: { prompt: '{{item}}' } },
  next(spec, results, skip) {
    const items = spec.inputs.items;
    const tasks = [];
    const outputs: string[] = [];
    let failed = 0, waiting = false;
    for (let i = 0; i < items.length; i++) {
      const node = `star/${i}`;
      const r = results.get(node);
      if (!r) { waiting = true; if (!skip?.has(node)) tasks.push(task(spec, 'agent', node, { item: items[i], index: i })); continue; }
      if (!r.ok) failed++;
      outputs.push(r.ok ? r.text : `[${failure(node, r)}]`);
    }
    if (waiting) return { tasks };
    return {
      tasks: [],
      done: {
        output: outputs.join('\n\n'),
        verdict: failed ? 'partial' : 'done',
        reason: failed ? `${failed} of ${items.length} tasks failed` : undefined,
        details: { items: items.length, failed },
      },
    };
  },
};
