/** Human-readable rendering of a Plan for `swarm plan`. */
import type { Plan } from './estimate.js';
import { formatBytes as b } from '../../protocol/bytes.js';

/** Render a plan as aligned text (what `swarm plan` prints without --json). */
export function formatPlan(p: Plan): string {
  const m = p.model;
  const o = p.options;
  const pa = p.memory.perAgent;
  const fx = p.memory.fixed;
  const L: string[] = [];
  const row = (k: string, v: string): void => { L.push(`  ${k.padEnd(30)}${v}`); };
  L.push(`model ${m.path}`);
  row('architecture', `${m.architecture}, ${m.layers} layers, ${m.headCount} heads, ${m.headCountKv} KV heads, head size ${m.keyLength}, n_embd ${m.embeddingLength}, vocab ${m.vocabSize}`);
  row('weights', `${m.dominantType}, file ${b(m.fileBytes)}${m.repackableBytes ? `, ${b(m.repackableBytes)} repackable on x86` : ''}`);
  row('KV bytes per token (f16)', `${p.kvBytesPerToken} B (${b(p.kvBytesPerToken * o.ctx)} at ctx ${o.ctx})`);
  L.push(`per agent (${o.engine} engine, ctx ${o.ctx}, ubatch ${o.ubatch}${o.repack ? '' : ', --no-repack'})`);
  row('KV cache', b(pa.kv));
  if (pa.compute) row('compute buffer', b(pa.compute));
  row('logits output', b(pa.output));
  if (pa.engine) row(o.engine === 'batched' ? 'engine, per sequence' : 'engine heap', b(pa.engine));
  if (pa.privateWeights) row('private repacked weights', b(pa.privateWeights));
  row(fx.workerProcesses ? 'agent in a worker process' : 'worker process (Node)', b(pa.worker));
  row('= per agent', b(pa.total));
  L.push('once per host');
  row('OS + runtime reserve', b(fx.reserve));
  row('hub', b(fx.hub));
  if (fx.workerProcesses) row('worker processes (Node)', `${b(fx.workerProcesses)}: ${p.workerProcesses} (--procs ${o.procs})`);
  row('shared weights (page cache)', b(fx.sharedWeights));
  if (fx.privateWeights) row('repacked weights (one copy)', b(fx.privateWeights));
  if (fx.engine) row(o.engine === 'batched' ? 'engine process (Node, heap)' : 'shared engine heap', b(fx.engine));
  if (fx.compute) row('shared engine compute', b(fx.compute));
  row('= fixed', b(fx.total));
  L.push(`total for ${o.agents} agents: ${b(p.memory.total)} of ${b(o.ramBytes)} -> ${p.fits ? 'fits' : 'DOES NOT FIT'}; at most ${p.maxAgents} agents fit`);
  L.push(`rule of thumb (2 GB system, the model once, 350 MB per agent: (RAM - 2 GB - model) / 350 MB): ${p.spec.agents} agents; this plan: ${p.spec.ours}. Where it breaks:`);
  for (const s of p.spec.breaks) L.push(`  - ${s}`);
  if (p.alternatives.length) L.push(`most agents that fit in ${b(o.ramBytes)} at ctx ${o.ctx}`);
  for (const a of p.alternatives) L.push(`  ${a.label.padEnd(46)}${a.maxAgents} (${b(a.perAgentBytes)} per agent)`);
  if (p.warnings.length) L.push('warnings');
  for (const w of p.warnings) L.push(`  [${w.code}] ${w.message}`);
  return L.join('\n') + '\n';
}
