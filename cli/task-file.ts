import fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { Readable } from 'node:stream';
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
  const input: Readable = file === '-' ? process.stdin : fs.createReadStream(file);
  let cur: TaskInput[] = [];
  let bytes = 0, lineNo = 0, firstLine = 1, index = 0, read = 0;
  try {
    for await (const line of linesOf(input)) {
      lineNo++;
      const before = read;
      read += Buffer.byteLength(line) + 1;
      const t = parseLine(line, `${file}:${lineNo}`);
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
    if (file !== '-') input.destroy();
  }
}

/**
 * The lines of a stream, read as they are consumed: the stream's own iterator pauses it while a slice
 * is sent (readline's reads ahead, and held most of a 1 GB file in memory while the uploads ran).
 */
async function* linesOf(input: Readable): AsyncGenerator<string> {
  const decoder = new StringDecoder('utf8');
  // Pieces of a line that spans chunks, joined once it ends (no repeated copies of a long line).
  let pieces: string[] = [];
  for await (const chunk of input) {
    const s = typeof chunk === 'string' ? chunk : decoder.write(chunk as Buffer);
    let start = 0;
    for (let nl = s.indexOf('\n'); nl >= 0; nl = s.indexOf('\n', start)) {
      pieces.push(s.slice(start, nl));
      yield pieces.join('');
      pieces = [];
      start = nl + 1;
    }
    if (start < s.length) pieces.push(s.slice(start));
  }
  const last = pieces.join('') + decoder.end();
  if (last) yield last;
}

/** Bytes of `file` read so far and its size, for progress (undefined for stdin or a pipe). */
export function fileSize(file: string): number | undefined {
  if (file === '-') return undefined;
  try { const s = fs.statSync(file); return s.isFile() ? s.size : undefined; } catch { return undefined; }
}
