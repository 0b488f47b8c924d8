/** Placeholders are `{{name}}` or `{{a.b}}`; spaces inside the braces are allowed. */
const PLACEHOLDER = /\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}/g;

/**
 * Render a prompt template. A missing variable renders as the empty string (a template may be
 * shared by rounds where, say, `feedback` does not exist yet); non-strings are JSON-encoded.
 */
export function render(template: string, vars: Record<string, unknown>): string {
  return template.replace(PLACEHOLDER, (_m, name: string) => {
    let v: unknown = vars;
    for (const part of name.split('.')) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[part] : undefined;
    if (v === undefined || v === null) return '';
    return typeof v === 'string' ? v : JSON.stringify(v);
  });
}

/** The placeholder names a template uses (top-level part only). */
export function placeholders(template: string): string[] {
  return [...new Set([...template.matchAll(PLACEHOLDER)].map((m) => m[1]!.split('.')[0]!))];
}
