import { InvalidArgumentError } from 'commander';

/** commander parser for a positive integer option. */
export function int(name: string, min = 0, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    // Number('') is 0: an empty value (an unset shell variable) would read as the smallest setting.
    // Decimal digits only: Number() also reads 1e3 as 1000 and 0x10 as 16, which no one means by a count.
    const n = /^\s*-?\d+\s*$/.test(v) ? Number(v) : NaN;
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
    if (n > max) throw new InvalidArgumentError(`${name} must be at most ${max}`);
    return n;
  };
}

/** commander parser for an option that takes one of `values`. */
export function oneOf<T extends string>(name: string, values: readonly T[]) {
  return (v: string): T => {
    if (!values.includes(v as T)) throw new InvalidArgumentError(`${name} must be one of ${values.join(', ')}`);
    return v as T;
  };
}

/** commander collector for repeatable `key=value` options. */
export function keyValue(v: string, prev: Record<string, string> = {}): Record<string, string> {
  const i = v.indexOf('=');
  if (i <= 0) throw new InvalidArgumentError(`expected key=value, got "${v}"`);
  return { ...prev, [v.slice(0, i)]: v.slice(i + 1) };
}

/** Parse `HOST:PORT` (IPv6 as `[::1]:PORT`). */
export function hostPort(v: string): { host: string; port: number } {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(v);
  if (!m) throw new InvalidArgumentError(`expected HOST:PORT, got "${v}"`);
  const port = Number(m[2]);
  if (port < 1 || port > 65535) throw new InvalidArgumentError(`port out of range in "${v}"`);
  return { host: m[1]!, port };
}
