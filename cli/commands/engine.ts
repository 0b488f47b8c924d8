import type { Command } from 'commander';
import { buildAddon, buildLlama, findLlamaBinary, findSelfBuiltAddon, LLAMA_BINARIES, type BuildProgress } from '../../drivers/llama-build/index.js';
import { rememberedChoice } from '../../drivers/llama-build/cpu-variant.js';
import { describeChoice, engineLadder, rememberedAddonChoice, selfBuiltLadder, type AddonLadder } from '../../drivers/llama-build/addon-variant.js';
import { probeFlashAttn, type FlashAttnSetting } from '../../drivers/batched/flash-attn.js';
import { fail } from '../exit.js';
import { int, oneOf } from '../options.js';
import { Progress } from '../progress.js';

interface BuildFlags { out?: string; jobs: number; force: boolean; json: boolean; quiet: boolean; addon: boolean }

/**
 * What a cold build costs, said before it starts (measured with `/usr/bin/time`: docs/engines.md). The
 * addon's: 505 CPU-seconds, 21 min of wall niced beside other work at load 3-12 on 2 vCPUs.
 */
const EXPECTED = {
  addon: 'about 8-9 CPU-minutes: 5 min on 2 idle cores, 20 min or more beside other work',
  llama: 'about 4-5 min on 2 idle cores, longer beside other work',
};

function describe(p: BuildProgress, t0: number, addon: boolean): string {
  const s = Math.round((Date.now() - t0) / 1000);
  const what = addon ? 'engine build --addon' : 'engine build';
  if (p.phase === 'compile') return `${what}: compiling ${p.percent ?? 0}% (${s}s; ${addon ? EXPECTED.addon : EXPECTED.llama})`;
  return `${what}: ${p.phase} (${s}s)`;
}

/** The progress callback: the expected duration once, as the build starts (a cached build says nothing), then the bar. */
function progress(bar: Progress, quiet: boolean, t0: number, addon: boolean): (p: BuildProgress) => void {
  let said = false;
  return (p) => {
    if (!said && !quiet) {
      said = true;
      process.stderr.write(`engine build${addon ? ' --addon' : ''}: building from source, ${addon ? `${EXPECTED.addon}; an interrupted build resumes where it stopped` : EXPECTED.llama}\n`);
    }
    bar.update(describe(p, t0, addon));
  };
}

/** `swarm engine build|which`: build llama.cpp's programs from the bundled source, and show where they are. */
export function registerEngine(program: Command): void {
  const engine = program.command('engine').description('llama.cpp engine programs (llama-server, llama-cli, …)');

  engine.command('build')
    .description('build llama-server, llama-cli, llama-completion, llama-bench, llama-quantize from the llama.cpp source in node-llama-cpp (no network; cached)')
    .option('--out <dir>', 'install directory (env SWARM_LLAMA_BIN_DIR, default $XDG_CACHE_HOME/swarm/llama.cpp/<source>/bin)')
    .option('-j, --jobs <n>', 'parallel compile jobs', int('--jobs', 1), 2)
    .option('--force', 'rebuild even when the binaries are already there', false)
    .option('--json', 'print one JSON object {bin_dir, binaries, seconds, cached}', false)
    .option('-q, --quiet', 'no progress on stderr', false)
    .option('--addon', "build node-llama-cpp's addon instead, with a unified KV cache option, which the batched engine then loads (default dir $XDG_CACHE_HOME/swarm/node-llama-cpp/<version>-<source>-…)", false)
    .action(async (o: BuildFlags) => {
      const bar = new Progress(o.quiet);
      const t0 = Date.now();
      const ac = new AbortController();
      const onSig = (): void => ac.abort();
      process.once('SIGINT', onSig);
      process.once('SIGTERM', onSig);
      try {
        if (o.addon) {
          const r = await buildAddon({
            ...(o.out ? { outDir: o.out } : {}), jobs: o.jobs, force: o.force, signal: ac.signal, onProgress: progress(bar, o.quiet, t0, true),
          });
          bar.done();
          if (o.json) { process.stdout.write(JSON.stringify(r) + '\n'); return; }
          process.stdout.write(r.cached
            ? `node-llama-cpp addon already built in ${r.dir} (--force rebuilds)\n`
            : `built node-llama-cpp ${r.nlc_version}'s addon (llama.cpp ${r.source}) in ${r.seconds}s: ${r.addon}\n`);
          return;
        }
        const r = await buildLlama({
          ...(o.out ? { outDir: o.out } : {}),
          jobs: o.jobs,
          force: o.force,
          signal: ac.signal,
          onProgress: progress(bar, o.quiet, t0, false),
        });
        bar.done();
        if (o.json) { process.stdout.write(JSON.stringify(r) + '\n'); return; }
        process.stdout.write(r.cached
          ? `llama.cpp programs already built in ${r.bin_dir} (source ${r.source}; --force rebuilds)\n`
          : `built llama.cpp ${r.source} in ${r.seconds}s: ${Object.keys(r.binaries).join(', ')} in ${r.bin_dir}\n`);
      } catch (err) {
        bar.done();
        fail(err, o.json);
      } finally {
        process.off('SIGINT', onSig);
        process.off('SIGTERM', onSig);
      }
    });

  engine.command('which')
    .description('show where each llama.cpp program is found (SWARM_LLAMA_BIN_DIR, the build cache, then PATH)')
    .option('--json', 'print one JSON object {name: path|null}', false)
    .option('--model <path>', 'also say whether the batched engine runs this model with flash attention, and why (as `swarm up` would start it: --agents, --ctx)')
    .option('--agents <n>', 'with --model: the engine\'s sequences (agents x slots, as `swarm up --agents`)', int('--agents', 1), 4)
    .option('--ctx <n>', 'with --model: context tokens per sequence (`--driver-opt ctx`)', int('--ctx', 16), 2048)
    .option('--flash-attn <auto|on|off>', 'with --model: `--driver-opt flash_attn`', oneOf<FlashAttnSetting>('--flash-attn', ['auto', 'on', 'off']), 'auto')
    .action(async (o: { json: boolean; model?: string; agents: number; ctx: number; flashAttn: FlashAttnSetting }) => {
      const found: Record<string, string | null> = Object.fromEntries(LLAMA_BINARIES.map((n) => [n, findLlamaBinary(n) ?? null]));
      found['llama-addon'] = findSelfBuiltAddon()?.addon ?? null;
      // A CPU that faulted in ggml's best variant (SIGILL) runs a lesser one from then on: say which.
      const variant = found['llama-server'] ? rememberedChoice(found['llama-server']) : undefined;
      // The same for the batched engine's addon: what it loads after an engine died of SIGILL here.
      const own = findSelfBuiltAddon();
      const remembered = (ladder: AddonLadder | undefined) => {
        const rec = ladder ? rememberedAddonChoice(ladder) : undefined;
        return ladder && rec ? { choice: describeChoice(ladder, rec), died: rec.died } : undefined;
      };
      const addonChoice = remembered(own ? selfBuiltLadder(own) : undefined);
      // The per-worker engine (and a batched one without a self-built addon) climbs the prebuilt addon's variants alone.
      const prebuiltChoice = remembered(engineLadder({ selfBuilt: false, override: process.env.SWARM_TEST_EMBEDDED_ADDON || undefined }));
      let fa: Awaited<ReturnType<typeof probeFlashAttn>> | undefined;
      if (o.model) {
        try { fa = await probeFlashAttn(o.model, { setting: o.flashAttn, sequences: o.agents, ctx: o.ctx }); } catch (err) { fail(err, o.json); return; }
      }
      const onOff = (c: { on: boolean }) => (c.on ? 'on' : 'off');
      if (o.json) {
        const extra = { ...(variant ? { cpu_variant: variant } : {}), ...(addonChoice ? { addon_choice: addonChoice } : {}), ...(prebuiltChoice ? { prebuilt_addon_choice: prebuiltChoice } : {}) };
        process.stdout.write(JSON.stringify(fa ? { ...found, ...extra, flash_attn: onOff(fa), flash_attn_why: fa.why, kv: fa.kv.unified ? 'unified' : 'per sequence', sequences: fa.kv.sequences, ctx: fa.kv.ctx } : { ...found, ...extra }) + '\n');
        return;
      }
      const lines = Object.entries(found).map(([n, p]) => `${n.padEnd(18)}${p ?? (n === 'llama-addon' ? "node-llama-cpp's prebuilt (`swarm engine build --addon` builds one with a unified KV cache)" : 'not found (run `swarm engine build`)')}`);
      if (variant) lines.push(`${'cpu variant'.padEnd(18)}${variant.chosen ?? 'none'} (${variant.excluded.join(', ')} killed llama-server with SIGILL on this CPU; hidden from it)`);
      if (addonChoice) lines.push(`${'addon choice'.padEnd(18)}${addonChoice.choice} (killed by SIGILL on this CPU: ${addonChoice.died.join('; ')})`);
      if (prebuiltChoice) lines.push(`${'prebuilt choice'.padEnd(18)}${prebuiltChoice.choice} (killed by SIGILL on this CPU: ${prebuiltChoice.died.join('; ')})`);
      if (fa) lines.push(`${'flash attention'.padEnd(18)}${onOff(fa)} (${fa.why}); for ${fa.kv.sequences} sequence(s) of ${fa.kv.ctx} tokens, KV ${fa.kv.unified ? 'unified' : 'per sequence'}`);
      process.stdout.write(lines.join('\n') + '\n');
    });
}
