import { LineCounter, parseDocument, parse as parseYaml, isMap, isPair, isScalar, isSeq, type Node } from 'yaml';
import type { z } from 'zod';
import { SwarmError } from '../protocol/index.js';
import { readBounded } from '../protocol/read-bounded.js';
import { ExperimentSchema, type Experiment } from './schema.js';
import { topology } from './registry.js';
import { extraRoles, resolveExtraRoles } from './experiment/roles.js';

export { ExperimentSchema, type Experiment, type ExperimentInput, type Role, TOPOLOGIES, type TopologyName } from './schema.js';

/** One problem in an experiment file, located. */
export interface ExperimentIssue { path: string; message: string; line?: number; col?: number; source: string }

/** An invalid experiment: the message names the file, line and field of every issue. */
export class ExperimentError extends SwarmError {
  constructor(readonly issues: ExperimentIssue[]) {
    super('SWARM_ERR_CONFIG', issues.map(formatIssue).join('\n'));
  }
}

function formatIssue(i: ExperimentIssue): string {
  const at = i.line !== undefined ? `${i.source}:${i.line}:${i.col ?? 1}` : i.source;
  return `${at}: ${i.path || '(root)'}: ${i.message}`;
}

export interface ParseOptions {
  /** Shown in errors. */
  source?: string;
  /** `key=value` overrides with dotted paths (`limits.rounds=2`); values are read as YAML scalars. */
  set?: string[];
}

/** An experiment file is text a person writes: far under this (a device or a model file given by mistake is refused). */
const MAX_EXPERIMENT_BYTES = 16 * 1024 * 1024;

/** Read and validate an experiment file (YAML or JSON). Throws ExperimentError. */
export function loadExperiment(file: string, opts: Omit<ParseOptions, 'source'> = {}): Experiment {
  let text: string;
  try { text = readBounded(file, MAX_EXPERIMENT_BYTES); } catch (err) {
    throw new SwarmError('SWARM_ERR_CONFIG', `cannot read experiment ${file}: ${(err as Error).message}`);
  }
  return parseExperiment(text, { ...opts, source: file });
}

/**
 * Parse and validate experiment text. Role defaults of the topology are filled in, so the result is
 * self-contained (a replay does not depend on later changes to the defaults). Frozen.
 */
export function parseExperiment(text: string, opts: ParseOptions = {}): Experiment {
  const source = opts.source ?? '<experiment>';
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length) {
    throw new ExperimentError(doc.errors.map((e) => {
      const pos = lc.linePos(e.pos[0]);
      return { path: '', message: `not valid YAML/JSON: ${e.message.split('\n')[0]}`, line: pos.line, col: pos.col, source };
    }));
  }
  const overridden = new Set<string>();
  for (const kv of opts.set ?? []) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new ExperimentError([{ path: kv, message: 'expected --set key=value', source: '--set' }]);
    const key = kv.slice(0, i);
    const path = key.split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : p));
    if (!isMap(doc.contents)) doc.contents = doc.createNode({}) as never;
    doc.setIn(path, doc.createNode(parseScalar(kv.slice(i + 1))));
    overridden.add(key);
  }
  const raw = doc.toJS() as unknown;
  const parsed = ExperimentSchema.safeParse(raw ?? {});
  const locate = (path: PropertyKey[], message: string): ExperimentIssue => {
    const dotted = path.map(String).join('.');
    for (const o of overridden) if (dotted === o || dotted.startsWith(`${o}.`)) return { path: dotted, message, source: `--set ${o}` };
    const pos = position(doc.contents as Node | null, path, lc);
    return { path: dotted, message, line: pos?.line, col: pos?.col, source };
  };
  if (!parsed.success) throw new ExperimentError(parsed.error.issues.map((is) => locate(issuePath(is), describe(is))));
  const topo = topology(parsed.data.topology);
  // The baselines' and the grader's roles are the experiment's, not the topology's.
  const extra = extraRoles(parsed.data);
  const own: Experiment = { ...parsed.data, roles: Object.fromEntries(Object.entries(parsed.data.roles).filter(([k]) => !extra.includes(k))) };
  const issues = topo.check(own).map((is) => locate(is.path, is.message));
  if (!hasInput(parsed.data)) issues.push(locate(['inputs'], 'give inputs.text, inputs.file, inputs.folder, inputs.items or inputs.dataset'));
  if (parsed.data.inputs.dataset === undefined) {
    if (parsed.data.baselines.length) issues.push(locate(['baselines'], 'baselines need inputs.dataset (items with expected answers)'));
    if (parsed.data.scorer) issues.push(locate(['scorer'], 'a scorer needs inputs.dataset (items with expected answers)'));
  }
  issues.push(...greedyVotes(parsed.data).map((is) => locate(is.path, is.message)));
  if (issues.length) throw new ExperimentError(issues);
  const resolved = topo.resolveRoles(own);
  return deepFreeze({ ...resolved, roles: { ...resolved.roles, ...resolveExtraRoles(parsed.data) } });
}

/**
 * Votes need samples that can differ: at temperature 0 (greedy decoding) k agents give k copies of
 * one answer, and the vote is a single agent at k times the cost. Each vote already gets its own
 * seed (the node's); a temperature above 0 is what makes the seeds matter.
 */
function greedyVotes(e: Experiment): { path: PropertyKey[]; message: string }[] {
  if (e.baseline.k === 1) return [];
  const out: { path: PropertyKey[]; message: string }[] = [];
  const role = e.roles.baseline?.temperature;
  if (e.baselines.includes('majority_vote') && (role ?? e.temperature) === 0) {
    out.push({ path: role !== undefined ? ['roles', 'baseline', 'temperature'] : ['baselines'], message: 'majority_vote at temperature 0 votes k identical answers (greedy decoding gives every agent the same one): give the baseline role a temperature above 0 (roles.baseline.temperature: 0.7), or drop majority_vote' });
  }
  if (e.baselines.includes('self_consistency') && e.baseline.temperature === 0) {
    out.push({ path: ['baseline', 'temperature'], message: 'self_consistency at temperature 0 votes k identical samples: set baseline.temperature above 0 (default 0.7)' });
  }
  return out;
}

function hasInput(e: Experiment): boolean {
  const i = e.inputs;
  return i.text !== undefined || i.file !== undefined || i.folder !== undefined || i.dataset !== undefined || (i.items?.length ?? 0) > 0;
}

/** zod reports an unknown key at the parent; point at the key itself. */
function issuePath(is: z.core.$ZodIssue): PropertyKey[] {
  if (is.code === 'unrecognized_keys' && is.keys.length) return [...is.path, is.keys[0]!];
  return is.path;
}

function describe(is: z.core.$ZodIssue): string {
  if (is.code === 'unrecognized_keys') return `unknown field${is.keys.length > 1 ? 's' : ''} ${is.keys.map((k) => `"${k}"`).join(', ')}`;
  if (is.code === 'invalid_type' && /received undefined/.test(is.message)) return `required (${is.expected})`;
  return is.message;
}

/** Line and column of the deepest node on `path` that exists (the key of a pair when there is one). */
function position(root: Node | null, path: PropertyKey[], lc: LineCounter): { line: number; col: number } | undefined {
  let node: Node | null = root;
  let best: number | undefined = root?.range?.[0];
  for (const seg of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(seg));
      if (!pair) break;
      const key = pair.key as Node;
      best = key.range?.[0] ?? best;
      node = (pair.value as Node | null) ?? null;
      if (node?.range && !isMap(node) && !isSeq(node)) best = path.at(-1) === seg ? key.range?.[0] ?? node.range[0] : node.range[0];
    } else if (isSeq(node) && typeof seg === 'number') {
      const item = node.items[seg] as Node | undefined;
      if (!item) break;
      best = item.range?.[0] ?? best;
      node = item;
    } else break;
  }
  return best === undefined ? undefined : lc.linePos(best);
}

function parseScalar(v: string): unknown {
  try { return parseYaml(v) as unknown; } catch { return v; }
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o)) deepFreeze(v);
  }
  return o;
}
