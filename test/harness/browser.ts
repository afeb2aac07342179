import { accessSync, constants } from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll } from 'vitest';

/** Debian's chromium (`apt-get install chromium`); OUTBOX_CHROMIUM names another executable. */
const DEFAULT_CHROMIUM = '/usr/bin/chromium';

/**
 * The Chromium the browser tests drive: the machine's own, never one downloaded at run time
 * (puppeteer-core downloads nothing). Fails at once, naming the package, when it is missing.
 */
export function chromiumPath(): string {
  const path = process.env.OUTBOX_CHROMIUM || DEFAULT_CHROMIUM;
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(
      `the browser tests need Chromium at ${path}, and it is not there (or not executable): install Debian's package (apt-get install chromium), or set OUTBOX_CHROMIUM to a Chromium or Chrome executable`,
    );
  }
  return path;
}

/** Headless Chromium; --no-sandbox only as root, where Chromium refuses to start with its sandbox. */
export async function launchChromium(): Promise<Browser> {
  const asRoot = process.getuid?.() === 0;
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      ...(asRoot ? ['--no-sandbox'] : []),
      // /dev/shm is small in containers; nothing else of the machine is needed.
      '--disable-dev-shm-usage',
      '--disable-gpu',
      '--no-first-run',
      '--no-default-browser-check',
      '--disable-extensions',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--metrics-recording-only',
      '--mute-audio',
    ],
    defaultViewport: { width: 1280, height: 900 },
  });
}

/** What the page said to its console and what it threw: the test asserts there is none (a CSP refusal is one). */
export interface PageProblems {
  readonly problems: string[];
}

/** A new page in a context of its own (its own sessionStorage), its errors collected. */
export async function openPage(browser: Browser): Promise<Page & PageProblems> {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error instanceof Error ? error.message : String(error)}`));
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warn') problems.push(`console.${message.type()}: ${message.text()}`);
  });
  page.on('requestfailed', (request) => problems.push(`request failed: ${request.method()} ${request.url()}: ${request.failure()?.errorText ?? ''}`));
  page.setDefaultTimeout(15_000);
  return Object.assign(page, { problems });
}

/** beforeAll/afterAll for a file's browser. */
export function useBrowser(): { readonly browser: Browser } {
  let browser: Browser | undefined;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });
  return {
    get browser() {
      if (!browser) throw new Error('the browser is not started yet (useBrowser starts it in beforeAll)');
      return browser;
    },
  };
}
