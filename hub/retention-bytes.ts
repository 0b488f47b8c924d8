import { RESULT_HEAD, TASK_HEAD, startsWith } from './journal-record.js';
import { ReplayedTask } from './replayed.js';
import type { RawLine } from './journal.js';
import { isFinal, type TaskRecord } from './task.js';

/**
 * What a finished task holds in the hub besides its texts: the record, its spec and result objects,
 * their ids and numbers, the queue's entry and retention's. Measured with 1-character prompts at
 * 50,000 hot tasks: 471 bytes a task live, 550 replayed (`node dist/bench/hot-bytes.js`,
 * docs/journal.md "The bytes bound"). Counted in every task's bytes so that the bytes bound the hub's
 * memory for tasks of any size, a million of 10-byte prompts as well as a thousand of 1 MB ones.
 */
export const RECORD_BYTES = 500;

/**
 * The bytes a finished task holds hot, as the `--retain` bytes bound counts them: its prompt and
 * grammar, its result's text or its error's message (a character a byte, which is what V8 holds for
 * ASCII and Latin-1 text; other text takes two bytes a character there and counts one), and
 * RECORD_BYTES. A task replayed from the journal whose lines are still unparsed is counted from the
 * lines themselves (the texts' spans as the journal holds them, escapes included): parsing every hot
 * task at open to measure it would undo the lazy replay (hub/replayed.ts).
 */
export function taskBytes(rec: TaskRecord): number {
  const replayed = rec instanceof ReplayedTask && isFinal(rec) ? rec : undefined;
  if (replayed && replayed.hotBytes >= 0) return replayed.hotBytes;
  let n = RECORD_BYTES;
  const task = rec instanceof ReplayedTask ? rec.taskLine : undefined;
  if (task) n += taskTextSpans(task);
  else n += rec.spec.prompt.length + (rec.spec.grammar?.length ?? 0);
  const result = rec instanceof ReplayedTask ? rec.resultLine : undefined;
  if (result) n += resultTextSpan(result);
  else if (rec.state === 'done') n += rec.result?.text.length ?? 0;
  else n += rec.error?.msg.length ?? 0;
  if (replayed) replayed.hotBytes = n;
  return n;
}

const PROMPT_KEY = Buffer.from('"prompt":"');
/** The id's end and the prompt's key, as the writer puts them when the client's spec has the prompt first. */
const ID_PROMPT = Buffer.from('","prompt":"');
const GRAMMAR_KEY = Buffer.from('"grammar":"');
const TEXT_KEY = Buffer.from('","text":"');
const WORKER_KEY = Buffer.from('","worker":');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The prompt's and grammar's spans of a task line. In the writer's form with the prompt right after
 * the id (`{"t":"task","spec":{"id":"…","prompt":"`), the prompt is found there and a grammar can
 * only follow it: two short searches, not two of the whole line (a third of a restart's count of
 * its segment's tasks). Any other line: searched whole.
 */
function taskTextSpans(l: RawLine): number {
  const { buf, end } = l;
  let q = l.start + TASK_HEAD.length;
  if (!startsWith(buf, l.start, TASK_HEAD)) return quotedSpan(l, PROMPT_KEY) + quotedSpan(l, GRAMMAR_KEY);
  // The id has no `"` (the writer's form escapes none in it): it ends at the first quote.
  while (q < end && buf[q] !== QUOTE) q++;
  if (!startsWith(buf, q, ID_PROMPT)) return quotedSpan(l, PROMPT_KEY) + quotedSpan(l, GRAMMAR_KEY);
  const from = q + ID_PROMPT.length;
  const prompt = closingQuote(l, from) - from;
  return prompt + quotedSpan(l, GRAMMAR_KEY, from + prompt);
}

/**
 * The bytes of the JSON string after `key` in a line. `key` cannot match inside a string value: a
 * `"` there is escaped (`\"`), and the key's own quotes are not. 0 if the line has no such key.
 */
function quotedSpan(l: RawLine, key: Buffer, after = l.start): number {
  // Searched in the line only: a line lies in a read buffer of a MiB or more, and a key the line
  // lacks (a grammar, mostly) searched to the buffer's end made every replayed task a scan of it
  // (TaskStore.open 0.6 -> 148 s of CPU for 100,000 hot tasks).
  const at = indexIn(l, key, after);
  if (at < 0) return 0;
  const from = at + key.length;
  return closingQuote(l, from) - from;
}

/** Where the JSON string starting at `from` ends: its first quote not escaped (an even run of backslashes before it), or the line's end. */
function closingQuote(l: RawLine, from: number): number {
  for (let q = l.buf.indexOf(QUOTE, from); q >= 0 && q < l.end; q = l.buf.indexOf(QUOTE, q + 1)) {
    let k = q - 1;
    while (k >= from && l.buf[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q;
  }
  return l.end;
}

/** The bytes of a result line's text (the writer's form: id, text, then worker; hub/replayed.ts). */
function resultTextSpan(l: RawLine): number {
  const { buf, start, end } = l;
  let q = start + RESULT_HEAD.length;
  while (q < end && buf[q] !== QUOTE) q++;
  if (q + TEXT_KEY.length > end || buf.compare(TEXT_KEY, 0, TEXT_KEY.length, q, q + TEXT_KEY.length) !== 0) return quotedSpan(l, TEXT_KEY.subarray(2));
  const from = q + TEXT_KEY.length;
  // The text is followed by the worker's key in this form (a `"` inside the text is escaped), so the
  // search ends in the line; one past it (a line not so formed) counts to the line's end.
  const w = buf.indexOf(WORKER_KEY, from);
  return w >= 0 && w < end ? w - from : end - from;
}

/** Where `key` is in line `l` at or after `from`, or -1 (never past the line's end). */
function indexIn(l: RawLine, key: Buffer, from: number): number {
  if (from >= l.end) return -1;
  const at = l.buf.subarray(from, l.end).indexOf(key);
  return at < 0 ? -1 : from + at;
}
