/**
 * Contender 3, the classic polling relay: in one transaction, lock the oldest pending rows
 * (partial index on status = 'pending', FOR UPDATE SKIP LOCKED), publish them to Kafka with
 * the same producer settings as outbox-relay (kafkajs, idempotent, acks=-1, one request in
 * flight, key = aggregate_id, the same headers), mark them sent, commit. One worker, so one
 * aggregate's events stay in order, as with the relay.
 *
 * Env: DATABASE_URL, KAFKA_BROKERS, BENCH_TOPIC_PREFIX, BENCH_BATCH (rows per poll),
 * BENCH_IDLE_MS (sleep after a poll that found fewer rows than a batch).
 */
import { Kafka, logLevel, Partitioners, type Message } from 'kafkajs';
import pg from 'pg';

/**
 * One poll's rows as produce requests of at most MAX_REQUEST_BYTES of values: a request's
 * per-partition record batch must stay under the broker's message.max.bytes (1 MB default),
 * which 2,000 rows of 2 KB over 3 partitions would exceed.
 */
const MAX_REQUEST_BYTES = 2_000_000;

const url = required('DATABASE_URL');
const brokers = required('KAFKA_BROKERS').split(',');
const prefix = required('BENCH_TOPIC_PREFIX');
const batch = Number(required('BENCH_BATCH'));
const idleMs = Number(required('BENCH_IDLE_MS'));

interface Row {
  event_id: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  payload: string;
  created_at: Date;
}

const db = new pg.Client({ connectionString: url });
await db.connect();
const kafka = new Kafka({ clientId: 'bench-polling', brokers, logLevel: logLevel.WARN });
const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: true });
await producer.connect();

let stopping = false;
process.on('SIGTERM', () => (stopping = true));
process.stdout.write(`${JSON.stringify({ active: true })}\n`);

const select =
  `SELECT event_id, aggregate_type, aggregate_id, event_type, payload::text AS payload, created_at
     FROM polling_outbox WHERE status = 'pending' ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED`;

while (!stopping) {
  await db.query('BEGIN');
  const { rows } = await db.query<Row>({ name: 'poll', text: select, values: [batch] });
  if (rows.length > 0) {
    const byTopic = new Map<string, Message[]>();
    for (const row of rows) {
      const topic = `${prefix}.${row.aggregate_type}`;
      let messages = byTopic.get(topic);
      if (!messages) byTopic.set(topic, (messages = []));
      messages.push({
        key: row.aggregate_id,
        value: row.payload,
        headers: { event_id: row.event_id, event_type: row.event_type, aggregate_type: row.aggregate_type, created_at: row.created_at.toISOString() },
      });
    }
    for (const request of requests(byTopic)) await producer.sendBatch({ acks: -1, timeout: 30_000, topicMessages: request });
    await db.query({ name: 'mark', text: "UPDATE polling_outbox SET status = 'sent', sent_at = now() WHERE event_id = ANY($1)", values: [rows.map((row) => row.event_id)] });
  }
  await db.query('COMMIT');
  if (rows.length < batch) await new Promise((resolve) => setTimeout(resolve, idleMs));
}
await producer.disconnect();
await db.end();

function requests(byTopic: Map<string, Message[]>): { topic: string; messages: Message[] }[][] {
  const out: { topic: string; messages: Message[] }[][] = [];
  let current: { topic: string; messages: Message[] }[] = [];
  let bytes = 0;
  for (const [topic, messages] of byTopic) {
    let part: Message[] = [];
    current.push({ topic, messages: part });
    for (const message of messages) {
      const size = Buffer.byteLength(message.value as string);
      if (bytes + size > MAX_REQUEST_BYTES && bytes > 0) {
        out.push(current);
        part = [];
        current = [{ topic, messages: part }];
        bytes = 0;
      }
      part.push(message);
      bytes += size;
    }
  }
  if (bytes > 0) out.push(current.filter((entry) => entry.messages.length > 0));
  return out;
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}
