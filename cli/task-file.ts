import fs from 'node:fs';
import readline from 'node:readline';
import { SwarmError } from '../protocol/errors.js';

export type TaskInput = { prompt: string; id?: string; role?: string; priority?: number; max_tokens?: number } & Record<string, unknown>;

/** At most this many tasks in one upload. */
export const BATCH = 5000;
/** Bytes of tasks in one upload, well under the hub's 64 MiB body limit (300 KB prompts came to 90 MB in one batch). */
export const BATCH_BYTES = 16 * 1024 * 1024;

/** One upload's tasks and the lines of the file they came from (1-based, inclusive). */
export interface Slice { tasks: TaskInput[]; firstLine: number; lastLine: number; /** Bytes of the file through lastLine. */ bytesRead: number }

/** The task a line of a task file is: a JSON object, or a plain-text prompt; a blank line is none. */
function parseLine(line: string, where: string): TaskInput | undefined {
  const l = line.trim();
  if (!l) return undefined;
  if (!l.startsWith('{')) return { prompt: l };
  try { return JSON.parse(l) as TaskInput; } catch (e) {
    throw new SwarmError('SWARM_ERR_BAD_JSON', `${where}: ${(e as Error).message}`);
  }
}

/**
 * The tasks of a JSONL file ("-": stdin) in uploads of at most `max` tasks and `maxBytes` bytes (a
 * task past that goes alone; the hub judges it), read line by line: a file of any size is held one
 * slice at a time, never whole (a 1 GB file read at once failed). `prepare` fills a task in (its id,
 * defaults) before it is measured. A malformed line throws SWARM_ERR_BAD_JSON naming it, after the
 * slices before it were yielded; the slice it falls in is not.
 */
export async function* taskSlices(file: string, prepare: (t: TaskInput, index: number) => void, maxBytes = BATCH_BYTES, max = BATCH): AsyncGenerator<Slice> {
  const input = file === '-' ? process.stdin : fs.createReadStream(file);
  // An unreadable file is an error of the stream, which readline does not pass on.
  const failed = new Promise<never>((_, reject) => input.once('error', reject));
  failed.catch(() => undefined);
  const lines = readline.createInterface({ input, crlfDelay: Infinity })[Symbol.asyncIterator]();
  let cur: TaskInput[] = [];
  let bytes = 0, lineNo = 0, firstLine = 1, index = 0, read = 0;
  try {
    for (;;) {
      const r = await Promise.race([lines.next(), failed]);
      if (r.done) break;
      lineNo++;
      const before = read;
      read += Buffer.byteLength(r.value) + 1;
      const t = parseLine(r.value, `${file}:${lineNo}`);
      if (!t) continue;
      prepare(t, index++);
      const n = Buffer.byteLength(JSON.stringify(t)) + 1;
      if (cur.length && (cur.length >= max || bytes + n > maxBytes)) {
        yield { tasks: cur, firstLine, lastLine: lineNo - 1, bytesRead: before };
        cur = []; bytes = 0; firstLine = lineNo;
      }
      cur.push(t);
      bytes += n;
    }
    if (cur.length) yield { tasks: cur, firstLine, lastLine: lineNo, bytesRead: read };
  } finally {
    await lines.return?.();
    if (file !== '-') (input as fs.ReadStream).destroy();
  }
}

/** Bytes of `file` read so far and its size, for progress (undefined for stdin or a pipe). */
export function fileSize(file: string): number | undefined {
  if (file === '-') return undefined;
  try { const s = fs.statSync(file); return s.isFile() ? s.size : undefined; } catch { return undefined; }
}
