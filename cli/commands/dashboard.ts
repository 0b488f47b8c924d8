import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { fail } from '../exit.js';
import { call, remoteOptions, remoteTarget, type ControlTarget, type RemoteOptions } from '../http.js';
import { stateDir } from '../state.js';
import { runningHub } from '../running.js';
import { startProcess } from '../../drivers/lifecycle.js';

/**
 * A one-time dashboard link for the running hub: the ticket in it is good once, for a minute, and
 * the browser trades it for a session cookie (the bearer token itself never goes to the browser).
 * Opens it with xdg-open when there is one and a display; returns the link.
 */
export async function openDashboard(hub: ControlTarget, o: { open: boolean; json?: boolean }): Promise<string> {
  const t = await call<{ path: string; expires_in_ms: number }>(hub, 'POST', '/dashboard/ticket');
  const host = hub.control.host.includes(':') ? `[${hub.control.host}]` : hub.control.host;
  // Over TLS, the name we reached it by (the one its certificate serves), so the browser accepts it too.
  const url = `${hub.control.tls ? 'https' : 'http'}://${host === '0.0.0.0' ? '127.0.0.1' : host === '[::]' ? '[::1]' : host}:${hub.control.port}${t.path}`;
  const opener = o.open ? findOpener() : undefined;
  if (opener) {
    try {
      const child = startProcess(opener, [url], { stdio: 'ignore' });
      child.on('error', () => { /* no browser: the printed link still works */ });
      child.unref();
    } catch { /* same */ }
  }
  if (o.json) process.stdout.write(JSON.stringify({ url, expires_in_ms: t.expires_in_ms, opened: Boolean(opener) }) + '\n');
  else process.stdout.write(`dashboard: ${url}\n  (one-time link, valid ${Math.round(t.expires_in_ms / 1000)} s${opener ? '; opening it in your browser' : ''}; \`swarm dashboard\` makes a new one)\n`);
  return url;
}

/** xdg-open on PATH, when there is a display to open a browser on. */
function findOpener(): string | undefined {
  if (!process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) return undefined;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const f = path.join(dir, 'xdg-open');
    try { fs.accessSync(f, fs.constants.X_OK); return f; } catch { /* next */ }
  }
  return undefined;
}

export function registerDashboard(program: Command): void {
  remoteOptions(program.command('dashboard')
    .description('open the live dashboard of the running swarm (prints a one-time link; opens it with xdg-open if it can)')
    .option('--state-dir <dir>', 'state directory (env SWARM_STATE_DIR, default ./.swarm)')
    .option('--no-open', 'only print the link')
    .option('--json', 'print {url, expires_in_ms, opened}', false))
    .action(async (o: RemoteOptions & { stateDir?: string; open: boolean; json: boolean }) => {
      try { await openDashboard(remoteTarget(o) ?? runningHub(stateDir(o.stateDir)), o); } catch (err) { fail(err, o.json); }
    });
}
