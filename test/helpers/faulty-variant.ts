import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** A CPU variant that scores above every real one and dies of SIGILL as ggml initialises it. */
const FAULTY = `#include <signal.h>
#include <stdio.h>
int ggml_backend_score(void) { return 1 << 30; }
void *ggml_backend_init(void) { FILE *f = fopen(LOG, "a"); if (f) { fputs("sigill\\n", f); fclose(f); } raise(SIGILL); return 0; }
`;

/**
 * The prebuilt addon's files linked into a folder of `tmp` (the addon loads its CPU variants from its
 * own folder); with `faulty`, its top variant replaced by one that faults as it loads. Returns the addon file.
 */
export function prebuiltCopy(tmp: string, real: string, faulty?: { log: string }): string | undefined {
  const addon = path.join(tmp, 'addon');
  fs.mkdirSync(addon);
  if (faulty) {
    const src = path.join(tmp, 'faulty.c');
    fs.writeFileSync(src, FAULTY);
    const out = spawnSync('gcc', ['-shared', '-fPIC', `-DLOG=${JSON.stringify(faulty.log)}`, '-o', path.join(addon, 'libggml-cpu-sapphirerapids.so'), src], { encoding: 'utf8' });
    if (out.status !== 0) return undefined;
  }
  for (const n of fs.readdirSync(real)) if (!n.startsWith('.') && !(faulty && n === 'libggml-cpu-sapphirerapids.so')) fs.symlinkSync(path.join(real, n), path.join(addon, n));
  return path.join(addon, 'llama-addon.node');
}

