/** Building and finding llama.cpp's programs (llama-server, llama-cli, …) from the source node-llama-cpp carries. */
export { buildLlama, CMAKE_FLAGS } from './build.js';
export type { BuildOptions, BuildProgress, BuildResult } from './build.js';
export { LLAMA_BINARIES, bundleKey, bundlePath, cacheKey, cacheRoot, defaultBinDir, findLlamaBinary, hasBinaries } from './paths.js';
export { FLAGS_KEY } from './flags.js';
export type { LlamaBinary } from './paths.js';
export { buildAddon } from './addon.js';
export type { AddonBuildOptions, AddonBuildResult } from './addon.js';
export { ADDON_FILE, addonCacheRoot, addonCmakeFlags, defaultAddonDir, findSelfBuiltAddon, readAddonDir } from './addon-paths.js';
export type { AddonBuildInfo, SelfBuiltAddon } from './addon-paths.js';
