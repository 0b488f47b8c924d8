/** One event from llama-server's streaming /completion: a `data:` JSON object, or an `error:` one. */
export type SseEvent = { kind: 'data'; data: CompletionChunk } | { kind: 'error'; data: { code?: number; message?: string; type?: string } };

/** The fields of a streamed /completion object that the driver reads (llama.cpp tools/server/README.md). */
export interface CompletionChunk {
  content?: string;
  stop?: boolean;
  stop_type?: 'none' | 'eos' | 'limit' | 'word';
  stopping_word?: string;
  tokens_evaluated?: number;
  tokens_predicted?: number;
  timings?: { prompt_n?: number; predicted_n?: number; predicted_per_second?: number; prompt_per_second?: number };
  error?: { code?: number; message?: string; type?: string };
}

/**
 * Splits a server-sent-event byte stream into events. Keeps a partial line across chunks, decodes
 * UTF-8 across chunk borders, skips comment lines (`: ping`) and blank separators. No I/O.
 */
export class SseDecoder {
  private readonly utf8 = new TextDecoder('utf-8');
  private partial = '';

  constructor(private readonly maxLine = 4 * 1024 * 1024) {}

  push(chunk: Uint8Array): SseEvent[] {
    const parts = (this.partial + this.utf8.decode(chunk, { stream: true })).split('\n');
    this.partial = parts.pop() ?? '';
    if (this.partial.length > this.maxLine) throw new Error(`SSE line longer than ${this.maxLine} characters`);
    const out: SseEvent[] = [];
    for (const raw of parts) {
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      const ev = parseLine(line);
      if (ev) out.push(ev);
    }
    return out;
  }

  /** Whatever is left when the stream ends (a last line without a newline). */
  end(): SseEvent[] {
    const line = this.partial + this.utf8.decode();
    this.partial = '';
    const ev = parseLine(line.trimEnd());
    return ev ? [ev] : [];
  }
}

function parseLine(line: string): SseEvent | undefined {
  if (line === '' || line.startsWith(':')) return undefined;
  const i = line.indexOf(':');
  if (i < 0) return undefined;
  const field = line.slice(0, i);
  const value = line.slice(i + 1).trimStart();
  if (field !== 'data' && field !== 'error') return undefined;
  if (value === '[DONE]') return undefined;
  let obj: unknown;
  try { obj = JSON.parse(value); } catch { return undefined; }
  if (typeof obj !== 'object' || obj === null) return undefined;
  if (field === 'error') return { kind: 'error', data: obj as { code?: number; message?: string; type?: string } };
  const chunk = obj as CompletionChunk;
  if (chunk.error) return { kind: 'error', data: chunk.error };
  return { kind: 'data', data: chunk };
}
