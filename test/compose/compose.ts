import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import pg from 'pg';
import { eventually } from '../harness/relay-process.js';

const run = promisify(execFile);
export const REPO = fileURLToPath(new URL('../../', import.meta.url));
const COMPOSE = `${REPO}scripts/compose-local.sh`;

/** The host ports the stage publishes (scripts/test-compose.sh exports them; these are its defaults). */
export const PORTS = {
  postgres: port('OUTBOX_COMPOSE_POSTGRES_PORT', 21432),
  kafka: port('OUTBOX_COMPOSE_KAFKA_PORT', 21092),
  relay: port('OUTBOX_COMPOSE_RELAY_PORT', 21464),
  standby: port('OUTBOX_COMPOSE_STANDBY_PORT', 21467),
  api: port('OUTBOX_COMPOSE_API_PORT', 21088),
  prometheus: port('OUTBOX_COMPOSE_PROMETHEUS_PORT', 21090),
};

function port(name: string, fallback: number): number {
  const value = process.env[name];
  if (value === undefined || value === '') {
    process.env[name] = String(fallback);
    return fallback;
  }
  return Number(value);
}

/** A development secret of the compose file (deploy/compose/secrets/). */
export function secret(name: string): string {
  return readFileSync(`${REPO}deploy/compose/secrets/${name}`, 'utf8').trim();
}

/** `docker compose ARGS` on the stand-in images (scripts/compose-local.sh); its stdout. */
export async function compose(args: readonly string[], timeoutMs = 600_000): Promise<string> {
  try {
    const { stdout } = await run(COMPOSE, [...args], { cwd: REPO, timeout: timeoutMs, maxBuffer: 64 << 20 });
    return stdout;
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(`compose ${args.join(' ')} failed: ${(error as Error).message.split('\n')[0]}\n${stdout.slice(-3000)}\n${stderr.slice(-3000)}`);
  }
}

export async function docker(args: readonly string[]): Promise<string> {
  const { stdout } = await run('docker', [...args], { timeout: 60_000, maxBuffer: 16 << 20 });
  return stdout.trim();
}

export interface ContainerState {
  readonly service: string;
  readonly status: string;
  readonly health: string | null;
  readonly exitCode: number;
}

/** Every container of the project, running or not, with its health. */
export async function containers(): Promise<ContainerState[]> {
  const ids = (await docker(['ps', '-aq', '--filter', 'label=com.docker.compose.project=outbox-relay'])).split('\n').filter(Boolean);
  if (ids.length === 0) return [];
  const format = '{{index .Config.Labels "com.docker.compose.service"}}|{{.State.Status}}|{{if .State.Health}}{{.State.Health.Status}}{{end}}|{{.State.ExitCode}}';
  const lines = (await docker(['inspect', '--format', format, ...ids])).split('\n');
  return lines.map((line) => {
    const [service = '', status = '', health = '', exitCode = '0'] = line.split('|');
    return { service, status, health: health === '' ? null : health, exitCode: Number(exitCode) };
  });
}

/** eventually (the integration harness's poll), with the arguments in the order this file reads them: what, how long, the probe. */
export function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, everyMs = 1_000): Promise<T> {
  return eventually(what, probe, timeoutMs, everyMs);
}

/** The Postgres of the stack as its superuser (the development password of the compose file). */
export function database(): pg.Client {
  return new pg.Client({ host: '127.0.0.1', port: PORTS.postgres, user: 'postgres', password: secret('postgres-password'), database: 'outbox' });
}

/** invoice.paid events (schemas/billing/invoice.paid.avsc) for customer CUSTOMER, ids PREFIX-<n>. */
export async function insertInvoices(db: pg.Client, prefix: string, from: number, count: number, customer: string): Promise<string[]> {
  const ids: string[] = [];
  const values: string[] = [];
  const params: unknown[] = [];
  for (let n = from; n < from + count; n += 1) {
    const id = `${prefix}-${n}`;
    ids.push(id);
    const payload = { invoice_id: id, customer_id: customer, subscription_id: null, payment_id: `pay-${id}`, amount_cents: 1000 + n, currency: 'EUR', lines: [], paid_at: Date.now() };
    params.push(id, id, JSON.stringify(payload));
    values.push(`($${params.length - 2}, 'invoice', $${params.length - 1}, 'invoice.paid', $${params.length}::jsonb)`);
  }
  await db.query(`INSERT INTO event_outbox (event_id, aggregate_type, aggregate_id, event_type, payload) VALUES ${values.join(', ')}`, params);
  return ids;
}

/** The event ids on the relay's topic outbox.invoice, from its beginning, as they arrive. */
export class TopicWatcher {
  readonly arrived = new Map<string, number>();
  private consumer: Consumer | undefined;

  async start(): Promise<void> {
    const kafka = new Kafka({ clientId: 'compose-test', brokers: [`127.0.0.1:${PORTS.kafka}`], logLevel: logLevel.NOTHING });
    const consumer = kafka.consumer({ groupId: `compose-test-${Date.now()}`, readUncommitted: false });
    this.consumer = consumer;
    await consumer.connect();
    // The topic appears with the relay's first record (the broker creates it).
    await until('topic outbox.invoice', 120_000, async () => {
      const admin = kafka.admin();
      await admin.connect();
      try {
        return (await admin.listTopics()).includes('outbox.invoice') ? true : undefined;
      } finally {
        await admin.disconnect();
      }
    }, 250);
    await consumer.subscribe({ topic: 'outbox.invoice', fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        const id = message.headers?.event_id?.toString();
        if (id !== undefined && !this.arrived.has(id)) this.arrived.set(id, Date.now());
      },
    });
  }

  missing(ids: readonly string[]): string[] {
    return ids.filter((id) => !this.arrived.has(id));
  }

  async waitFor(ids: readonly string[], timeoutMs: number): Promise<void> {
    await until(`${ids.length} events on outbox.invoice`, timeoutMs, async () => (this.missing(ids).length === 0 ? true : undefined), 200).catch((error: Error) => {
      throw new Error(`${error.message}: ${this.missing(ids).length} missing, e.g. ${this.missing(ids).slice(0, 3).join(', ')}`);
    });
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect();
  }
}

export interface Delivery {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A customer's webhook endpoint: an HTTP server on ADDRESS answering 204 to every POST. */
export class Receiver {
  readonly deliveries: Delivery[] = [];
  private readonly server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      this.deliveries.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      response.writeHead(204).end();
    });
  });

  async listen(address: string): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, address, resolve);
    });
    return `http://${address}:${(this.server.address() as AddressInfo).port}/hooks/invoices`;
  }

  /** The invoice ids among the deliveries' bodies. */
  invoices(ids: readonly string[]): Set<string> {
    return new Set(ids.filter((id) => this.deliveries.some((delivery) => delivery.body.includes(`"${id}"`))));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The value of outbox_relay_state{state="active"} at a relay's /metrics (1 = streaming). */
export async function isActive(metricsPort: number): Promise<boolean> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(3_000) })).text();
  return /^outbox_relay_state\{state="active"\} 1$/m.test(text);
}
