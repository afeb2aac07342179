import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli } from '../harness/cli.js';
import { useTestOutbox } from '../harness/fixture.js';
import { testKafkaClients } from '../harness/kafka-clients.js';
import { billingEvent, type OutboxRow } from '../harness/outbox.js';
import { delay, eventually, RelayProcess } from '../harness/relay-process.js';
import { useTestWebhooks, verifiedBody, WebhookReceiver } from '../harness/webhooks.js';

const CUSTOMERS = ['cus_acme', 'cus_globex', 'cus_initech'] as const;
/** Every this-many-th event carries no customer: it goes to the platform-wide endpoint only, and is listed. */
const WITHOUT_CUSTOMER_EVERY = 97;

interface Endpoint {
  readonly name: string;
  readonly id: string;
  readonly secret: string;
  readonly receiver: WebhookReceiver;
  /** null: platform-wide. */
  readonly customer: string | null;
  readonly eventTypes: readonly string[];
}

/**
 * Webhooks per customer: an event goes to its customer's endpoints subscribed to its type and
 * to the platform-wide ones, and to no other customer's, across two processes and a kill -9
 * (asserted per request, from what each receiver got); an event whose customer is not found goes
 * to no customer, is listed and replayable; endpoints of an earlier setup that belong to nobody
 * keep the process from starting until assigned. The customer is the outbox row's `customer_id`
 * header (OUTBOX_WEBHOOK_CUSTOMER_FROM=header:customer_id), as the relay carries it to Kafka.
 * On each Kafka client the consumer can run on (OUTBOX_KAFKA_CLIENT).
 */
describe.each(testKafkaClients())('webhooks per customer (consumer on %s)', (kafkaClient) => {
  const { outbox } = useTestOutbox({ aggregateTypes: ['invoice'] });
  const webhooks = useTestWebhooks(outbox);
  const endpoints: Endpoint[] = [];
  const processes: RelayProcess[] = [];
  /** Each event's customer (null: none). */
  const customerOf = new Map<string, string | null>();
  let relay: RelayProcess;
  // 1 s attempts: a killed process's leases run out after 4 × 1 s + 5 s.
  const env = () => webhooks.env({ OUTBOX_KAFKA_CLIENT: kafkaClient, OUTBOX_WEBHOOK_CUSTOMER_FROM: 'header:customer_id', OUTBOX_WEBHOOK_TIMEOUT: '1s', OUTBOX_WEBHOOK_RETRY_SCHEDULE: '0s,200ms,500ms,1s,2s,5s' });

  function startWebhooks(): RelayProcess {
    const started = new RelayProcess(env(), [], 'webhooks').start();
    processes.push(started);
    return started;
  }

  async function endpoint(name: string, customer: string | null, eventTypes: readonly string[]): Promise<Endpoint> {
    const receiver = await new WebhookReceiver().start();
    const added = await webhooks.addEndpoint(receiver.url(), eventTypes.join(','), customer === null ? ['--platform-wide'] : ['--customer', customer]);
    const made = { name, ...added, receiver, customer, eventTypes };
    endpoints.push(made);
    return made;
  }

  function subscribes(endpoint: Endpoint, eventType: string): boolean {
    return endpoint.eventTypes.some((pattern) => pattern === '*' || pattern === eventType || (pattern.endsWith('.*') && eventType.startsWith(pattern.slice(0, -1))));
  }

  /** Events of the three customers (and some of none), `perTransaction` at a time. */
  async function load(total: number, perTransaction: number, everyMs: number): Promise<OutboxRow[]> {
    const rows: OutboxRow[] = [];
    for (let i = 0; i < total; i += perTransaction) {
      const batch = Array.from({ length: Math.min(perTransaction, total - i) }, (_, j) => {
        const n = i + j;
        const customer = n % WITHOUT_CUSTOMER_EVERY === 0 ? null : CUSTOMERS[n % CUSTOMERS.length]!;
        const event = billingEvent(`inv-${n % 41}`, n, n % 5 === 0 ? 'invoice.voided' : 'invoice.paid');
        customerOf.set(event.eventId, customer);
        return { ...event, headers: { ...event.headers, ...(customer !== null && { customer_id: customer }) } };
      });
      await outbox.insert(batch);
      rows.push(...batch);
      await delay(everyMs);
    }
    return rows;
  }

  beforeAll(async () => {
    relay = new RelayProcess(outbox.relayEnv()).start();
    await relay.waitActive();
  });

  afterAll(async () => {
    for (const process of processes) await process.stop().catch(() => undefined);
    await relay?.stop();
    await Promise.all(endpoints.map((e) => e.receiver.stop()));
  });

  it("delivers each event to its customer's endpoints and the platform-wide one only, under two processes and a kill -9: 0 to another customer", async () => {
    await endpoint('acme', 'cus_acme', ['invoice.*']);
    await endpoint('acme-paid', 'cus_acme', ['invoice.paid']);
    await endpoint('globex', 'cus_globex', ['invoice.*']);
    await endpoint('initech', 'cus_initech', ['invoice.*']);
    await endpoint('ledger', null, ['*']);
    const [one, two] = [startWebhooks(), startWebhooks()];
    await Promise.all([one.waitForLog(/consuming and dispatching/), two.waitForLog(/consuming and dispatching/)]);
    const loading = load(3_000, 20, 30);
    await delay(2_000);
    await one.kill9();
    startWebhooks();
    const rows = await loading;

    const owed = (e: Endpoint) => rows.filter((row) => subscribes(e, row.eventType) && (e.customer === null || customerOf.get(row.eventId) === e.customer)).map((row) => row.eventId);
    await eventually(
      'every owed event at every endpoint',
      async () => (endpoints.every((e) => owed(e).every((id) => e.receiver.ids().includes(id))) ? true : undefined),
      120_000,
      500,
    );
    let crossCustomer = 0;
    let duplicates = 0;
    let requests = 0;
    for (const e of endpoints) {
      requests += e.receiver.requests.length;
      for (const request of e.receiver.requests) {
        verifiedBody(e.secret, request);
        // Per request: an event of another customer, or of none, at a customer's endpoint.
        if (e.customer !== null && customerOf.get(request.id) !== e.customer) crossCustomer += 1;
      }
      const received = new Set(e.receiver.ids());
      expect(received, `${e.name} got exactly what it is owed`).toEqual(new Set(owed(e)));
      duplicates += e.receiver.requests.length - received.size;
    }
    expect(crossCustomer).toBe(0);
    const withoutCustomer = rows.filter((row) => customerOf.get(row.eventId) === null).map((row) => row.eventId);
    const listed = await cli(['webhooks', 'without-customer', '--json', '--limit', '1000'], env());
    expect(listed.code, listed.stderr).toBe(0);
    const listedEvents = JSON.parse(listed.stdout) as { eventId: string; reason: string }[];
    expect(new Set(listedEvents.map((e) => e.eventId))).toEqual(new Set(withoutCustomer));
    expect(listedEvents[0]!.reason).toBe('no header customer_id');
    const owedInAll = endpoints.reduce((sum, e) => sum + owed(e).length, 0);
    console.info(`customers on ${kafkaClient}: ${rows.length} events (${withoutCustomer.length} without a customer), ${owedInAll} deliveries owed over ${endpoints.length} endpoints, ${requests} requests, ${crossCustomer} to another customer, 0 missing, ${duplicates} duplicates (same webhook-id, after the kill -9)`);
  });

  it('an event without a customer is delivered once its customer is named, to that customer only', async () => {
    const [listed] = await webhooks.query<{ event_id: string }>('SELECT event_id FROM wh.events_without_customer ORDER BY event_id LIMIT 1');
    const eventId = listed!.event_id;
    // The rule as it is cannot find it: it stays listed.
    const byRule = await cli(['webhooks', 'replay', '--without-customer', '--event-id', eventId], env());
    expect(byRule.code, byRule.stderr).toBe(0);
    expect(byRule.stdout).toContain(`0 events found their customer`);
    expect(byRule.stdout).toContain(`${eventId}: no header customer_id`);
    // A customer with no endpoint (a typo): refused, the event kept on the list.
    const mistyped = await cli(['webhooks', 'replay', '--without-customer', '--event-id', eventId, '--customer', 'cus_glbex'], env());
    expect(mistyped.code).toBe(1);
    expect(mistyped.stderr).toMatch(/\[WEBHOOK_NOT_FOUND\]: customer cus_glbex has no webhook endpoint/);
    const named = await cli(['webhooks', 'replay', '--without-customer', '--event-id', eventId, '--customer', 'cus_globex'], env());
    expect(named.code, named.stderr).toBe(0);
    expect(named.stdout).toContain('1 events found their customer; 1 deliveries');
    const globex = endpoints.find((e) => e.name === 'globex')!;
    await eventually('the named customer got it', async () => (globex.receiver.ids().includes(eventId) ? true : undefined), 30_000);
    for (const other of endpoints.filter((e) => e.customer !== null && e.customer !== 'cus_globex')) expect(other.receiver.ids()).not.toContain(eventId);
    expect(await webhooks.query('SELECT 1 FROM wh.events_without_customer WHERE event_id = $1', [eventId])).toHaveLength(0);
  });

  it("lists and replays by customer; an endpoint's customer is set once; what does not exist is WEBHOOK_NOT_FOUND", async () => {
    const acme = await cli(['webhooks', 'endpoint', 'list', '--customer', 'cus_acme', '--json'], env());
    expect((JSON.parse(acme.stdout) as { id: string }[]).map((e) => e.id).sort()).toEqual(endpoints.filter((e) => e.customer === 'cus_acme').map((e) => e.id).sort());
    const globex = endpoints.find((e) => e.name === 'globex')!;
    const deliveries = JSON.parse((await cli(['webhooks', 'deliveries', 'list', '--customer', 'cus_globex', '--json', '--limit', '5000'], env())).stdout) as { endpointId: string; eventId: string }[];
    expect(deliveries.length).toBeGreaterThan(0);
    expect(new Set(deliveries.map((d) => d.endpointId))).toEqual(new Set([globex.id]));
    // A customer whose endpoint was down for a day: everything recorded for it since then, again.
    const before = globex.receiver.requests.length;
    const replayed = await cli(['webhooks', 'replay', '--customer', 'cus_globex', '--since', new Date(Date.now() - 86_400_000).toISOString()], env());
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain(`${deliveries.length} deliveries are due again`);
    await eventually('the customer got its deliveries again', async () => (globex.receiver.requests.length - before >= deliveries.length ? true : undefined), 60_000);
    const moved = await cli(['webhooks', 'endpoint', 'update', '--id', globex.id, '--customer', 'cus_acme'], env());
    expect(moved.code).toBe(1);
    expect(moved.stderr).toMatch(/\[WEBHOOK_ENDPOINT_INVALID\].*assigned already \(customer cus_globex\)/);
    const nobody = await cli(['webhooks', 'endpoint', 'add', '--url', globex.receiver.url(), '--event-types', 'invoice.*'], env());
    expect(nobody.code).toBe(2);
    expect(nobody.stderr).toMatch(/needs --customer .* or --platform-wide/);
    for (const args of [['--delivery', '999999999'], ['--delivery', 'nope'], ['--event-id', 'no-such-event'], ['--endpoint', 'ep_none', '--since', '2026-01-01T00:00:00Z'], ['--customer', 'cus_none', '--since', '2026-01-01T00:00:00Z']]) {
      const missing = await cli(['webhooks', 'replay', ...args], env());
      expect(missing.code, args.join(' ')).toBe(1);
      expect(missing.stderr).toMatch(/\[WEBHOOK_NOT_FOUND\]/);
    }
  });

  it('an endpoint of an earlier setup, with no customer, keeps the process from starting until it is assigned', async () => {
    for (const process of processes) await process.stop();
    // As an earlier version's setup left it: no customer, not platform-wide.
    await webhooks.query(`INSERT INTO wh.endpoints (id, url, event_types, secrets, description) VALUES ('ep_legacy', 'http://127.0.0.1:1/legacy', ARRAY['invoice.*'], '[]', 'Acme Corp')`);
    const setup = await cli(['webhooks', 'setup'], env());
    expect(setup.code, setup.stderr).toBe(0);
    expect(setup.stdout).toContain('outbox-relay webhooks endpoint update --id ep_legacy --customer <customer id>');
    const refused = startWebhooks();
    expect(await refused.waitExit(60_000)).toBe(1);
    expect(refused.tail()).toMatch(/\[WEBHOOK_ENDPOINTS_UNASSIGNED\].*ep_legacy \(Acme Corp\).*webhooks endpoint update --id <id> --customer/);
    const listed = await cli(['webhooks', 'endpoint', 'list'], env());
    expect(listed.stdout).toMatch(/ep_legacy\s+NONE: assign one/);
    const assigned = await cli(['webhooks', 'endpoint', 'update', '--id', 'ep_legacy', '--customer', 'cus_acme'], env());
    expect(assigned.code, assigned.stderr).toBe(0);
    const started = startWebhooks();
    await started.waitForLog(/consuming and dispatching/);
  });
});
