import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll } from 'vitest';
import { cli } from './cli.js';
import type { TestOutbox } from './outbox.js';
import { RelayProcess } from './relay-process.js';

export interface ReceivedRequest {
  readonly at: number;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** The webhook-id header: the event id. */
  readonly id: string;
}

/** How the receiver answers one request. */
export type Answer =
  | { readonly status: number; readonly headers?: Record<string, string>; readonly body?: string; readonly delayMs?: number }
  /** Accept the request and never answer. */
  | 'hang'
  /** Send the status line and part of a body, then close the connection. */
  | 'cut';

/**
 * A customer's endpoint: a real HTTP server on 127.0.0.1 that records every request and answers
 * as the test decides (by default 204 at once).
 */
export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  private server: Server | null = null;
  private answer: (request: ReceivedRequest, index: number) => Answer = () => ({ status: 204 });
  port = 0;
  /** Requests being answered now, and the most at once: an endpoint's limit seen from its side. */
  private inFlight = 0;
  mostInFlight = 0;

  async start(): Promise<this> {
    const server = createServer((request, response) => void this.handle(request, response));
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.server = server;
    this.port = (server.address() as { port: number }).port;
    return this;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  answerWith(answer: (request: ReceivedRequest, index: number) => Answer): void {
    this.answer = answer;
  }

  ids(): string[] {
    return this.requests.map((request) => request.id);
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    this.inFlight += 1;
    this.mostInFlight = Math.max(this.mostInFlight, this.inFlight);
    response.once('close', () => (this.inFlight -= 1));
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(', ') : (value ?? '')]));
    const received: ReceivedRequest = { at: Date.now(), path: request.url ?? '/', headers, body: Buffer.concat(chunks).toString('utf8'), id: headers['webhook-id'] ?? '' };
    this.requests.push(received);
    const answer = this.answer(received, this.requests.length - 1);
    if (answer === 'hang') return;
    if (answer === 'cut') {
      response.writeHead(200, { 'content-length': '1000' });
      response.write('partial');
      setTimeout(() => response.socket?.destroy(), 20);
      return;
    }
    if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
    response.writeHead(answer.status, answer.headers);
    response.end(answer.body ?? '');
  }
}

/** Verified as a receiver would, with the reference implementation: the payload, or an exception. */
export function verifiedBody(secret: string, request: ReceivedRequest): unknown {
  return new Webhook(secret).verify(request.body, {
    'webhook-id': request.headers['webhook-id']!,
    'webhook-timestamp': request.headers['webhook-timestamp']!,
    'webhook-signature': request.headers['webhook-signature']!,
  });
}

/**
 * A test file's own webhook tables (a schema named after the outbox's id, so files never see
 * each other's endpoints) and the environment of its webhooks processes.
 */
export class TestWebhooks {
  readonly schema: string;
  readonly group: string;

  constructor(private readonly outbox: TestOutbox) {
    this.schema = `wh_${outbox.id}`;
    this.group = `webhooks-${outbox.id}-${randomUUID().slice(0, 8)}`;
  }

  env(extra: Record<string, string> = {}): Record<string, string> {
    return this.outbox.relayEnv({
      OUTBOX_WEBHOOK_SCHEMA: this.schema,
      OUTBOX_WEBHOOK_GROUP: this.group,
      OUTBOX_WEBHOOK_ALLOW_ADDRESSES: '127.0.0.1',
      OUTBOX_WEBHOOK_POLL: '50ms',
      // The outbox rows of billingEvent carry no customer: a test of customers sets its own rule and headers.
      OUTBOX_WEBHOOK_CUSTOMER_FROM: 'header:customer_id',
      ...extra,
    });
  }

  async setup(): Promise<void> {
    const result = await cli(['webhooks', 'setup'], this.env());
    if (result.code !== 0) throw new Error(`webhooks setup failed: ${result.stderr}`);
  }

  /**
   * Adds an endpoint through the CLI; its id and signing secret. Platform-wide (every event it
   * subscribes to) unless `flags` name its customer.
   */
  async addEndpoint(url: string, eventTypes: string, flags: readonly string[] = []): Promise<{ readonly id: string; readonly secret: string }> {
    const audience = flags.includes('--customer') || flags.includes('--platform-wide') ? [] : ['--platform-wide'];
    const result = await cli(['webhooks', 'endpoint', 'add', '--url', url, '--event-types', eventTypes, '--json', ...audience, ...flags], this.env());
    if (result.code !== 0) throw new Error(`endpoint add failed (${result.code}): ${result.stderr}`);
    const added = JSON.parse(result.stdout) as { id: string; secret: string };
    return { id: added.id, secret: added.secret };
  }

  async query<R extends object>(sql: string, values: unknown[] = []): Promise<R[]> {
    const { rows } = await this.outbox.pool.query(sql.replaceAll('wh.', `${this.schema}.`), values);
    return rows as R[];
  }

  async drop(): Promise<void> {
    await this.outbox.pool.query(`DROP SCHEMA IF EXISTS ${this.schema} CASCADE`);
  }
}

/** beforeAll/afterAll for a file's webhook tables. */
export function useTestWebhooks(outbox: TestOutbox): TestWebhooks {
  const webhooks = new TestWebhooks(outbox);
  beforeAll(() => webhooks.setup());
  afterAll(() => webhooks.drop());
  return webhooks;
}

/** What useWebhooksPipeline started, once its beforeAll ran. */
export interface WebhooksPipeline {
  readonly receiver: WebhookReceiver;
  readonly relay: RelayProcess;
  readonly dispatcher: RelayProcess;
}

/**
 * beforeAll/afterAll for a file whose tests run through one pipeline: a receiver, the relay, and
 * one webhooks process with `extraEnv`, consuming and dispatching before the first test.
 */
export function useWebhooksPipeline(outbox: TestOutbox, webhooks: TestWebhooks, extraEnv: Record<string, string>): WebhooksPipeline {
  const started: { receiver?: WebhookReceiver; relay?: RelayProcess; dispatcher?: RelayProcess } = {};
  beforeAll(async () => {
    started.receiver = await new WebhookReceiver().start();
    started.relay = new RelayProcess(outbox.relayEnv()).start();
    await started.relay.waitActive();
    started.dispatcher = new RelayProcess(webhooks.env(extraEnv), [], 'webhooks').start();
    await started.dispatcher.waitForLog(/webhooks: consuming and dispatching/);
  });
  afterAll(async () => {
    await started.dispatcher?.stop();
    await started.relay?.stop();
    await started.receiver?.stop();
  });
  return {
    get receiver() {
      return started.receiver!;
    },
    get relay() {
      return started.relay!;
    },
    get dispatcher() {
      return started.dispatcher!;
    },
  };
}
