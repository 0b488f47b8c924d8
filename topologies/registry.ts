import { RoleSchema, type Experiment, type TopologyName } from './schema.js';
import type { SpecIssue, Topology } from './types.js';
import { star } from './star.js';
import { pipeline } from './pipeline.js';
import { debate } from './debate.js';
import { arena } from './arena.js';
import { mapReduce } from './map-reduce.js';
import { strictChain } from './strict-chain.js';

const TOPOLOGY: Record<TopologyName, Topology> = {
  star, pipeline, 'diamond-debate': debate, arena, 'map-reduce': mapReduce, 'strict-chain': strictChain,
};

/** A topology with the checks every one shares: roles exist, have a prompt, and are used. */
export interface ResolvedTopology extends Topology {
  check(e: Experiment): SpecIssue[];
  /** The experiment with every role filled in from the topology's defaults. */
  resolveRoles(e: Experiment): Experiment;
}

export function topology(name: TopologyName): ResolvedTopology {
  const t = TOPOLOGY[name];
  return {
    ...t,
    check(e) {
      const issues = [...(t.check?.(e) ?? [])];
      const used = new Set(t.roles(e));
      for (const role of Object.keys(e.roles)) {
        if (!used.has(role)) issues.push({ path: ['roles', role], message: `"${role}" is not a role of ${name} (its roles: ${[...used].join(', ')})` });
      }
      for (const role of used) {
        if (!e.roles[role]?.prompt && !t.defaults[role]) issues.push({ path: ['roles', role, 'prompt'], message: `role "${role}" has no default template; give roles.${role}.prompt` });
      }
      return issues;
    },
    resolveRoles(e) {
      const roles: Experiment['roles'] = {};
      for (const role of t.roles(e)) {
        const given = e.roles[role];
        const d = t.defaults[role];
        roles[role] = { ...RoleSchema.parse({}), ...(d?.json_schema ? { json_schema: d.json_schema } : {}), prompt: d?.prompt, ...given } as Experiment['roles'][string];
        if (roles[role]!.prompt === undefined) roles[role]!.prompt = d?.prompt;
      }
      return { ...e, roles };
    },
  };
}

export { star, pipeline, debate, arena, mapReduce, strictChain };
