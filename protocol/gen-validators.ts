/**
 * Build step (`npm run build`): the zod schemas, the one definition of every input, compiled to
 * standalone validator code with ajv, as fastify builds its config validator. Why generated code: a
 * frame check is on the hub's and every worker's hot path, and ajv's output costs a fraction of what
 * the hand-written checker it replaced did (bench/validate.ts), while loading neither zod (~80 ms of
 * CPU and ~10 MB in each of 25 workers starting on two cores) nor ajv at run time. The modules are
 * written to gen/ by every build and imported as `#gen/…` (package.json `imports`), from the source
 * tree and from dist alike. Only their .d.ts are committed: tsc needs the types before this step has
 * run, and never sees the .js (its checker overflows its stack on ajv's deeply nested code, even with
 * @ts-nocheck); the .js are ~300 KB of machine-made code with nothing to review.
 *   node dist/protocol/gen-validators.js           write what is stale
 *   node dist/protocol/gen-validators.js --check   exit 1 if anything is stale
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Ajv, type Options } from 'ajv';
import standalone from 'ajv/dist/standalone/index.js';
import { z } from 'zod';

type Json = Record<string, unknown>;

/** One generated module (a .js file and its .d.ts): its path from the repository root, what it checks, its checks by export name. */
export interface Target {
  file: string;
  about: string;
  schemas: () => Promise<Record<string, z.ZodType>>;
  typeImport?: string;
  /** An object of the checks, under this name (each key from the export name). */
  map?: { name: string; type: string; key?: (name: string) => string; skip?: string };
  /** Options of its own (driver options arrive as text: numbers are converted). */
  ajv?: Options;
  /** More exports, from the JSON Schemas: [JavaScript, declaration]. */
  extra?: (json: Record<string, Json>, key: (name: string) => string) => [string, string];
}

export const TARGETS: Target[] = [
  {
    file: 'gen/protocol-validators.js',
    about: 'the envelope and each payload of protocol/schemas.ts',
    typeImport: "import type { Type } from '../protocol/types.js';",
    map: { name: 'PAYLOAD_CHECKS', type: 'Record<Type, Check>', skip: 'ENVELOPE' },
    schemas: async () => { const s = await import('./schemas.js'); return { ENVELOPE: s.Envelope, ...s.Payloads }; },
  },
  {
    file: 'gen/task-check.js',
    about: 'TaskSpecSchema of hub/task-schema.ts',
    schemas: async () => { const s = await import('../hub/task-schema.js'); return { TASK_SPEC: s.TaskSpecSchema }; },
    // A misspelt field's error names the nearest one (hub/store.ts), without loading zod for the list.
    extra: (json) => [
      `export const TASK_SPEC_KEYS = ${JSON.stringify(Object.keys((json.TASK_SPEC!.properties ?? {}) as Json))};`,
      'export declare const TASK_SPEC_KEYS: readonly string[];',
    ],
  },
  {
    file: 'gen/hub-config-check.js',
    about: 'HubConfigSchema of hub/config-schema.ts',
    schemas: async () => { const s = await import('../hub/config-schema.js'); return { HUB_CONFIG: s.HubConfigSchema }; },
  },
  {
    file: 'gen/worker-config-check.js',
    about: 'WorkerConfigSchema of worker/config-schema.ts',
    schemas: async () => { const s = await import('../worker/config-schema.js'); return { WORKER_CONFIG: s.WorkerConfigSchema }; },
  },
  {
    file: 'gen/driver-option-checks.js',
    about: 'DriverOptionSchemas of drivers/option-schemas.ts',
    schemas: async () => (await import('../drivers/option-schemas.js')).DriverOptionSchemas,
    typeImport: "import type { DriverOptionSummary } from '../drivers/option-summary.js';",
    map: { name: 'DRIVER_OPTION_CHECKS', type: 'Record<string, Check>', key: kebab },
    ajv: { coerceTypes: true },
    extra: (json, key) => [
      `export const DRIVER_OPTIONS = ${JSON.stringify(Object.fromEntries(Object.entries(json).map(([n, s]) => [key(n), summary(s)])))};`,
      'export declare const DRIVER_OPTIONS: Record<string, DriverOptionSummary>;',
    ],
  },
];

function kebab(name: string): string { return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`); }

/** What a driver's help line says: its label, and each key with what its value looks like. */
function summary(s: Json): { label: string; keys: { key: string; value: string }[] } {
  const props = Object.entries((s.properties ?? {}) as Record<string, Json>).filter(([, p]) => p.type !== undefined);
  return {
    label: String(s.description ?? ''),
    keys: props.map(([key, p]) => ({
      key,
      value: typeof p.title === 'string' ? p.title : Array.isArray(p.enum) ? p.enum.join('|') : p.type === 'integer' ? 'N' : p.type === 'number' ? 'X' : 'TEXT',
    })),
  };
}

/**
 * zod's JSON Schema, rewritten so that ajv (removeAdditional: true) parses as zod does: a plain
 * object drops unknown keys (additionalProperties: false, which ajv then removes); a strict one
 * refuses them (propertyNames, so the refusal names the key); a passthrough object or a record keeps
 * them, checked, except an own `__proto__`, which zod drops too (patternProperties that exclude it).
 */
export function forAjv(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(forAjv);
  if (!s || typeof s !== 'object') return s;
  const o: Json = {};
  for (const [k, v] of Object.entries(s as Json)) o[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as Json).map(([p, ps]) => [p, forAjv(ps)])) : forAjv(v);
  if (o.type !== 'object') return o;
  delete o.$schema;
  const keys = Object.keys((o.properties as Json | undefined) ?? {});
  const extra = o.additionalProperties;
  if (extra === false) {
    delete o.additionalProperties;
    // Under allOf, it is checked before `required`: a misspelt field is named, not the one it leaves missing.
    o.allOf = [{ propertyNames: { enum: keys } }];
  } else if (extra === undefined && !o.propertyNames) {
    o.additionalProperties = false;
  } else {
    if ((o.propertyNames as Json | undefined)?.type === 'string') delete o.propertyNames;
    if (o.propertyNames) throw new Error(`gen-validators: propertyNames other than strings: ${JSON.stringify(o.propertyNames)}`);
    const skip = ['__proto__', ...keys].map((k) => k.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')).join('|');
    o.patternProperties = { [`^(?!(?:${skip})$)`]: extra ?? {} };
    o.additionalProperties = false;
  }
  return o;
}

const AJV: Options = {
  code: { source: true, esm: true, lines: true },
  // A refusal's words come from check.ts's describe(); without them the code is half the size.
  messages: false,
  useDefaults: true,
  removeAdditional: true,
  // zod counts a string's length in UTF-16 units and writes JavaScript regular expressions: the same here.
  unicode: false,
  unicodeRegExp: false,
  allowUnionTypes: true,
  strict: true,
  // `unicode` is deprecated (the default counts code points), and that is the one warning expected.
  logger: { log: () => {}, warn: (m: unknown) => { if (!String(m).includes('option unicode')) console.warn(m); }, error: console.error },
};

/** The text of a target's generated module and of its declarations. */
export async function source(t: Target): Promise<{ js: string; dts: string }> {
  const schemas = await t.schemas();
  const names = Object.keys(schemas);
  const ajv = new Ajv({ ...AJV, ...t.ajv });
  const json: Record<string, Json> = {};
  for (const [name, schema] of Object.entries(schemas)) {
    json[name] = z.toJSONSchema(schema, { io: 'input' }) as Json;
    ajv.addSchema(forAjv(json[name]) as Json, name);
  }
  // The CommonJS module is the function, and its `default` too: the form that NodeNext's typing names.
  const code = standalone.default(ajv, Object.fromEntries(names.map((n) => [n, n])));
  const head = `// Generated by protocol/gen-validators.ts (\`npm run build\`) from ${t.about}: do not edit.`;
  const key = t.map?.key ?? ((n: string) => n);
  const inMap = names.filter((n) => n !== t.map?.skip);
  const [extraJs, extraDts] = t.extra?.(json, key) ?? [];
  const js = [
    head,
    code.replace(/^"use strict";/, ''),
    ...(t.map ? [`export const ${t.map.name} = { ${inMap.map((n) => (key(n) === n ? n : `${JSON.stringify(key(n))}: ${n}`)).join(', ')} };`] : []),
    ...(extraJs ? [extraJs] : []),
    '',
  ].join('\n');
  const rel = path.posix.relative(path.posix.dirname(t.file), 'protocol/check.js');
  const dts = [
    head,
    `import type { Check } from '${rel.startsWith('.') ? rel : `./${rel}`}';`,
    ...(t.typeImport ? [t.typeImport] : []),
    ...names.map((n) => `export declare const ${n}: Check;`),
    ...(t.map ? [`export declare const ${t.map.name}: ${t.map.type};`] : []),
    ...(extraDts ? [extraDts] : []),
    '',
  ].join('\n');
  return { js, dts };
}

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root (this file runs from dist/protocol/). */
export const ROOT = path.resolve(here, '../..');

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const t of TARGETS) {
    const { js, dts } = await source(t);
    for (const [file, text] of [[t.file, js], [t.file.replace(/\.js$/, '.d.ts'), dts]] as const) {
      const at = path.join(ROOT, file);
      if (fs.existsSync(at) && fs.readFileSync(at, 'utf8') === text) continue;
      stale++;
      if (check) { process.stderr.write(`stale: ${file} (run npm run build)\n`); continue; }
      fs.writeFileSync(at, text);
      process.stdout.write(`wrote ${file}\n`);
    }
  }
  if (check && stale) process.exitCode = 1;
}
