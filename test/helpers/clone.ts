/** A deep copy that keeps an own `__proto__` key as a key (the generated checks work in place, so zod gets its own copy). */
export function clone(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(clone);
  if (!v || typeof v !== 'object') return v;
  const o = {};
  for (const k of Object.keys(v)) Object.defineProperty(o, k, { value: clone((v as Record<string, unknown>)[k]), enumerable: true, writable: true, configurable: true });
  return o;
}
