import { createHash } from 'node:crypto';

/**
 * CMake flags, as node-llama-cpp builds its own prebuilt binaries: no -march=native (a native build
 * died with `Illegal instruction` at its first decode on a VM whose CPU reports AVX-512 and AMX, on
 * the very machine that built it, and an image built on one CPU meets the same on another), but every
 * x86-64 or arm64 CPU variant of ggml's CPU backend as a library of its own, the best of which is
 * loaded at run time (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS; the libraries sit beside the programs,
 * found through RPATH $ORIGIN). Nothing reaches the network.
 */
export const CMAKE_FLAGS = [
  '-DCMAKE_BUILD_TYPE=Release',
  '-DGGML_NATIVE=OFF',
  '-DGGML_BACKEND_DL=ON',
  '-DGGML_CPU_ALL_VARIANTS=ON',
  '-DBUILD_SHARED_LIBS=ON',
  '-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON',
  '-DCMAKE_INSTALL_RPATH=$ORIGIN',
  '-DLLAMA_BUILD_TESTS=OFF',
  '-DLLAMA_BUILD_EXAMPLES=OFF',
  '-DLLAMA_BUILD_APP=OFF',
  '-DLLAMA_BUILD_TOOLS=ON',
  '-DLLAMA_BUILD_SERVER=ON',
  // The web UI is either built with npm or downloaded from Hugging Face; we want neither.
  '-DLLAMA_BUILD_UI=OFF',
  '-DLLAMA_USE_PREBUILT_UI=OFF',
  '-DLLAMA_OPENSSL=OFF',
  '-DLLAMA_CURL=OFF',
  '-DGGML_CCACHE=OFF',
] as const;

/** Names the flags in the cache directory: binaries built another way are never taken for these. */
export const FLAGS_KEY = createHash('sha256').update(CMAKE_FLAGS.join('\n')).digest('hex').slice(0, 8);
