/**
 * The durable loop of `npm run bench:webhooks`: the least that any webhooks path which keeps the
 * issue's promise does for one delivery, written as plainly as it can be, to tell apart what the
 * floor asks of the design from what it asks of the machine. It consumes the case's topic with
 * the webhooks command's own consumer (the client of the case, from dist/), decodes each record
 * and makes its body as the command does, finds the event's customer by the command's rule and
 * the endpoints it is owed with the command's SubscriptionIndex (its customer's, by a map lookup,
 * and the platform-wide ones: the same (event, endpoint) pairs as the webhooks process), sends
 * each (event, endpoint) with the command's own client and signing (as the ceiling does), and,
 * before the chunk's offset is committed, records
 * every delivery and its attempt durably, once: one row per delivery (its outcome and attempt in
 * it) and the event's body once, in one statement per group of chunks, with synchronous commit.
 *
 * Nothing else: no retries, no leases, no per-endpoint limits, circuits or slots, no separate
 * attempts table, no second write of a row. A real delivery store does all of that on top, so
 * what this loop reaches bounds from above what any durable design reaches on this machine.
 *
 * Its one argument is JSON: DurableLoopArgs. Prints one JSON line when every delivery is recorded.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type * as Body from '../../src/webhooks/event-body.js';
import type * as GroupConsumer from '../../src/kafka/group-consumer.js';
import type * as OpenKafka from '../../src/kafka/open.js';
import type { KafkaClientName } from '../../src/kafka/ports.js';
import type * as Consumer from '../../src/client/consumer.js';
import { loadBenchClient, loadRouting, loadTargets, type Target } from './webhook-client.js';

export interface DurableLoopArgs {
  readonly databaseUrl: string;
  /** The case's webhook schema: its endpoints. The loop's own tables go in `<schema>_durable_loop`. */
  readonly schema: string;
  readonly concurrency: number;
  readonly dist: string;
  readonly kafkaClient: KafkaClientName;
  readonly brokers: readonly string[];
  readonly topic: string;
  readonly groupId: string;
  /** Deliveries to record before it stops. */
  readonly deliveries: number;
  /** OUTBOX_WEBHOOK_CUSTOMER_FROM of the webhooks run. */
  readonly customerFrom: string;
}

/**
 * Deliveries sent, then recorded, together (whole events: at least one event a chunk): about
 * the intake's chunk on a 1-endpoint case (100 events), one event with 100 or more endpoints.
 */
const CHUNK_DELIVERIES = 100;

const args = JSON.parse(process.argv[2] ?? '{}') as DurableLoopArgs;
const load = <M>(path: string): Promise<M> => import(pathToFileURL(join(args.dist, path)).href) as Promise<M>;
const { eventBody } = await load<typeof Body>('webhooks/event-body.js');
const { decodeOutboxRecord } = await load<typeof Consumer>('client/consumer.js');

const source = pg.escapeIdentifier(args.schema);
const own = pg.escapeIdentifier(`${args.schema}_durable_loop`);
const pool = new pg.Pool({ connectionString: args.databaseUrl, application_name: 'bench-webhook-durable-loop', max: 2 });
await pool.query(`DROP SCHEMA IF EXISTS ${own} CASCADE`);
await pool.query(`CREATE SCHEMA ${own}`);
await pool.query(`CREATE TABLE ${own}.events (event_id text PRIMARY KEY, body text NOT NULL, produced_at timestamptz NOT NULL)`);
await pool.query(
  `CREATE TABLE ${own}.deliveries (event_id text NOT NULL, endpoint_id text NOT NULL, status_code integer, outcome text NOT NULL,
     started_at timestamptz NOT NULL, latency_ms integer NOT NULL, PRIMARY KEY (event_id, endpoint_id))`,
);

const endpoints = new Map<string, Target>((await loadTargets(pool, source)).map((target) => [target.id, target]));
const routing = await (async () => {
  const client = await pool.connect();
  try {
    return await loadRouting(args.dist, client, args.schema, args.customerFrom);
  } finally {
    client.release();
  }
})();
const { sender, request } = await loadBenchClient(args.dist, args.concurrency);

/** Requests in flight, at most `concurrency`; the rest wait in order. */
let sending = 0;
const waiting: (() => void)[] = [];
async function slot(): Promise<void> {
  if (sending < args.concurrency) {
    sending += 1;
    return;
  }
  await new Promise<void>((resolve) => waiting.push(resolve));
}
function freeSlot(): void {
  const next = waiting.shift();
  if (next) next();
  else sending -= 1;
}

interface Recorded {
  readonly eventId: string;
  readonly endpointId: string;
  readonly statusCode: number | null;
  readonly outcome: string;
  readonly startedAt: Date;
  readonly latencyMs: number;
}
interface EventRow {
  readonly eventId: string;
  readonly body: string;
  readonly producedAt: Date;
}

/** Groups of chunks waiting for the one write in progress: the next write takes all of them. */
let toWrite: { events: EventRow[]; deliveries: Recorded[]; resolve: () => void; reject: (error: unknown) => void }[] = [];
let writing: Promise<void> | null = null;
let recorded = 0;
/** The first write's end: the steady rate is from there (start-up and group join left out). */
let firstWrite: { readonly at: number; readonly recorded: number } | null = null;
let done: () => void = () => undefined;
const allRecorded = new Promise<void>((resolve) => (done = resolve));

function write(events: EventRow[], deliveries: Recorded[]): Promise<void> {
  return new Promise((resolve, reject) => {
    toWrite.push({ events, deliveries, resolve, reject });
    writing ??= writeQueued();
  });
}

async function writeQueued(): Promise<void> {
  try {
    while (toWrite.length > 0) {
      const group = toWrite;
      toWrite = [];
      const events = group.flatMap((g) => g.events);
      const deliveries = group.flatMap((g) => g.deliveries);
      try {
        await pool.query({
          name: 'durable_loop_record',
          text: `WITH ev AS (
                   INSERT INTO ${own}.events SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[]) ON CONFLICT DO NOTHING
                 )
                 INSERT INTO ${own}.deliveries SELECT * FROM unnest($4::text[], $5::text[], $6::int[], $7::text[], $8::timestamptz[], $9::int[]) ON CONFLICT DO NOTHING`,
          values: [
            events.map((e) => e.eventId),
            events.map((e) => e.body),
            events.map((e) => e.producedAt),
            deliveries.map((d) => d.eventId),
            deliveries.map((d) => d.endpointId),
            deliveries.map((d) => d.statusCode),
            deliveries.map((d) => d.outcome),
            deliveries.map((d) => d.startedAt),
            deliveries.map((d) => d.latencyMs),
          ],
        });
        for (const g of group) g.resolve();
        firstWrite ??= { at: performance.now(), recorded: recorded + deliveries.length };
        recorded += deliveries.length;
        if (recorded >= args.deliveries) done();
      } catch (error) {
        for (const g of group) g.reject(error);
      }
    }
  } finally {
    writing = null;
  }
}

/** One delivery's attempt, signed as the dispatcher signs one, once `turn` (a request slot) came. */
async function attempt(turn: Promise<void>, event: EventRow, endpoint: Target): Promise<Recorded> {
  await turn;
  try {
    const startedAt = new Date();
    const result = await sender.send(request(endpoint, event.eventId, event.body));
    return { eventId: event.eventId, endpointId: endpoint.id, statusCode: result.statusCode, outcome: result.outcome, startedAt, latencyMs: result.latencyMs };
  } finally {
    freeSlot();
  }
}

/** A partition's batch: chunks sent as slots allow, each recorded, then its offset marked recorded, in order. */
async function take(batch: GroupConsumer.ConsumedBatch): Promise<void> {
  let previous: Promise<void> = Promise.resolve();
  for (let next = 0; next < batch.messages.length; ) {
    const events: EventRow[] = [];
    const owed: (readonly string[])[] = [];
    let fannedOut = 0;
    let last = batch.messages[next]!.offset;
    while (next < batch.messages.length && fannedOut < CHUNK_DELIVERIES) {
      const message = batch.messages[next++]!;
      last = message.offset;
      const event = await decodeOutboxRecord(batch.topic, batch.partition, message, undefined);
      const producedAt = new Date(Number(message.timestamp));
      // Its customer's endpoints and the platform-wide ones, as the intake finds them.
      const endpointIds = routing.index.endpointsFor(routing.customerOf(event), event.eventType, producedAt.getTime());
      if (endpointIds.length === 0) continue;
      events.push({ eventId: event.eventId, body: eventBody(event, producedAt), producedAt });
      owed.push(endpointIds);
      fannedOut += endpointIds.length;
    }
    const attempts: Promise<Recorded>[] = [];
    let turn: Promise<void> = Promise.resolve();
    events.forEach((event, i) => {
      for (const endpointId of owed[i]!) attempts.push(attempt((turn = slot()), event, endpoints.get(endpointId)!));
    });
    const before = previous;
    previous = (async () => {
      const deliveries = await Promise.all(attempts);
      if (deliveries.length > 0) await write(events, deliveries);
      await before;
      await batch.recorded(last);
    })();
    // The next chunk's sends queue behind this one's: once this chunk's last request has its slot.
    await turn;
  }
  await previous;
}

const events: GroupConsumer.GroupConsumerEvents = { joined: () => undefined, failed: (error) => process.stderr.write(`durable loop: consumer failed: ${String(error)}\n`) };
// The webhooks command's own consumer, on the case's client.
const { openGroupConsumers } = await load<typeof OpenKafka>('kafka/open.js');
const { pino } = await import('pino');
const consumer = openGroupConsumers(args.kafkaClient, { brokers: args.brokers, clientId: 'bench-durable-loop', security: { tls: null, sasl: null }, logger: pino({ level: 'warn' }) }).open(args.groupId, events);

const cpuBefore = process.cpuUsage();
const started = performance.now();
await consumer.start([args.topic], take);
await allRecorded;
const ended = performance.now();
const cpu = process.cpuUsage(cpuBefore);
// Set by the writes, which the compiler cannot see from here.
const first = firstWrite as { readonly at: number; readonly recorded: number } | null;
// One write (a case of one chunk, e.g. one event to 10,000 endpoints in a quick run) has no steady part.
const steadyDeliveriesPerSecond = first && ended > first.at && recorded > first.recorded ? ((recorded - first.recorded) * 1000) / (ended - first.at) : NaN;
process.stdout.write(`${JSON.stringify({ done: true, deliveries: recorded, seconds: (ended - started) / 1000, steadyDeliveriesPerSecond, cpuSeconds: (cpu.user + cpu.system) / 1e6 })}\n`);
await consumer.stop();
await sender.close();
await pool.query(`DROP SCHEMA ${own} CASCADE`);
await pool.end();
