#!/bin/bash
# On another machine (bench/lent/pack.sh made .lent/ here): unpack node, the built project and the engines; make the synth models; run the
# swarm-vs-server cells in priority order until the deadline. Usage: bash bench/lent/run.sh DEADLINE_S [cells...]
set -uo pipefail
cd "$(dirname "$0")/../.."
t0=$(date +%s); deadline=$(( t0 + ${1:-480} )); shift
OUT=${OUT:-/tmp/lent-out}; mkdir -p $OUT
W=${LENT_W:-/tmp/lent}; mkdir -p $W/bin $W/models
log() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a $OUT/log; }
[ -x $W/bin/node ] || xz -dc .lent/node.xz > $W/bin/node; chmod +x $W/bin/node
export PATH=$W/bin:$PATH
[ -d dist ] || tar -xJf .lent/app.tar.xz
tar -xJf .lent/eng.tar.xz -C $HOME
tar -xJf .lent/synth.tar.xz -C $W
cp $W/gitRelease.bundle node_modules/node-llama-cpp/llama/gitRelease.bundle
BIN=$(ls -d $HOME/.cache/swarm/llama.cpp/*/bin | head -1)
log "unpacked; $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo); flags: $(grep -m1 flags /proc/cpuinfo | grep -o 'avx512f\|amx_tile\|avx512_fp16' | tr '\n' ' '); $(uptime); node $(node -v); kernel $(uname -r); autogroup $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)"
mk() { # name dim layers heads ffn quant
  local f=$W/models/synth-llama-$1-shape-$6.gguf
  [ -s $f ] && { echo $f; return; }
  if [ $6 = q8_0 ]; then PYTHONPATH=$W/synth/gguf-py python3 $W/synth/synth_llama.py $f $2 $3 $4 $5 $W/synth/ggml-vocab-llama-spm.gguf q8_0 >/dev/null
  else PYTHONPATH=$W/synth/gguf-py python3 $W/synth/synth_llama.py $W/models/f32.gguf $2 $3 $4 $5 $W/synth/ggml-vocab-llama-spm.gguf f32 >/dev/null && LD_LIBRARY_PATH=$BIN $BIN/llama-quantize $W/models/f32.gguf $f Q4_K_M >/dev/null 2>&1; rm -f $W/models/f32.gguf; fi
  echo $f
}
M15=$(mk 15M 288 6 6 768 q8_0); log "15M: $(ls -la $M15 | awk '{print $5}') bytes"
cell() { # est_s model N R modes cond
  local left=$(( deadline - $(date +%s) ))
  if (( left < $1 )); then log "skip $2 $3 $4 $6 (left ${left}s, needs ~$1)"; return; fi
  log "cell $(basename $2) N=$3 R=$4 $6: $5"
  timeout $(( left - 5 )) node dist/bench/swarm-vs-server.js $2 $3 $4 $5 $6 --row-s 20 --llama-server $BIN/llama-server --out $OUT/svs.jsonl >> $OUT/rows.jsonl 2>> $OUT/err.log
  log "  rc=$? $(tail -1 $OUT/rows.jsonl | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{const o=JSON.parse(s);console.log("best",o.best_bare,o.rows.map(r=>r.mode.replace("llama-server","").slice(0,28)+"="+r.tokens_per_s+"("+r.vs_best_bare+")").join("; "))}catch{console.log("no run line")}})')"
}
Q="bare-4,bare-8,bare-16,bare-kvu-8,bare-kvu-16"
L="bare-1,bare-kvu-1,bare-2,bare-4"
for c in "$@"; do case $c in
  15-8-q) cell 70 $M15 8 12 batched,$Q,batched quiet;;
  15-25-q) cell 80 $M15 25 4 batched,$Q,batched quiet;;
  15-8-l) cell 80 $M15 8 6 batched,$L,batched loaded;;
  15-25-l) cell 90 $M15 25 3 batched,$L,batched loaded;;
  110) M110=$(mk 110M 768 12 12 2048 q4_k_m); log "110M: $(ls -la $M110 | awk '{print $5}') bytes";;
  110-8-l) cell 90 $M110 8 3 batched,$L,batched loaded;;
  110-25-q) cell 60 $M110 25 2 batched,bare-8,bare-16,bare-kvu-16,batched quiet;;
  110-8-q) cell 60 $M110 8 3 batched,bare-8,bare-16,bare-kvu-16,batched quiet;;
  110-25-l) cell 90 $M110 25 2 batched,$L,batched loaded;;
  smoke) cell 20 $M15 2 1 batched,bare-1 quiet;;
  c3-110-8-l) cell 80 $M110 8 3 batched,bare-2,bare-kvu-2,bare-1,batched loaded;;
  c3-110-8-q) cell 50 $M110 8 3 batched,bare-16,bare-8,batched quiet;;
  c3-15-8-q) cell 50 $M15 8 12 batched,batched-streams,batched-fa-on,bare-8,bare-16,batched quiet;;
  c3-15-8-l) cell 60 $M15 8 6 batched,bare-2,bare-1,batched loaded;;
  # The hand-off on 16 quiet cores: a sequence's next chat sent ahead on the engine's word, or after the round trip.
  ahead-15-8-q) cell 70 $M15 8 12 batched,batched-noahead,bare-8,batched,batched-noahead quiet;;
  # The step's serial part on 16 quiet cores: a step's text handled while the next decodes (the default while a core idles) against after it.
  overlap-15-8-q) cell 70 $M15 8 12 batched,batched-step-sync,bare-8,batched,batched-step-sync quiet;;
  # 110M, 8 agents beside 16 busy processes, the engine's tuner also probing more threads with no core idle.
  probe-110-8-l) SWARM_THREADS_PROBE_BUSY=1 cell 90 $M110 8 3 batched,bare-2,bare-1,batched loaded;;
  shared) log "shared: $(node dist/cli/main.js engine which 2>&1 | head -5)";;
esac; done
ls $BIN/.cpu-variants 2>/dev/null | head; cat $BIN/.cpu-variants/*.json 2>/dev/null | head -5
cp $BIN/.cpu-variants/choice* $OUT/ 2>/dev/null
log "done"
