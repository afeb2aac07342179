/**
 * One case of `npm run bench:producers`: BENCH_EVENTS records like the relay's (headers as
 * eventHeaders makes them, a JSON value, keyed by aggregate id) produced to BENCH_TOPIC in
 * requests of BENCH_BATCH, one request at a time, each awaited until Kafka acknowledged all of it
 * (acks=all, idempotent), as the sink sends them. The records are built before the clock starts:
 * what is timed is the producer alone. Prints one JSON line: the time and this process's CPU
 * (librdkafka's threads included) from the first send to the last acknowledgement.
 *
 * BENCH_CASE:
 * - `binding`: the librdkafka binding's own floor, a loop that only calls `produce()` with
 *   arguments made beforehand (value Buffer, headers as the relay gives them: one flat list, which
 *   scripts/kafka-javascript.patch adds), delivery reports counted per request;
 * - `binding-header-objects`: the same with headers in the binding's own form, an object per
 *   header: what the patch's header list saves;
 * - `binding-no-headers`: the same without the records' headers: what the binding's conversion
 *   of a header list costs;
 * - `binding-error-reports`: the same with delivery reports for failed records only
 *   (delivery.report.only.error), each request awaited by `flush()`: what a report per record costs;
 * - `librdkafka`, `kafkajs`, `platformatic`: the relay's RecordProducer on that client (src/kafka),
 *   given the relay's own OutgoingMessages.
 *
 * Env: KAFKA_BROKERS, BENCH_CASE, BENCH_TOPIC, BENCH_EVENTS, BENCH_BATCH, BENCH_PAYLOAD (bytes of JSON value).
 */
import type * as Rdkafka from '@confluentinc/kafka-javascript';
import pino from 'pino';
import type { TrackedTransaction } from '../../src/checkpoint/commit-tracker.js';
import { headerList, loadLibrdkafka, namedLibrdkafkaError } from '../../src/kafka/librdkafka/binding.js';
import { openKafkaProducer } from '../../src/kafka/open.js';
import { encodeHeaders } from '../../src/kafka/record-format.js';
import { recordSize } from '../../src/kafka/record-size.js';
import type { OutgoingMessage } from '../../src/kafka/record.js';
import { eventHeaders } from '../../src/transform/headers.js';
import { CASES, type ProducerCase } from './producer-floor-cases.js';


const brokers = required('KAFKA_BROKERS').split(',');
const topic = required('BENCH_TOPIC');
const events = Number(required('BENCH_EVENTS'));
const batchSize = Number(required('BENCH_BATCH'));
const payloadBytes = Number(required('BENCH_PAYLOAD'));
const benchCase = required('BENCH_CASE') as ProducerCase;
if (!CASES.includes(benchCase)) throw new Error(`BENCH_CASE=${benchCase}: expected one of ${CASES.join(', ')}`);

const messages = buildMessages();
const batches: OutgoingMessage[][] = [];
for (let start = 0; start < messages.length; start += batchSize) batches.push(messages.slice(start, start + batchSize));

const send = benchCase === 'librdkafka' || benchCase === 'kafkajs' || benchCase === 'platformatic' ? await relaySender(benchCase) : await bindingSender(benchCase);
// One request first, untimed: connections, metadata and the producer id are in place before the clock starts.
await send.produce(batches[0]!);
const cpuBefore = process.cpuUsage();
const started = performance.now();
for (const batch of batches) await send.produce(batch);
const ms = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
await send.close();
process.stdout.write(`${JSON.stringify({ case: benchCase, events: messages.length, ms, cpuMs: (cpu.user + cpu.system) / 1000 })}\n`);
process.exit(0);

interface Sender {
  produce(batch: readonly OutgoingMessage[]): Promise<void>;
  close(): Promise<void>;
}

/** The records the relay would make of BENCH_EVENTS invoice events. */
function buildMessages(): OutgoingMessage[] {
  const filler = 'x'.repeat(Math.max(0, payloadBytes - 120));
  const transaction = { commitLsnText: '0/16B3748' } as TrackedTransaction;
  return Array.from({ length: events }, (_, index) => {
    const aggregateId = `inv_${index % 5_000}`;
    const event = { eventId: `0192f0c4-7d3e-7a10-8000-${String(index).padStart(12, '0')}`, aggregateType: 'invoice', aggregateId, eventType: 'invoice.paid', payload: null, headers: {}, createdAt: '2026-12-05T09:00:00.000Z' };
    const headers = eventHeaders(event, transaction.commitLsnText, 'public.outbox');
    const value = JSON.stringify({ invoice_id: aggregateId, customer_id: `cus_${index % 997}`, amount_cents: 1999 + index, currency: 'EUR', note: filler });
    const headerBlock = encodeHeaders(headers);
    return { topic, key: aggregateId, value, headers, headerBlock, size: recordSize(aggregateId, value, headerBlock), transaction, position: 1, label: event.eventType, outbox: 'public.outbox', deadLetter: false, batchLimit: 1_048_588 };
  });
}

async function relaySender(client: 'librdkafka' | 'kafkajs' | 'platformatic'): Promise<Sender> {
  const producer = openKafkaProducer({
    client,
    brokers,
    clientId: `bench-producer-floor-${client}`,
    fastEncoder: true,
    compression: 'none',
    maxMessageBytes: 1_000_000,
    autoCreateTopics: false,
    logger: pino({ level: 'warn' }),
  });
  await producer.connect();
  return { produce: (batch) => producer.produce(batch), close: () => producer.disconnect() };
}

/** The binding with what it must be given made beforehand: the floor under the relay's librdkafka producer. */
async function bindingSender(variant: 'binding' | 'binding-header-objects' | 'binding-no-headers' | 'binding-error-reports'): Promise<Sender> {
  const errorReportsOnly = variant === 'binding-error-reports';
  const rdkafka = loadLibrdkafka();
  const producer = new rdkafka.Producer({
    'bootstrap.servers': brokers.join(','),
    'client.id': 'bench-producer-floor-binding',
    'enable.idempotence': true,
    acks: -1,
    'linger.ms': 2,
    'batch.num.messages': 100_000,
    'queue.buffering.max.messages': 2_000_000,
    'queue.buffering.max.kbytes': 2_097_151,
    dr_cb: true,
    'delivery.report.only.error': errorReportsOnly,
  } as Rdkafka.ProducerGlobalConfig);
  let settle: (() => void) | null = null;
  let outstanding = 0;
  let failure: Error | null = null;
  producer.on('delivery-report', (error) => {
    if (error) failure ??= namedLibrdkafkaError(error);
    outstanding -= 1;
    if (outstanding === 0) settle?.();
  });
  await new Promise<void>((resolve, reject) => producer.connect({ timeout: 30_000 }, (error) => (error ? reject(error) : resolve())));
  producer.setPollInBackground(true);
  // Per request, the binding's arguments for each of its records: one lookup a request, none a record.
  const headers = (message: OutgoingMessage) =>
    variant === 'binding-no-headers' ? undefined : variant === 'binding-header-objects' ? Object.entries(message.headers).map(([name, value]) => ({ [name]: value })) : headerList(message.headers);
  const prepared = new Map(batches.map((batch) => [batch, batch.map((message) => ({ key: message.key, value: Buffer.from(message.value), headers: headers(message) }))]));
  return {
    async produce(batch) {
      const done = new Promise<void>((resolve) => (settle = resolve));
      outstanding = batch.length;
      for (const { key, value, headers } of prepared.get(batch as OutgoingMessage[])!) producer.produce(topic, null, value, key, null, null, headers);
      if (errorReportsOnly) {
        // Only a failed record reports: the request is done when librdkafka's queue is empty.
        await new Promise<void>((resolve, reject) => producer.flush(30_000, (error) => (error ? reject(error) : resolve())));
        if (failure) throw failure;
        return;
      }
      await done;
      if (failure) throw failure;
    },
    close: () => new Promise((resolve) => producer.disconnect(5_000, () => resolve())),
  };
}

function required(variable: string): string {
  const value = process.env[variable];
  if (!value) throw new Error(`${variable} is required`);
  return value;
}
