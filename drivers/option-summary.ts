import { DRIVER_OPTIONS } from '#gen/driver-option-checks.js';

/** A driver's `--driver-opt` keys as drivers/option-schemas.ts defines them, for help text. */
export interface DriverOptionSummary { label: string; keys: { key: string; value: string }[] }

/** The `--driver-opt` keys of every driver, from their schemas: the help of `swarm up` and `swarm worker`. */
export function driverOptionsHelp(width = 110): string {
  const out = ['', 'Driver options (--driver-opt key=value, repeatable; each driver refuses a key it does not know):'];
  for (const { label, keys } of Object.values(DRIVER_OPTIONS)) {
    let line = `  ${label}:`;
    for (const { key, value } of keys) {
      const item = `${key}=${value}`;
      if (line.length + 2 + item.length > width) { out.push(line); line = '     '; }
      line += `  ${item}`;
    }
    out.push(line);
  }
  return out.join('\n');
}
