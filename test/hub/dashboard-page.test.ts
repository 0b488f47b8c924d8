import path from 'node:path';
import t from 'tap';
import { launchChromium } from '../helpers/browser.js';
import { ROOT, swarm, tempDir } from '../helpers/cli.js';

t.test('the page: a run\'s badge agrees with its nodes, its verdict beside it; a task submitted from the page shows its output', async (t) => {
  const { browser, skip } = await launchChromium();
  if (!browser) { t.comment(`skipped: ${skip}`); return; }
  t.teardown(() => browser.close());
  const state = tempDir(t);
  const up = swarm(['up', '--driver', 'echo', '--agents', '4', '--detach', '--state-dir', state]);
  t.equal(up.code, 0, up.stderr);
  t.teardown(() => void swarm(['down', '--state-dir', state]));
  // Echo workers answer no guard question: the map-reduce's guard gives the verdict "fail", while every node is done.
  const run = swarm(['run', path.join(ROOT, 'topologies/examples/map-reduce.yaml'), '--state-dir', state, '--json']);
  t.match(run.stdout, /"verdict":"fail"/, `the guard's verdict is fail (${run.stderr.slice(-300)})`);
  const link = JSON.parse(swarm(['dashboard', '--no-open', '--json', '--state-dir', state]).stdout) as { url: string };

  const page = await browser.newPage();
  await page.goto(link.url);
  await page.waitForSelector('.run-head [data-status]');
  const nodeStates = await page.$$eval('g.node', (els) => els.map((e) => (e as SVGGElement).dataset.state));
  t.ok(nodeStates.length > 0 && nodeStates.every((s) => s === 'done'), `every node done (${nodeStates.join(',')})`);
  t.equal(await page.textContent('.run-head [data-status]'), 'done', 'so the run\'s badge says done');
  t.match(await page.textContent('.run-head .verdict'), /verdict: fail/, 'and the verdict is shown beside it');

  await page.fill('#submit-prompt', 'from the page one two three');
  await page.click('#submit-form button');
  await page.waitForSelector('#tasks li[data-state="done"] .out', { timeout: 20_000 });
  t.match(await page.textContent('#tasks li .out'), /echo: from the page one two three/, 'its output is on the page');
});
