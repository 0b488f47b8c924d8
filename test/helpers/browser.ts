import fs from 'node:fs';
import type { Browser } from 'playwright-core';

/** Debian's chromium (the `chromium` package); SWARM_CHROMIUM points elsewhere. */
export const CHROMIUM = process.env.SWARM_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Headless chromium for the dashboard tests, or why not. Under CI=true a missing browser is an
 * error, never a skip. Playwright gives each launch a fresh profile directory.
 */
export async function launchChromium(extraArgs: string[] = []): Promise<{ browser?: Browser; skip?: string }> {
  if (!fs.existsSync(CHROMIUM)) {
    const why = `no chromium at ${CHROMIUM} (apt-get install chromium, or set SWARM_CHROMIUM)`;
    if (process.env.CI === 'true') throw new Error(why);
    return { skip: why };
  }
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage', ...extraArgs],
  });
  return { browser };
}
