import t from 'tap';
import { api, swarm, tempDir } from '../helpers/cli.js';
import { launchChromium } from '../helpers/browser.js';

// Slow enough to watch: every word of an answer takes 120 ms.
const DRIVER = ['--driver', 'echo', '--driver-opt', 'token_ms=120'];

const { browser, skip } = await launchChromium();
if (browser) t.teardown(() => browser.close());

t.test('dashboard in a real browser: 25 workers, a task from queued to done, a live debate, a killed worker respawned, a run cancelled from the page', { skip: skip ?? false }, async (t) => {
  if (!browser) return;
  const dir = tempDir(t);
  const up = swarm(['up', '--agents', '25', ...DRIVER, '-d', '--state-dir', dir, '--json'], { timeoutMs: 120_000 });
  t.equal(up.code, 0, up.stderr);
  const link = swarm(['dashboard', '--state-dir', dir, '--no-open', '--json']);
  t.equal(link.code, 0, link.stderr);
  const { url } = JSON.parse(link.stdout) as { url: string };

  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(url);
  t.equal(new URL(page.url()).search, '', 'the ticket is gone from the address bar');
  await page.waitForFunction(() => document.querySelectorAll('#workers tbody tr[data-worker]').length === 25, undefined, { timeout: 30_000 });
  t.equal(await page.locator('#workers tbody tr[data-worker]').count(), 25, '25 workers shown');
  t.equal(await page.locator('#mode').textContent(), 'star');

  // A task for a role nobody has stays queued; giving a worker that role from the page runs it.
  await page.fill('#submit-prompt', 'hello from the browser');
  await page.fill('#submit-role', 'critic');
  await page.click('#submit-btn');
  await page.locator('#tasks li[data-state="queued"]').waitFor({ timeout: 10_000 });
  const taskId = await page.locator('#tasks li').first().getAttribute('data-task');
  t.ok(taskId, 'the submitted task is listed as queued');
  await page.selectOption('#role-worker', 'w-7');
  await page.fill('#role-name', 'critic');
  await page.click('#role-btn');
  await page.locator('#tasks li[data-state="done"]').waitFor({ timeout: 30_000 });
  const task = await api<{ state: string; text: string; worker: string }>(dir, 'GET', `/tasks/${taskId}`);
  t.equal(task.state, 'done', 'the task moved from queued to done');
  t.equal(task.worker, 'w-7', 'on the worker given the role from the page');
  await page.locator('tr[data-worker="w-7"] td', { hasText: 'critic' }).first().waitFor({ timeout: 10_000 });

  // A diamond-debate: its nodes change state on the page; one click shows a node's prompt and output.
  const started = await api<{ run: string }>(dir, 'POST', '/runs', {
    experiment: { name: 'browser-debate', topology: 'diamond-debate', inputs: { text: 'How should the little bird get home before the rain?' }, debate: { stances: ['fast', 'careful'] }, limits: { rounds: 3, turns: 12, max_tokens: 60 } },
  });
  t.ok(started.run, 'run started');
  const node = (state: string) => page.locator(`.run[data-run="${started.run}"] g.node[data-node="debate/propose"][data-state="${state}"]`);
  await node('running').waitFor({ timeout: 30_000 });
  await node('done').waitFor({ timeout: 30_000 });
  t.pass('the proposer went from running to done on the page');
  await page.locator(`.run[data-run="${started.run}"] g.node[data-node^="debate/r1/"][data-state="running"]`).first().waitFor({ timeout: 30_000 });
  await node('done').click();
  await page.locator('#d-state.done').waitFor({ timeout: 10_000 });
  t.match(await page.locator('#d-prompt').textContent(), /little bird/, 'the node view shows its rendered prompt');
  t.match(await page.locator('#d-output').textContent(), /^echo: /, 'and its output');
  await page.click('#d-close');

  // A killed worker shows dead, then back (respawned by the supervisor).
  const status = await api<{ workers: { id: string; pid: number }[] }>(dir, 'GET', '/status');
  const victim = status.workers.find((w) => w.id === 'w-3')!;
  process.kill(victim.pid, 'SIGKILL');
  await page.locator('tr[data-worker="w-3"][data-state="dead"]').waitFor({ timeout: 15_000 });
  t.pass('the killed worker is shown dead');
  await page.locator('tr[data-worker="w-3"][data-respawns="1"]:not([data-state="dead"])').waitFor({ timeout: 30_000 });
  t.pass('and then respawned');

  // Cancel the debate from the page.
  await page.click(`.run[data-run="${started.run}"] .cancel-run`);
  await page.locator(`.run[data-run="${started.run}"][data-verdict="cancelled"]`).waitFor({ timeout: 15_000 });
  const run = await api<{ state: string; outcome?: { verdict: string } }>(dir, 'GET', `/runs/${started.run}`);
  t.equal(run.outcome?.verdict, 'cancelled', 'the run is cancelled on the hub');
  const report = page.locator(`.run[data-run="${started.run}"] a.report`);
  await report.waitFor({ timeout: 15_000 });
  const res = await page.request.get(new URL((await report.getAttribute('href'))!, page.url()).href);
  t.equal(res.status(), 200, 'the finished run links its report.html');
  t.match(await res.text(), /browser-debate/);

  t.same(errors, [], 'no console error');
});
