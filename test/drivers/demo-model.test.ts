import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { DEMO_MODEL_NOTICE, buildDemoModel, demoModelPath, ensureDemoModel, modelCacheDir } from '../../drivers/demo-model/index.js';
import { EmbeddedDriver } from '../../drivers/embedded/index.js';
import { collect } from '../helpers/llama.js';

t.test('the cache follows XDG_CACHE_HOME, else ~/.cache', async (t) => {
  t.equal(modelCacheDir({ XDG_CACHE_HOME: '/x/cache' }), '/x/cache/swarm/models');
  t.match(modelCacheDir({ HOME: '/h' }), /\/\.cache\/swarm\/models$/);
  t.match(modelCacheDir({ XDG_CACHE_HOME: 'relative' }), /\/\.cache\/swarm\/models$/, 'a relative XDG_CACHE_HOME is ignored (XDG spec)');
});

t.test('the demo model bytes are deterministic and small', async (t) => {
  const a = buildDemoModel();
  const b = buildDemoModel();
  t.ok(a.equals(b), 'same bytes every time');
  t.equal(a.subarray(0, 4).toString('ascii'), 'GGUF');
  t.ok(a.length < 4 * 1024 * 1024, `a few MB at most (${a.length} bytes)`);
  t.ok(a.includes(Buffer.from('its text is noise')), 'the file says it is noise');
});

t.test('ensureDemoModel writes once, then uses the cache; the model loads and generates', async (t) => {
  const dir = t.testdir();
  const env = { ...process.env, XDG_CACHE_HOME: dir };
  // Concurrent callers (workers starting together) must not see or leave half a file.
  const [p, p2] = await Promise.all([ensureDemoModel(env), ensureDemoModel(env)]);
  t.equal(p, demoModelPath(env));
  t.equal(p2, p);
  t.ok(p.startsWith(path.join(dir, 'swarm', 'models')), 'under $XDG_CACHE_HOME/swarm/models');
  t.same(fs.readdirSync(path.dirname(p)), [path.basename(p)], 'no temporary files left');
  const st = fs.statSync(p);
  t.equal(await ensureDemoModel(env), p);
  const st2 = fs.statSync(p);
  t.equal(st2.ino, st.ino, 'not rewritten');
  t.equal(st2.mtimeMs, st.mtimeMs, 'not rewritten');
  t.ok(fs.readFileSync(p).equals(buildDemoModel()), 'the cached file is the whole model');

  const d = new EmbeddedDriver({ name: 'embedded', model: p, options: {} });
  t.teardown(() => d.stop());
  await d.start();
  t.comment(`demo model load (ms): ${JSON.stringify(d.loadTimes)}`);
  const r = await collect(d.chat('Once upon a time', { maxTokens: 30, seed: 1 }));
  t.ok(r.text.trim().length > 0, `generates (noise): ${JSON.stringify(r.text)}`);
  t.equal((r.stats as { tokensOut: number }).tokensOut <= 30, true, 'maxTokens honoured');
  const j = await collect(d.chat('{', { maxTokens: 200, seed: 2, jsonSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } }));
  t.type((JSON.parse(j.text) as { ok: unknown }).ok, 'boolean', `JSON schema output parses on the demo model too: ${j.text}`);
  t.match(DEMO_MODEL_NOTICE, /noise/);
  t.match(DEMO_MODEL_NOTICE, /--model path\/to\/model\.gguf/);
});
