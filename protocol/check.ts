/**
 * The shape of a validator that protocol/gen-validators.ts writes (ajv standalone code), and how its
 * refusal reads. Loads nothing: worker processes check frames without zod or ajv.
 */

/** One refusal as ajv reports it (the fields the message needs). */
export interface CheckError {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
  propertyName?: string;
}

/**
 * A generated check: true when `data` is valid. It fills defaults into `data` and drops the keys a
 * plain zod object drops (unknown keys, an own `__proto__`), in place, as zod's parse would have
 * returned them; on false, `errors` holds the first refusal.
 */
export interface Check {
  (data: unknown): boolean;
  errors?: CheckError[] | null;
}

/** `field.path: what is wrong`, or `unknown field "x"`, for a check's first refusal. */
export function describe(errors: readonly CheckError[] | null | undefined, near: (key: string) => string = () => ''): string {
  const e = errors?.[0];
  if (!e) return 'invalid';
  // A strict object's unknown key comes back as its name failing propertyNames (reported with the name).
  const unknown = e.propertyName ?? (e.keyword === 'propertyNames' ? e.params.propertyName as string : undefined);
  const at = e.instancePath.split('/').slice(1).map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  if (unknown !== undefined) return `${at.length ? `${at.join('.')}: ` : ''}unknown field ${JSON.stringify(unknown)}${near(unknown)}`;
  if (e.keyword === 'required') return `${[...at, String(e.params.missingProperty)].join('.')}: required`;
  return `${at.join('.') || '(root)'}: ${why(e)}`;
}

function why(e: CheckError): string {
  const p = e.params;
  switch (e.keyword) {
    case 'type': return `must be ${String(p.type)}`;
    case 'enum': { const all = p.allowedValues as unknown[]; return all.length > 8 ? `must be one of ${all.length} known values` : `must be one of ${all.map((x) => JSON.stringify(x)).join('|')}`; }
    case 'const': return `must be ${JSON.stringify(p.allowedValue)}`;
    case 'minLength': return `must have at least ${String(p.limit)} characters`;
    case 'maxLength': return `must have at most ${String(p.limit)} characters`;
    case 'minItems': return `must have at least ${String(p.limit)} items`;
    case 'maxItems': return `must have at most ${String(p.limit)} items`;
    case 'minimum': case 'maximum': case 'exclusiveMinimum': case 'exclusiveMaximum': return `must be ${String(p.comparison)} ${String(p.limit)}`;
    case 'pattern': return `must match ${String(p.pattern)}`;
    default: return e.message ?? `${e.keyword} ${JSON.stringify(p)}`;
  }
}
