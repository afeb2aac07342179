// vitest: runs alone (a browser page that must be ready within a link's 5 s life)
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Page, SerializedAXNode } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPage, useBrowser, type PageProblems } from '../harness/browser.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { freePort } from '../harness/ports.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { useTestWebhooks, verifiedBody, WebhookReceiver } from '../harness/webhooks.js';

const PLATFORM_TOKEN = 'platform-token-of-the-portal-test';
const CUSTOMER = 'cus_acme';
const OTHER_CUSTOMER = 'cus_globex';
/** What the customer's receiver answers before it is fixed: the snippet the page must show. */
const BROKEN_ANSWER = 'ledger database is down (portal test)';

interface Minted {
  readonly token: string;
  readonly expiresAt: string;
  readonly portalUrl: string;
}

/**
 * The customer portal in a real browser (Debian's chromium through puppeteer-core) against the
 * real processes: the relay, `outbox-relay webhooks` (one attempt per delivery, so a 500 fails it
 * at once and only a replay sends it again) and `outbox-relay webhooks api` serving the page, on
 * real Postgres, Kafka and the registry. A customer logs in through a link the platform minted,
 * adds an endpoint, sees its failed delivery's attempts, replays it to its fixed receiver and sees
 * it delivered; sends a test event; edits, disables, enables, rotates; pages and filters its
 * deliveries; another customer's objects never appear; an expired link is refused. The tests run
 * in order on one page, each going on from where the one before left it.
 */
describe('webhooks portal in a browser', () => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const chromium = useBrowser();
  const env = (extra: Record<string, string> = {}) => webhooks.env({ OUTBOX_WEBHOOK_RETRY_SCHEDULE: '0s', OUTBOX_WEBHOOK_TIMEOUT: '2s', ...extra });
  const processes: RelayProcess[] = [];
  let receiver: WebhookReceiver;
  let otherReceiver: WebhookReceiver;
  let apiBase = '';
  let page: Page & PageProblems;
  /** The other customer's objects: none of them may appear in the customer's page. */
  const other = { endpointId: '', url: '', eventId: '', deliveryId: '' };
  /** A link with the shortest life (5 s): its page opened at the start and left open, the link opened again at the end. */
  let shortLived: Minted;
  let openUntilExpiry: Page & PageProblems;
  /** What the customer's page showed and did. */
  const shown = { endpointId: '', secret: '', eventId: '', deliveryId: '' };

  function start(args: string[], extra: Record<string, string> = {}): RelayProcess {
    const started = new RelayProcess(env(extra), args, 'webhooks').start();
    processes.push(started);
    return started;
  }

  /** The API as the platform's application calls it. */
  async function platform<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await fetch(`${apiBase}${path}`, {
      method,
      headers: { authorization: `Bearer ${PLATFORM_TOKEN}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return JSON.parse(text) as T;
  }

  function mint(customerId: string, ttlSeconds: number): Promise<Minted> {
    return platform<Minted>('POST', '/v1/customer-tokens', { customerId, ttlSeconds });
  }

  async function produce(customerId: string): Promise<string> {
    const event = billingEvent(`inv-${customerId}`, Date.now() % 1_000_000, 'invoice.paid');
    await outbox.insert([{ ...event, headers: { ...event.headers, customer_id: customerId } }]);
    return event.eventId;
  }

  /** Polls (as a reader of the page would look again) until the text at `selector` passes `check`. */
  function untilText(selector: string, check: (text: string) => boolean, what = selector): Promise<string> {
    return eventually(what, async () => {
      const text = await page.$eval(selector, (node) => node.textContent as string).catch(() => null);
      return text !== null && check(text) ? text : undefined;
    }, 30_000, 50);
  }

  /** The text of the page's main area and every open dialog. */
  function pageText(): Promise<string> {
    return page.$eval('body', (body) => body.innerText as string);
  }

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    receiver.answerWith(() => ({ status: 500, headers: { 'content-type': 'text/plain' }, body: BROKEN_ANSWER }));
    otherReceiver = await new WebhookReceiver().start();
    const relay = new RelayProcess(outbox.relayEnv()).start();
    processes.push(relay);
    const port = await freePort();
    apiBase = `http://127.0.0.1:${port}`;
    const api = start(['api'], {
      OUTBOX_WEBHOOK_API_PORT: String(port),
      OUTBOX_WEBHOOK_API_TOKEN: PLATFORM_TOKEN,
      OUTBOX_WEBHOOK_API_SIGNING_KEY: 'signing-key-of-the-portal-test-0123456789abcdef',
    });
    const dispatcher = start([]);
    await Promise.all([relay.waitActive(), dispatcher.waitForLog(/consuming and dispatching/), api.waitForLog(/webhooks api: listening/)]);
    shortLived = await mint(CUSTOMER, 5);
    // Opened while the link works, and left open past its end.
    openUntilExpiry = await openPage(chromium.browser);
    await openUntilExpiry.goto(shortLived.portalUrl);
    await openUntilExpiry.waitForSelector('body[data-ready]', { timeout: 4_000 });

    // Another customer with an endpoint and a delivery; its event also makes invoice.paid an event type the stage has seen.
    other.url = otherReceiver.url('/globex-only');
    other.endpointId = (await webhooks.addEndpoint(other.url, 'invoice.*', ['--customer', OTHER_CUSTOMER])).id;
    other.eventId = await produce(OTHER_CUSTOMER);
    await eventually('the other customer got its event', async () => (otherReceiver.ids().includes(other.eventId) ? true : undefined), 30_000, 100);
    // A first attempt is sent, then recorded: the delivery is listed a moment after the receiver got it.
    other.deliveryId = await eventually('the other customer\'s delivery recorded', async () => {
      const theirs = await platform<{ data: { id: string; eventId: string }[] }>('GET', `/v1/deliveries?customerId=${OTHER_CUSTOMER}`);
      return theirs.data.find((d) => d.eventId === other.eventId)?.id;
    }, 30_000, 100);

    page = await openPage(chromium.browser);
  });

  afterAll(async () => {
    for (const process of processes.reverse()) await process.stop().catch(() => undefined);
    await receiver?.stop();
    await otherReceiver?.stop();
  });

  it('logs in through a link the platform minted; the token leaves the address bar and is sent as a bearer token', async () => {
    const link = await mint(CUSTOMER, 3600);
    expect(link.portalUrl).toBe(`${apiBase}/portal/#token=${link.token}`);
    const bearer: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/v1/')) bearer.push(request.headers().authorization ?? '');
    });
    await page.goto(link.portalUrl);
    await page.waitForSelector('body[data-ready]');
    expect(page.url()).toBe(`${apiBase}/portal/`);
    expect(await page.evaluate(() => sessionStorage.getItem('outbox-relay.portal.token'))).toBe(link.token);
    expect(await page.$eval('#who', (who) => who.textContent)).toContain(`Customer ${CUSTOMER}`);
    expect(await page.$eval('#endpoints-empty', (empty) => empty.hidden)).toBe(false);
    expect(new Set(bearer)).toEqual(new Set([`Bearer ${link.token}`]));
  });

  it('adds an endpoint with the keyboard, its event type chosen from those seen; the secret is shown once', async () => {
    await page.focus('#add-endpoint');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#endpoint-dialog[open]');
    // The dialog puts the focus in its first field.
    expect(await page.evaluate('document.activeElement && document.activeElement.id')).toBe('endpoint-url');
    await page.keyboard.type(receiver.url('/acme'));
    await page.focus('input[name="eventType"][value="invoice.paid"]');
    await page.keyboard.press('Space');
    await page.focus('#endpoint-description');
    await page.keyboard.type('Acme ledger');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#secret-dialog[open]');
    shown.secret = await page.$eval('#secret-value', (input) => input.value);
    expect(shown.secret).toMatch(/^whsec_/);
    await page.click('#secret-close');
    // Gone from the page once the dialog is closed.
    expect(await page.$eval('#secret-value', (input) => input.value)).toBe('');
    const row = await page.waitForSelector('#endpoints-body tr');
    shown.endpointId = (await row!.evaluate((tr) => tr.getAttribute('data-id')))!;
    expect(await row!.evaluate((tr) => tr.innerText)).toContain(receiver.url('/acme'));
    const stored = await platform<{ data: { id: string; url: string; eventTypes: string[]; description: string | null; customerId: string }[] }>('GET', `/v1/endpoints?customerId=${CUSTOMER}`);
    expect(stored.data).toMatchObject([{ id: shown.endpointId, url: receiver.url('/acme'), eventTypes: ['invoice.paid'], description: 'Acme ledger', customerId: CUSTOMER }]);
  });

  it("shows the failed delivery's attempt: status 500 and the receiver's answer", async () => {
    shown.eventId = await produce(CUSTOMER);
    await eventually('the receiver got the event', async () => (receiver.ids().includes(shown.eventId) ? true : undefined), 30_000, 100);
    // As the customer would: Refresh until it is listed as failed.
    const row = await eventually(
      'the page lists the delivery as failed',
      async () => {
        await page.click('#refresh-deliveries');
        await delay(300);
        return (await page.$('#deliveries-body tr[data-status="failed"]')) ?? undefined;
      },
      30_000,
      200,
    );
    expect(await row.evaluate((tr) => tr.innerText)).toContain(shown.eventId);
    shown.deliveryId = (await row.evaluate((tr) => tr.getAttribute('data-id')))!;
    await (await row.$('button[data-action="details"]'))!.click();
    await page.waitForSelector('#delivery-dialog[open] #attempts-body tr');
    const attempts = await page.$$eval('#attempts-body tr', (rows) =>
      rows.map((tr) => Object.fromEntries([...tr.querySelectorAll('td')].map((td) => [td.className, td.innerText.trim()])) as Record<string, string>),
    );
    expect(attempts).toEqual([{ at: expect.any(String), outcome: 'Error status', 'status-code': '500', latency: expect.stringMatching(/^\d+ ms$/), error: expect.any(String), response: BROKEN_ANSWER }]);
  });

  it('Replay sends it again to the fixed receiver, signed with the secret the page showed, and the page shows it delivered', async () => {
    receiver.answerWith(() => ({ status: 204 }));
    await page.click('#delivery-replay');
    await eventually('the receiver got the event again', async () => (receiver.ids().filter((id) => id === shown.eventId).length === 2 ? true : undefined), 30_000, 100);
    verifiedBody(shown.secret, receiver.requests.at(-1)!);
    await untilText('#delivery-facts .badge', (text) => text === 'delivered');
    await page.waitForFunction("document.querySelectorAll('#attempts-body tr').length === 2");
    const codes = await page.$$eval('#attempts-body td.status-code', (cells) => cells.map((cell) => cell.innerText.trim() as string));
    expect(codes.sort()).toEqual(['204', '500']);
    expect(await page.$eval('#delivery-status', (status) => status.textContent)).toMatch(/^Delivered/);
    await page.keyboard.press('Escape');
    await page.waitForSelector('#delivery-dialog:not([open])');
    expect(await page.$eval(`#deliveries-body tr[data-id="${shown.deliveryId}"]`, (tr) => tr.getAttribute('data-status'))).toBe('delivered');
    // The focus back on the delivery's Details button (its row redrawn while the dialog was open).
    await untilText(':focus', (text) => text.startsWith('Details'), 'the focus back on Details');
    expect(await page.$eval(':focus', (button) => button.closest('tr')?.getAttribute('data-id') as string | undefined)).toBe(shown.deliveryId);
  });

  it('sends a test event to the endpoint and shows it delivered', async () => {
    const before = receiver.requests.length;
    await page.click(`#endpoints-body tr[data-id="${shown.endpointId}"] button[data-action="test"]`);
    const request = await eventually('the receiver got the test event', async () => receiver.requests.slice(before).find((r) => (verifiedBody(shown.secret, r) as { type: string }).type === 'webhook.test'), 30_000, 100);
    await untilText(`#deliveries-body tr[data-status="delivered"] td:nth-child(3)`, (text) => text === request.id, 'the test delivery listed as delivered');
    expect(await page.$$eval('#deliveries-body tr', (rows) => rows.map((tr) => tr.getAttribute('data-status')))).toEqual(['delivered', 'delivered']);
    const screenshot = process.env.OUTBOX_PORTAL_SCREENSHOT;
    if (screenshot) {
      // For the docs: the replayed delivery's attempts over the endpoint and its deliveries.
      await page.click(`#deliveries-body tr[data-id="${shown.deliveryId}"] button[data-action="details"]`);
      await page.waitForSelector('#delivery-dialog[open] #attempts-body tr:nth-child(2)');
      await page.setViewport({ width: 1280, height: 1240 });
      mkdirSync(dirname(screenshot), { recursive: true });
      // Without the empty backdrop below the dialog.
      await page.screenshot({ path: screenshot as `${string}.png`, clip: { x: 0, y: 0, width: 1280, height: 990 } });
      await page.setViewport({ width: 1280, height: 900 });
      await page.keyboard.press('Escape');
    }
  });

  it('edits, disables and enables the endpoint, and rotates its secret (shown once)', async () => {
    const row = `#endpoints-body tr[data-id="${shown.endpointId}"]`;
    await page.click(`${row} button[data-action="edit"]`);
    await page.waitForSelector('#endpoint-dialog[open]');
    expect(await page.$eval('input[name="eventType"][value="invoice.paid"]', (box) => box.checked as boolean)).toBe(true);
    await page.$eval('#endpoint-description', (input) => (input.value = ''));
    await page.type('#endpoint-description', 'Acme ledger (EU)');
    await page.click('#endpoint-save');
    await untilText(row, (text) => text.includes('Acme ledger (EU)'));
    await page.click(`${row} button[data-action="toggle"]`);
    await untilText(`${row} .badge`, (text) => text === 'Disabled');
    expect(await page.$eval(row, (tr) => tr.innerText as string)).toContain('disabled in the portal');
    // The focus stays on the button pressed, now Enable.
    expect(await page.evaluate('document.activeElement.textContent')).toMatch(/^Enable/);
    await page.keyboard.press('Enter');
    await untilText(`${row} .badge`, (text) => text === 'Enabled');
    page.once('dialog', (confirmation) => void confirmation.accept());
    await page.click(`${row} button[data-action="rotate"]`);
    await page.waitForSelector('#secret-dialog[open]');
    const rotated = await page.$eval('#secret-value', (input) => input.value as string);
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(shown.secret);
    await page.keyboard.press('Escape');
    // Escape too takes the secret out of the page (the dialog's close event comes a task later).
    await eventually('the secret gone with its dialog', async () => ((await page.$eval('#secret-value', (input) => input.value as string)) === '' ? true : undefined), 5_000, 20);
    const stored = await platform<{ description: string; disabled: boolean }>('GET', `/v1/endpoints/${shown.endpointId}`);
    expect(stored).toMatchObject({ description: 'Acme ledger (EU)', disabled: false });
  });

  it('lists deliveries newest first, a page at a time (Load more, by cursor), filtered by status and endpoint', async () => {
    // 30 more events, every 7th refused: a page of 25 is not all of them, and some failed.
    const events = Array.from({ length: 30 }, (_, i) => {
      const event = billingEvent(`inv-page-${i}`, i, 'invoice.paid');
      return { ...event, headers: { ...event.headers, customer_id: CUSTOMER } };
    });
    const refused = new Set(events.filter((_, i) => i % 7 === 0).map((e) => e.eventId));
    receiver.answerWith((request) => (refused.has(request.id) ? { status: 500, body: BROKEN_ANSWER } : { status: 204 }));
    await outbox.insert(events);
    await eventually('the 30 deliveries recorded', async () => {
      const listed = await platform<{ data: { status: string }[] }>('GET', `/v1/deliveries?customerId=${CUSTOMER}&limit=200`);
      return listed.data.length === 32 && listed.data.every((d) => d.status !== 'pending') ? true : undefined;
    }, 30_000, 200);
    await page.click('#refresh-deliveries');
    await eventually('the first page', async () => ((await page.$$('#deliveries-body tr')).length === 25 ? true : undefined), 10_000, 50);
    expect(await page.$eval('#load-more', (button) => button.hidden as boolean)).toBe(false);
    await page.click('#load-more');
    await eventually('the second page', async () => ((await page.$$('#deliveries-body tr')).length === 32 ? true : undefined), 10_000, 50);
    expect(await page.$eval('#load-more', (button) => button.hidden as boolean)).toBe(true);
    // The focus on the first row of the page just loaded, where reading goes on.
    expect(await page.$eval(':focus', (button) => button.closest('tr')?.rowIndex as number)).toBe(26);
    const ids = await page.$$eval('#deliveries-body tr', (rows) => rows.map((tr) => Number(tr.getAttribute('data-id'))));
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(new Set(ids).size).toBe(32);
    await page.select('#filter-status', 'failed');
    await page.click('#delivery-filter button[type="submit"]');
    await untilText('#status', (text) => text === `${refused.size} deliveries shown.`);
    const failedEvents = await page.$$eval('#deliveries-body tr', (rows) => rows.map((tr) => [tr.getAttribute('data-status'), tr.querySelector('td:nth-child(3)')?.textContent]));
    expect(new Set(failedEvents.map(([status]) => status))).toEqual(new Set(['failed']));
    expect(new Set(failedEvents.map(([, eventId]) => eventId))).toEqual(refused);
    await page.select('#filter-status', '');
    await page.select('#filter-endpoint', shown.endpointId);
    await page.click('#delivery-filter button[type="submit"]');
    await untilText('#status', (text) => text === '25 deliveries shown.');
  });

  it("names every control for assistive technology (Chromium's accessibility tree), the page and the add form", async () => {
    const nodes = async (): Promise<SerializedAXNode[]> => {
      const all: SerializedAXNode[] = [];
      const walk = (node: SerializedAXNode | null | undefined): void => {
        if (!node) return;
        all.push(node);
        node.children?.forEach(walk);
      };
      walk(await page.accessibility.snapshot());
      return all;
    };
    const unnamed = (all: SerializedAXNode[]) => all.filter((node) => ['button', 'textbox', 'checkbox', 'combobox', 'link', 'dialog'].includes(node.role) && !node.name?.trim()).map((node) => node.role);
    const onPage = await nodes();
    expect(unnamed(onPage)).toEqual([]);
    // A row's button says which row: the visible "Details" and, for a screen reader, the delivery.
    expect(onPage).toContainEqual(expect.objectContaining({ role: 'button', name: expect.stringMatching(/^Details of delivery \d+$/) }));
    expect(onPage).toContainEqual(expect.objectContaining({ role: 'button', name: `Rotate secret ${receiver.url('/acme')}` }));
    expect(onPage).toContainEqual(expect.objectContaining({ role: 'combobox', name: 'Status' }));
    await page.click('#add-endpoint');
    await page.waitForSelector('#endpoint-dialog[open]');
    const inDialog = await nodes();
    expect(unnamed(inDialog)).toEqual([]);
    // Modal: the page behind it is out of the tree, the dialog named by its heading.
    expect(inDialog).toContainEqual(expect.objectContaining({ role: 'dialog', name: 'Add endpoint', modal: true }));
    expect(inDialog).toContainEqual(expect.objectContaining({ role: 'textbox', name: 'URL', required: true, focused: true }));
    expect(inDialog).toContainEqual(expect.objectContaining({ role: 'checkbox', name: 'invoice.paid' }));
    expect(inDialog.some((node) => node.name === 'Deliveries')).toBe(false);
    await page.keyboard.press('Escape');
    await page.waitForSelector('#endpoint-dialog:not([open])');
  });

  it("never shows another customer's objects, and its token cannot read them", async () => {
    const text = await pageText();
    const html = await page.content();
    for (const value of [other.endpointId, other.url, other.eventId, OTHER_CUSTOMER]) {
      expect(text).not.toContain(value);
      expect(html).not.toContain(value);
    }
    const options = await page.$$eval('#filter-endpoint option', (all) => all.map((option) => option.value));
    expect(options).toEqual(['', shown.endpointId]);
    // With the page's own token, as a curious customer would try from the console.
    const answers = await page.evaluate(async (paths: string[]) => {
      const token = sessionStorage.getItem('outbox-relay.portal.token');
      return Promise.all(paths.map(async (path) => {
        const response = await fetch(path, { headers: { authorization: `Bearer ${token}` } });
        return { path, status: response.status, body: await response.text() };
      }));
    }, [`/v1/deliveries/${other.deliveryId}`, `/v1/endpoints/${other.endpointId}`, `/v1/deliveries?endpointId=${other.endpointId}`]);
    expect(answers[0]).toMatchObject({ status: 404 });
    expect(answers[1]).toMatchObject({ status: 404 });
    expect(JSON.parse(answers[0]!.body)).toMatchObject({ error: { code: 'WEBHOOK_NOT_FOUND' } });
    for (const answer of answers) expect(answer.body).not.toContain(other.eventId);
    expect(page.problems.filter((problem) => !/status of 404/.test(problem))).toEqual([]);
  });

  it('an expired link is refused, and a page left open past its expiry clears itself: one clear message, no data; a tampered link and none at all too', async () => {
    const wait = new Date(shortLived.expiresAt).getTime() - Date.now();
    if (wait > 0) await delay(wait + 100);
    // The page left open: its data gone at the link's expiry, with nothing clicked.
    await openUntilExpiry.waitForSelector('#alert:not([hidden])', { timeout: 2_000 });
    expect(await openUntilExpiry.$eval('#alert', (alert) => alert.innerText as string)).toContain('This link has expired — ask for a new one');
    expect(await openUntilExpiry.$eval('#app', (app) => app.hidden as boolean)).toBe(true);
    expect(await openUntilExpiry.$$('#endpoints-body tr, #deliveries-body tr')).toHaveLength(0);
    const expired = await openPage(chromium.browser);
    await expired.goto(shortLived.portalUrl);
    await expired.waitForSelector('#alert:not([hidden])');
    expect(await expired.$eval('#alert', (alert) => alert.innerText)).toContain('This link has expired — ask for a new one');
    expect(await expired.$eval('#app', (app) => app.hidden)).toBe(true);
    expect(await expired.$$('#endpoints-body tr, #deliveries-body tr')).toHaveLength(0);
    expect(await expired.evaluate(() => sessionStorage.getItem('outbox-relay.portal.token'))).toBeNull();
    expect(expired.url()).toBe(`${apiBase}/portal/`);
    const [head, payload] = shortLived.token.split('.');
    const tampered = await openPage(chromium.browser);
    await tampered.goto(`${apiBase}/portal/#token=${head}.${payload}.${'A'.repeat(43)}`);
    await tampered.waitForSelector('#alert:not([hidden])');
    expect(await tampered.$eval('#alert', (alert) => alert.innerText)).toContain('This link is not valid — ask for a new one');
    expect(await tampered.$eval('#app', (app) => app.hidden)).toBe(true);
    const bare = await openPage(chromium.browser);
    await bare.goto(`${apiBase}/portal/`);
    await bare.waitForSelector('#alert:not([hidden])');
    expect(await bare.$eval('#alert', (alert) => alert.innerText)).toContain('No access link.');
  });
});
