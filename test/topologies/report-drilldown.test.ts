import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseExperiment } from '../../topologies/index.js';
import { RunFolder } from '../../topologies/artifacts.js';
import { DETAIL_CHARS } from '../../topologies/report-nodes.js';
import type { Passport } from '../../topologies/passport.js';

const passport = { run: 'r1', created_at: '2026-11-23T00:00:00Z', swarm_version: '0.1.0', experiment: 'drill', topology: 'star', seed: 1, temperature: 0, models: [], drivers: [], engines: {},
  host: { hostname: 'h', platform: 'linux', arch: 'x64', cpus: 2, cpu_model: 'cpu', mem_bytes: 1, node: 'v20' }, config: {} } as unknown as Passport;

t.test("report.html folds each node's prompt and output (escaped, clipped) under the nodes table", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'swarm-drill-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const experiment = parseExperiment('topology: star\ninputs: {items: [a, b]}\n', { source: 'x' });
  const folder = await RunFolder.open(dir, { experiment, inputs: { text: '', items: ['a', 'b'], chunks: [] } }, passport);
  const long = 'w '.repeat(DETAIL_CHARS);
  const req = (id: string) => ({ id, prompt: '', meta: { run: 'r1', node: id, role: 'worker' } });
  folder.submitted({ node: 'star/0', role: 'worker', prompt: 'Summarise <b>this</b> & that', input: {} }, req('r1:star:0'), 1000);
  folder.submitted({ node: 'star/1', role: 'worker', prompt: long, input: {} }, req('r1:star:1'), 1000);
  folder.finished('star/0', { ok: true, text: 'a <script>alert(1)</script> summary', worker: 'w-1' }, 1100);
  folder.finished('star/1', { ok: false, text: '', error: { code: 'SWARM_ERR_TASK_FAILED', msg: 'engine died' }, worker: 'w-2' }, 1200);
  folder.done({ output: 'x', verdict: 'done', run: 'r1', progress: { run: 'r1', state: 'done', submitted: 2, done: 2, failed: 1, running: 0, tokens_out: 0, tokens_per_s: 0, elapsed_ms: 200 } });
  await folder.close();
  const html = fs.readFileSync(path.join(dir, 'report.html'), 'utf8');
  t.match(html, /<h2>Node prompts and outputs<\/h2>/);
  t.equal(html.match(/<details /g)?.length, 2, 'one folded entry per node');
  t.match(html, /<summary><b>star\/0<\/b>/);
  t.match(html, /Summarise &lt;b&gt;this&lt;\/b&gt; &amp; that/, 'the prompt, escaped');
  t.match(html, /a &lt;script&gt;alert\(1\)&lt;\/script&gt; summary/, 'the output, escaped');
  t.notMatch(html, /<script>/, 'no script gets in');
  t.match(html, /SWARM_ERR_TASK_FAILED: engine died/, 'a failed node says why');
  t.match(html, new RegExp(`… \\(${long.length - DETAIL_CHARS} more characters in nodes.jsonl\\)`), 'a long prompt is clipped, saying where the rest is');
});
