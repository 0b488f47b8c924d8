import fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { Readable } from 'node:stream';
import { SwarmError } from '../protocol/errors.js';

export type TaskInput = { prompt: string; id?: string; role?: string; priority?: number; max_tokens?: number } & Record<string, unknown>;

/** At most this many tasks in one upload. */
export const BATCH = 5000;
/** Bytes of tasks in one upload, well under the hub's 64 MiB body limit (300 KB prompts came to 90 MB in one batch). */
export const BATCH_BYTES = 16 * 1024 * 1024;

/**
 * The longest line read: past it nothing could be accepted (the hub takes bodies up to 64 MiB and a
 * task up to its --max-line, at most 8 MiB). Unbounded, a file with no line break (a model file given
 * by mistake, /dev/zero) was held whole: 2.2 GB after 20 s, until the process died.
 */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

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
    for await (const line of linesOf(input, file)) {
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
  } catch (err) {
    // The file itself (missing, a folder, unreadable) is a usage error naming it, not a bug.
    const code = (err as NodeJS.ErrnoException).code;
    if (!(err instanceof SwarmError) && typeof code === 'string' && /^E[A-Z]+$/.test(code)) {
      throw new SwarmError('SWARM_ERR_CONFIG', `--file ${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a directory, not a file of tasks' : code === 'EACCES' ? 'permission denied' : (err as Error).message}`, { cause: err });
    }
    throw err;
  } finally {
    if (file !== '-') input.destroy();
  }
}

/**
 * The lines of a stream, read as they are consumed: the stream's own iterator pauses it while a slice
 * is sent (readline's reads ahead, and held most of a 1 GB file in memory while the uploads ran).
 */
async function* linesOf(input: Readable, file: string): AsyncGenerator<string> {
  const decoder = new StringDecoder('utf8');
  // Pieces of a line that spans chunks, joined once it ends (no repeated copies of a long line).
  let pieces: string[] = [];
  let held = 0, lines = 0;
  for await (const chunk of input) {
    const s = typeof chunk === 'string' ? chunk : decoder.write(chunk as Buffer);
    let start = 0;
    for (let nl = s.indexOf('\n'); nl >= 0; nl = s.indexOf('\n', start)) {
      pieces.push(s.slice(start, nl));
      yield pieces.join('');
      lines++;
      pieces = [];
      held = 0;
      start = nl + 1;
    }
    if (start < s.length) {
      pieces.push(s.slice(start));
      held += s.length - start;
      // Characters, not bytes (a UTF-8 character is 1-4 bytes): a bound that holds either way.
      if (held > MAX_LINE_BYTES) throw new SwarmError('SWARM_ERR_TOO_LARGE', `${file}:${lines + 1}: a line longer than ${MAX_LINE_BYTES / 1048576} MiB (no line break): no task can be that large; is it a file of tasks, one per line?`);
    }
  }
  const last = pieces.join('') + decoder.end();
  if (last) yield last;
}

/** Bytes of `file` read so far and its size, for progress (undefined for stdin or a pipe). */
export function fileSize(file: string): number | undefined {
  if (file === '-') return undefined;
  try { const s = fs.statSync(file); return s.isFile() ? s.size : undefined; } catch { return undefined; }
}
