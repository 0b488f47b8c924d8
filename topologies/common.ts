import { render } from './template.js';
import type { NodeResult, NodeTask, RunSpec } from './types.js';

/** Build a node task from its role's template. */
export function task(spec: RunSpec, role: string, node: string, vars: Record<string, unknown>, after?: string[]): NodeTask {
  const r = spec.experiment.roles[role];
  const input = { input: spec.inputs.text, ...vars };
  return {
    node, role, prompt: render(r?.prompt ?? '{{input}}', input), input,
    ...(r?.json_schema ? { json_schema: r.json_schema } : {}), ...(after?.length ? { after } : {}),
  };
}

/** How a failed node reads in a report or a downstream prompt. */
export function failure(node: string, r: NodeResult): string {
  return `${node} failed${r.error ? `: ${r.error.code}: ${r.error.msg}` : ''}`;
}

/** Cut a text for a reason line. */
export function clip(s: string, n = 200): string {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}
