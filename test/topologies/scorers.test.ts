import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ScorerSchema, type Scorer } from '../../topologies/schema.js';
import { gradeOf, lastNumber, scoreExec, scorePure, voteKey } from '../../topologies/scorers/index.js';

const sc = (o: unknown) => ScorerSchema.parse(o) as Exclude<Scorer, { type: 'judge' | 'exec' }>;
const score = (o: unknown, answer: string, expected: unknown) => scorePure(sc(o), answer, expected).score;

t.test('exact: normalisation options', async (t) => {
  t.equal(score({ type: 'exact' }, '  Paris \n', 'paris'), 1, 'case-folded and trimmed by default');
  t.equal(score({ type: 'exact', case_sensitive: true }, 'Paris', 'paris'), 0);
  t.equal(score({ type: 'exact' }, 'Paris.', 'paris'), 0, 'punctuation counts unless stripped');
  t.equal(score({ type: 'exact', strip_punctuation: true }, 'Paris.', 'paris'), 1);
  t.equal(score({ type: 'exact' }, 'new   york', 'New York'), 1, 'whitespace collapses');
  t.equal(score({ type: 'exact', extract: 'last_line' }, 'Let me think.\nParis\n\n', 'Paris'), 1);
  t.equal(score({ type: 'exact', extract: 'last_number' }, 'So 3+4 = 7.', 7), 1, 'numbers against a numeric reference');
  t.equal(score({ type: 'exact', extract: 'last_number' }, 'no digits here', '7'), 0);
  t.equal(score({ type: 'exact', extract: 'last_number' }, 'it is 1,234', '1234'), 1, 'thousands separators');
  t.equal(score({ type: 'exact', after: 'Answer:' }, 'Answer: 3 is wrong. Answer: 4', '4'), 1, 'after the last marker');
  t.equal(score({ type: 'exact', after: 'Answer:' }, '4', '4'), 1, 'no marker: the whole answer');
  t.equal(score({ type: 'exact' }, '', ''), 1, 'empty equals empty');
  t.equal(scorePure(sc({ type: 'exact' }), 'x', undefined).score, null, 'no reference: not scored');
  t.equal(score({ type: 'exact' }, 'ﬁ', 'fi'), 1, 'NFKC');
});

t.test('contains: substring after normalisation; an empty reference proves nothing', async (t) => {
  t.equal(score({ type: 'contains' }, 'The capital is PARIS, of course', 'paris'), 1);
  t.equal(score({ type: 'contains' }, 'The capital is Lyon', 'paris'), 0);
  t.equal(score({ type: 'contains' }, 'anything', ''), 0);
  t.equal(score({ type: 'contains', case_sensitive: true }, 'PARIS', 'paris'), 0);
});

t.test('regex: {{expected}} is escaped; flags; an invalid pattern is a config error', async (t) => {
  t.equal(score({ type: 'regex', pattern: '\\b{{expected}}\\b' }, 'it costs 3.50 now', '3.50'), 1);
  t.equal(score({ type: 'regex', pattern: '\\b{{expected}}\\b' }, 'it costs 3550 now', '3.50'), 0, 'the dot in the reference is literal');
  t.equal(score({ type: 'regex', pattern: '^answer: (yes|no)$', flags: 'im' }, 'hm\nAnswer: yes', 'x'), 1);
  t.equal(score({ type: 'regex', pattern: '^answer', flags: '' }, 'Answer', 'x'), 0, 'case-sensitive without i');
  t.notOk(ScorerSchema.safeParse({ type: 'regex', pattern: '(' }).success);
  t.notOk(ScorerSchema.safeParse({ type: 'regex', pattern: 'a', flags: 'g' }).success, 'g would make exec stateful');
});

t.test('numeric: last number, tolerances, bad references', async (t) => {
  t.equal(lastNumber('first 3, then -4.5e1'), -45);
  t.equal(lastNumber('none'), undefined);
  t.equal(score({ type: 'numeric' }, 'The answer is 42.', '42'), 1);
  t.equal(score({ type: 'numeric' }, 'I think 41, no wait, 42', 42), 1, 'the last number counts');
  t.equal(score({ type: 'numeric' }, '42 is not it, 43', 42), 0);
  t.equal(score({ type: 'numeric', tolerance: 0.001 }, '3.14159', '3.14'), 0, 'outside 0.001');
  t.equal(score({ type: 'numeric', tolerance: 0.002 }, '3.14159', '3.14'), 1);
  t.equal(score({ type: 'numeric', relative: 0.05 }, '104', 100), 1);
  t.equal(score({ type: 'numeric', relative: 0.05 }, '106', 100), 0);
  t.equal(score({ type: 'numeric' }, '-7', '-7'), 1, 'negative numbers');
  t.equal(score({ type: 'numeric' }, '.5', 0.5), 1, 'leading dot');
  t.equal(scorePure(sc({ type: 'numeric' }), 'no number', 3).error, 'no number in the answer');
  t.equal(scorePure(sc({ type: 'numeric' }), '3', 'three').score, null, 'a non-numeric reference is not scored');
});

t.test('json_field: path, expected in the scorer or the item, garbage', async (t) => {
  t.equal(score({ type: 'json_field', path: 'answer' }, 'Sure: {"answer": 42}', '42'), 1, 'numbers compare as numbers');
  t.equal(score({ type: 'json_field', path: 'a.b.1' }, '{"a": {"b": ["x", "Y "]}}', 'y'), 1, 'array index, trimmed, case-folded');
  t.equal(score({ type: 'json_field', path: 'ok', expected: true }, '{"ok": true}', undefined), 1, 'the scorer\'s own expected');
  t.equal(score({ type: 'json_field', path: 'tags' }, '{"tags": {"b": 1, "a": 2}}', { a: 2, b: 1 }), 1, 'objects structurally');
  t.equal(score({ type: 'json_field', path: 'answer' }, 'no json', '1'), 0);
  t.equal(score({ type: 'json_field', path: 'missing' }, '{"answer": 1}', '1'), 0);
  t.equal(score({ type: 'json_field', path: 'answer' }, '{"answer": ""}', 0), 0, 'an empty string is not 0');
});

t.test('judge: the grader\'s verdict as a score', async (t) => {
  t.equal(gradeOf('{"verdict": "correct"}'), 1);
  t.equal(gradeOf('```json\n{"verdict": " Partly "}\n```'), 0.5);
  t.equal(gradeOf('{"verdict": "incorrect"}'), 0);
  t.equal(gradeOf('{"verdict": "maybe"}'), undefined);
  t.equal(gradeOf('Once upon a time'), undefined);
});

t.test('votes compare what the scorer compares', async (t) => {
  t.equal(voteKey(sc({ type: 'numeric' }), 'so 1,000 it is'), '1000');
  t.equal(voteKey(sc({ type: 'exact', extract: 'last_line' }), 'x\n  Paris '), 'paris');
  t.equal(voteKey(undefined, ' A  b '), 'a b');
});

t.test('exec: a command reads answer and item on stdin and prints a score', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scorer-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const js = (name: string, body: string) => { fs.writeFileSync(path.join(dir, name), body); return [process.execPath, name]; };
  const good = js('good.mjs', `let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const o=JSON.parse(s);console.log('log line');console.log(o.answer.includes(o.item.expected)?1:0.25)})`);
  t.same(await scoreExec(good, 'it is 42', { expected: '42' }, { cwd: dir, timeout_ms: 10_000 }), { score: 1, extracted: '1' });
  t.equal((await scoreExec(good, 'it is 41', { expected: '42' }, { cwd: dir, timeout_ms: 10_000 })).score, 0.25, 'partial credit; the last line counts');
  const out = js('out.mjs', 'console.log(2)');
  t.match(await scoreExec(out, 'a', {}, { cwd: dir, timeout_ms: 10_000 }), { score: 0, error: /not a score in \[0, 1\]/ });
  const bad = js('bad.mjs', 'console.error("boom"); process.exit(3)');
  t.match(await scoreExec(bad, 'a', {}, { cwd: dir, timeout_ms: 10_000 }), { score: 0, error: /exited with 3: boom/ });
  const slow = js('slow.mjs', 'setTimeout(() => {}, 60000)');
  t.match(await scoreExec(slow, 'a', {}, { cwd: dir, timeout_ms: 200 }), { score: 0, error: /timed out/ });
  t.match(await scoreExec(['/nonexistent/scorer'], 'a', {}, { cwd: dir, timeout_ms: 1000 }), { score: 0, error: /did not start/ });
});
