/**
 * A final replica entry as a holder keeps it: its prompt and its result's text, most of a holder's
 * bytes, in one Buffer outside the JS heap; the rest (ids, lease, workers, attempts, MACs) stays an
 * object, which is all that a merge, a fingerprint or a state count reads. Strings kept on the heap
 * made V8's old space grow to a multiple of the live bytes (its headroom for garbage scales with
 * them), and with it the holders' RSS; a Buffer's bytes are freed with it, whatever the heap's size.
 * An entry is unpacked only when all of it is needed: a handback, a sync to a peer, a takeover.
 */
import type { ReplicaEntry } from '../../protocol/index.js';

/** A stored entry: a `blob` means `spec.prompt` and `result.text` live there, not on the objects. */
export type Stored = ReplicaEntry & { blob?: Buffer };

/** How a string is held: absent, one byte per character (ASCII), or UTF-16 (any string, exactly). */
const NONE = 0, ASCII = 1, UTF16 = 2;
const HEAD = 8;

function kindOf(s: string | undefined): number {
  if (s === undefined) return NONE;
  // UTF-16 keeps any JS string as it was (a lone surrogate too, which UTF-8 would replace): its MAC still holds.
  return Buffer.byteLength(s, 'utf8') === s.length ? ASCII : UTF16;
}
const bytesOf = (s: string | undefined, k: number) => (k === NONE ? 0 : k === ASCII ? s!.length : 2 * s!.length);

/** The two strings in one Buffer: [prompt kind, text kind, 0, 0, prompt bytes (u32)], prompt, text. */
function encode(p: string | undefined, t: string | undefined): Buffer {
  const pk = kindOf(p), tk = kindOf(t);
  const pb = bytesOf(p, pk);
  // Not pooled: a pooled slice would keep its whole 8 KB pool alive as long as the entry.
  const b = Buffer.allocUnsafeSlow(HEAD + pb + bytesOf(t, tk));
  b[0] = pk; b[1] = tk; b[2] = 0; b[3] = 0;
  b.writeUInt32LE(pb, 4);
  if (pk !== NONE) b.write(p!, HEAD, pk === ASCII ? 'latin1' : 'utf16le');
  if (tk !== NONE) b.write(t!, HEAD + pb, tk === ASCII ? 'latin1' : 'utf16le');
  return b;
}

/**
 * This process's blobs by task id, so the agents of one process that hold the same entry share its
 * bytes: in gossip mode every member pulls the whole hot state, and a process runs several members.
 * Weak: an entry's blob goes when the last replica holding it drops it.
 */
const shared = new Map<string, WeakRef<Buffer>>();
const reaper = new FinalizationRegistry<string>((id) => { if (!shared.get(id)?.deref()) shared.delete(id); });
function intern(id: string, b: Buffer): Buffer {
  const had = shared.get(id)?.deref();
  if (had?.equals(b)) return had;
  shared.set(id, new WeakRef(b));
  reaper.register(b, id);
  return b;
}

function decode(b: Buffer): { p?: string; t?: string } {
  const pk = b[0]!, tk = b[1]!, pb = b.readUInt32LE(4);
  return {
    p: pk === NONE ? undefined : b.toString(pk === ASCII ? 'latin1' : 'utf16le', HEAD, HEAD + pb),
    t: tk === NONE ? undefined : b.toString(tk === ASCII ? 'latin1' : 'utf16le', HEAD + pb),
  };
}

/**
 * `e` (final, just merged) as it is to be stored. `prev` is the stored entry it was merged onto:
 * where `e` still has `prev`'s spec or result object, that is a shell whose string is in `prev.blob`.
 * A merge that changed neither (a lease, a seq) keeps the blob as it is: nothing is re-encoded.
 */
export function pack(e: Stored, prev: Stored | undefined): Stored {
  const old = prev?.blob;
  const specShell = !!old && e.spec === prev!.spec, resultShell = !!old && e.result === prev!.result;
  if (old && specShell && resultShell) return e;
  const was = old ? decode(old) : undefined;
  const p = specShell ? was!.p : e.spec?.prompt;
  const t = resultShell ? was!.t : e.result?.text;
  const out: Stored = { ...e };
  if (p === undefined && t === undefined) { delete out.blob; return out; }
  if (e.spec && !specShell && 'prompt' in e.spec) { const { prompt: _p, ...rest } = e.spec; out.spec = rest; }
  if (e.result && !resultShell && 'text' in e.result) { const { text: _t, ...rest } = e.result; out.result = rest; }
  out.blob = intern(e.id, encode(p, t));
  return out;
}

/** The whole entry, strings back in place (a new object; the stored one is left as it is). */
export function unpack(s: Stored): ReplicaEntry {
  if (!s.blob) return s;
  const { blob, ...e } = s;
  const { p, t } = decode(blob);
  if (p !== undefined && e.spec) e.spec = { ...e.spec, prompt: p };
  if (t !== undefined && e.result) e.result = { ...e.result, text: t };
  return e;
}

/** Bytes of prompts and texts held outside the heap (tests and benches read it). */
export function blobBytes(s: Stored): number { return s.blob?.length ?? 0; }
