/** What a task asks of the worker that runs it. */
export interface Needs { role?: string; caps?: readonly string[] }
/** What a worker offers. */
export interface Offers { role?: string; caps: readonly string[] }

/**
 * The routing rule: a task with a role runs only on a worker of that role, and a worker must have
 * every capability the task names. A task that names neither runs anywhere.
 */
export function canRun(w: Offers, t: Needs): boolean {
  if (t.role && t.role !== w.role) return false;
  return !t.caps?.length || t.caps.every((c) => w.caps.includes(c));
}

/** Tasks with the same key need the same workers (the hub keeps one ready heap per key). */
export function routeKey(t: Needs): { key: string; role: string; caps: string[] } {
  const role = t.role ?? '';
  const caps = t.caps?.length ? [...t.caps].sort() : [];
  return { key: caps.length ? `${role}\u0000${caps.join('\u0000')}` : role, role, caps };
}

/** Read a task's needs from an opaque spec (a replicated one is not typed). */
export function needsOf(spec: Record<string, unknown>): Needs {
  return {
    role: typeof spec.role === 'string' && spec.role ? spec.role : undefined,
    caps: Array.isArray(spec.caps) ? spec.caps.filter((c): c is string => typeof c === 'string') : undefined,
  };
}
