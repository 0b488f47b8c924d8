/**
 * Reads one turn of llama.cpp's interactive completion CLI (llama-completion, the classic `llama-cli`).
 * With `--color on` the CLI switches the terminal to its "user input" colours (bold green) exactly when
 * it starts waiting for input, and resets them when the input was read. So a turn's text is what comes
 * between the reset after our input and the next switch to input colours. No I/O here.
 */
export const INPUT_MARK = '\x1b[1m\x1b[32m';
export const RESET_MARK = '\x1b[0m';

type Phase = 'waiting' | 'echo' | 'text';

/** What one push produced: text of the turn, and whether the CLI is waiting for input again. */
export interface TurnStep { text: string; ready: boolean }

export class TurnReader {
  private phase: Phase = 'waiting';
  private buf = '';
  /** A trailing newline is held back: the CLI prints one of its own when the model ends its turn. */
  private heldNewline = false;

  /** The CLI reads a new input now (call right after writing the prompt). */
  beginTurn(): void {
    this.phase = 'echo';
    this.buf = '';
    this.heldNewline = false;
  }

  private cr = false;

  push(data: string): TurnStep {
    // Terminals write \r\n; a \r at a chunk's end waits to see whether \n follows.
    if (this.cr) { data = '\r' + data; this.cr = false; }
    if (data.endsWith('\r')) { data = data.slice(0, -1); this.cr = true; }
    this.buf += data.replace(/\r\n/g, '\n');
    let text = '';
    for (;;) {
      if (this.phase === 'waiting') {
        const i = this.buf.indexOf(INPUT_MARK);
        if (i < 0) { this.buf = this.buf.slice(-(INPUT_MARK.length - 1)); return { text, ready: false }; }
        this.buf = this.buf.slice(i + INPUT_MARK.length);
        return { text, ready: true };
      }
      if (this.phase === 'echo') {
        const i = this.buf.indexOf(RESET_MARK);
        if (i < 0) { this.buf = this.buf.slice(-(RESET_MARK.length - 1)); return { text, ready: false }; }
        this.buf = this.buf.slice(i + RESET_MARK.length);
        this.phase = 'text';
        continue;
      }
      // phase 'text'
      const i = this.buf.indexOf(INPUT_MARK);
      if (i >= 0) {
        text += this.emit(this.buf.slice(0, i), true);
        this.buf = this.buf.slice(i + INPUT_MARK.length);
        this.phase = 'waiting';
        return { text, ready: true };
      }
      // Keep back a possible start of the marker (it begins with ESC, which model text does not contain).
      let cut = this.buf.length;
      for (let i = Math.max(0, this.buf.length - INPUT_MARK.length + 1); i < this.buf.length; i++) {
        if (INPUT_MARK.startsWith(this.buf.slice(i))) { cut = i; break; }
      }
      text += this.emit(this.buf.slice(0, cut), false);
      this.buf = this.buf.slice(cut);
      return { text, ready: false };
    }
  }

  private emit(s: string, final: boolean): string {
    // Colour codes the CLI prints around text (e.g. a reset) are not model output.
    s = s.replace(/\x1b\[[0-9;]*m/g, '');
    if (this.heldNewline) { s = '\n' + s; this.heldNewline = false; }
    if (s.endsWith('\n')) {
      s = s.slice(0, -1);
      if (!final) this.heldNewline = true;
    }
    return s;
  }
}

/**
 * Encode a prompt as one input line for the CLI. Its line editor treats newlines, a trailing `\` or `/`
 * and control characters specially, and it un-escapes `\n`, `\\` and `\xNN`: so escape all of them,
 * and non-ASCII bytes too (the console need not run in a UTF-8 locale).
 */
export function encodePrompt(prompt: string): string {
  let out = '';
  for (const byte of Buffer.from(prompt, 'utf8')) {
    if (byte === 0x5c) out += '\\x5c';
    else if (byte === 0x0a) out += '\\n';
    else if (byte < 0x20 || byte >= 0x7f) out += `\\x${byte.toString(16).padStart(2, '0')}`;
    else out += String.fromCharCode(byte);
  }
  if (out.endsWith('/')) out = out.slice(0, -1) + '\\x2f';
  return out;
}
