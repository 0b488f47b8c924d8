/** One line of Ollama's streamed /api/generate answer (docs/api.md, "Generate a completion"). */
export interface GenerateChunk {
  model?: string;
  created_at?: string;
  response?: string;
  done?: boolean;
  done_reason?: string;
  prompt_eval_count?: number;
  eval_count?: number;
  total_duration?: number;
  eval_duration?: number;
  /** A mid-stream error: the line carries only this (docs/api/errors, "Errors that occur while streaming"). */
  error?: string;
}

/**
 * Splits an NDJSON byte stream into objects. Keeps a partial line across chunks and decodes UTF-8
 * across chunk borders; a line that is not a JSON object is an error (Ollama never sends one). No I/O.
 */
export class NdjsonDecoder {
  private readonly utf8 = new TextDecoder('utf-8');
  private partial = '';

  constructor(private readonly maxLine = 4 * 1024 * 1024) {}

  push(chunk: Uint8Array): GenerateChunk[] {
    const parts = (this.partial + this.utf8.decode(chunk, { stream: true })).split('\n');
    this.partial = parts.pop() ?? '';
    if (this.partial.length > this.maxLine) throw new Error(`NDJSON line longer than ${this.maxLine} characters`);
    return parts.map(parseLine).filter((x): x is GenerateChunk => x !== undefined);
  }

  /** A last line without a newline, when the stream ends. */
  end(): GenerateChunk[] {
    const line = this.partial + this.utf8.decode();
    this.partial = '';
    const obj = parseLine(line);
    return obj ? [obj] : [];
  }
}

function parseLine(raw: string): GenerateChunk | undefined {
  const line = raw.trim();
  if (line === '') return undefined;
  const obj: unknown = JSON.parse(line);
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) throw new Error(`NDJSON line is not an object: ${line.slice(0, 200)}`);
  return obj as GenerateChunk;
}
