#!/bin/bash
# Packs node, the built project (dist, gen, production node_modules) and the engines (the self-built
# addon, the portable llama.cpp build) into .lent/ of this checkout (about 38 MB compressed), to bench on
# another x86-64 machine that has no node and no network: copy the checkout with .lent/, then there
# `bash bench/lent/run.sh DEADLINE_S CELLS...`. Needs `swarm engine build` and `--addon` run here first,
# and the synth-model maker under ~/.cache/make-synth-model (shared/tools/make-synth-model, run once).
set -euo pipefail
cd "$(dirname "$0")/../.."
L=.lent
mkdir -p $L
[ -s $L/node.xz ] || xz -T2 -6 -c "$(command -v node)" > $L/node.xz
mods=$(npm ls --omit=dev --all --parseable 2>/dev/null | sed "s|^$PWD/||" | grep '^node_modules/' | grep -v -E '^node_modules/(typescript|@node-llama-cpp/)' | sort -u)
echo "$(echo "$mods" | wc -l) packages"
tar -cJf $L/app.tar.xz --exclude='node_modules/node-llama-cpp/llama/gitRelease.bundle' --exclude='node_modules/typescript' --exclude='node_modules/@node-llama-cpp' dist gen package.json $mods
# engines: the self-built addon and the portable llama.cpp build (server + quantize + their libs)
# (this checkout's addon only: the cache holds one entry per patch of the addon's source)
addon=$(node -e "import('./dist/drivers/llama-build/addon-paths.js').then((m) => console.log(m.defaultAddonDir()))")
tar -cJf $L/eng.tar.xz -C $HOME --exclude='.cpu-variants' --exclude='cpu-variants' \
  "${addon#$HOME/}" \
  $(cd $HOME && ls -d .cache/swarm/llama.cpp/*/bin/{llama-server,llama-quantize,BUILD_INFO.json,libggml*,libllama.so*,libllama-common.so*,libllama-server-impl.so,libllama-quantize-impl.so,libmtmd.so*})
# synth model maker: gguf-py, the vocab, the script, the bundle's header (bundleKey)
src=${XDG_CACHE_HOME:-$HOME/.cache}/make-synth-model/llama-src
rm -rf /tmp/lentx && mkdir -p /tmp/lentx/synth
cp -r $src/gguf-py /tmp/lentx/synth/ && cp $src/models/ggml-vocab-llama-spm.gguf ${SYNTH_PY:-../shared/tools/synth_llama.py} /tmp/lentx/synth/
head -c 4096 node_modules/node-llama-cpp/llama/gitRelease.bundle > /tmp/lentx/gitRelease.bundle
tar -cJf $L/synth.tar.xz -C /tmp/lentx synth gitRelease.bundle
ls -la $L; du -sh $L
