import t from 'tap';
import crypto from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ControlServer } from '../../hub/index.js';
import { CLI, tempDir } from '../helpers/cli.js';
import { launchChromium } from '../helpers/browser.js';
import { quiet, startHub, startPool, waitWorkers } from '../helpers/inproc.js';

// The hub runs in this process: the CLI must run beside it, never blocking this event loop.
const run = promisify(execFile);
const TOKEN = 'tls-dashboard-token-0123456789abcdef';

t.test('the dashboard over HTTPS: `swarm dashboard --hub-url https://…` prints a link a browser opens, with a Secure cookie, live workers and working controls; `swarm top` follows it too', async (t) => {
  const dir = tempDir(t);
  const certs = path.join(dir, 'certs');
  await run(process.execPath, [CLI, 'certs', '--dir', certs, '--host', 'hub=127.0.0.1']);
  const h = await startHub({ token: TOKEN });
  const control = new ControlServer(h.hub, {
    host: '127.0.0.1', port: 0, token: TOKEN, dashboard: { tickMs: 50 },
    tls: { cert: fs.readFileSync(path.join(certs, 'hub.crt')), key: fs.readFileSync(path.join(certs, 'hub.key')) },
  }, quiet);
  const { port } = await control.start();
  const pool = startPool(h.addr, 3, { token: TOKEN, options: { token_ms: '20' } });
  t.teardown(async () => { await pool.stop(); await control.stop(); await h.stop(); });
  t.ok(await waitWorkers(h.hub, 3), '3 workers up');
  const hubUrl = `https://127.0.0.1:${port}`;
  const remote = ['--hub-url', hubUrl, '--token', TOKEN, '--tls-ca', path.join(certs, 'ca.crt')];

  const untrusted = await run(process.execPath, [CLI, 'dashboard', '--hub-url', hubUrl, '--token', TOKEN, '--no-open', '--json']).then(() => 0, (e: { code: number }) => e.code);
  t.not(untrusted, 0, 'without the CA the CLI refuses the hub\'s certificate');
  const link = await run(process.execPath, [CLI, 'dashboard', ...remote, '--no-open', '--json']);
  const { url } = JSON.parse(link.stdout) as { url: string };
  t.match(url, new RegExp(`^https://127\\.0\\.0\\.1:${port}/dashboard\\?ticket=[\\w-]{20,}$`), 'an https link to the hub');

  const top = await run(process.execPath, [CLI, 'top', '--once', ...remote], { timeout: 30_000 });
  t.match(top.stdout, /swarm top · hub-/, '`swarm top` reads the stream over TLS');
  t.match(top.stdout, /w-3/);

  // The browser trusts exactly the hub's key (no blanket certificate bypass).
  const spki = crypto.createHash('sha256').update(new crypto.X509Certificate(fs.readFileSync(path.join(certs, 'hub.crt'))).publicKey.export({ type: 'spki', format: 'der' })).digest('base64');
  const { browser, skip } = await launchChromium([`--ignore-certificate-errors-spki-list=${spki}`]);
  if (!browser) { t.comment(`browser part skipped: ${skip}`); return; }
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(url);
  t.equal(page.url(), `${hubUrl}/dashboard`, 'redeemed over https; the ticket left the address bar');
  const cookies = await page.context().cookies();
  t.same(cookies.map((c) => [c.name, c.secure, c.httpOnly]), [[`swarm_dash_${port}`, true, true]], 'the session cookie is Secure and HttpOnly');
  await page.waitForFunction(() => document.querySelectorAll('#workers tbody tr[data-worker]').length === 3, undefined, { timeout: 30_000 });
  await page.locator('#conn[data-conn="live"]').waitFor({ timeout: 10_000 });
  t.pass('the live stream works over https');

  await page.fill('#submit-prompt', 'over tls');
  await page.click('#submit-btn');
  await page.locator('#tasks li[data-state="done"]').waitFor({ timeout: 30_000 });
  const id = await page.locator('#tasks li[data-state="done"]').first().getAttribute('data-task');
  t.equal(h.hub.store.queue.get(id!)?.result?.text, 'echo: over tls', 'a task submitted from the https page ran');
  t.same(errors, [], 'no console error');
});
