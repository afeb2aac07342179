/**
 * Contender 1, the decode ceiling: the relay's own source and decode stages (its replication
 * stream, pgoutput decoder, column parsers and row decoder) with no Kafka. What it
 * reaches is the most the WAL side allows on this machine; the relay adds the sink to it.
 * Counts inserts until BENCH_COUNT, then prints one JSON line with the time of the first and
 * the last insert.
 *
 * Env: DATABASE_URL, BENCH_SLOT, BENCH_PUBLICATION, BENCH_COUNT, BENCH_TABLE.
 */
import pino from 'pino';
import { columnParsersFor } from '../../src/decode/column-parsers.js';
import { RowDecoder } from '../../src/decode/row-decoder.js';
import { databaseAccess } from '../../src/pg-connection.js';
import { ReplicationStream } from '../../src/source/replication-stream.js';

const target = Number(required('BENCH_COUNT'));
const [schema, name] = required('BENCH_TABLE').split('.') as [string, string];
const columns = { eventId: 'event_id', aggregateType: 'aggregate_type', aggregateId: 'aggregate_id', eventType: 'event_type', payload: 'payload', headers: 'headers', createdAt: 'created_at' };
const decoder = new RowDecoder(columns);
const stream = new ReplicationStream({
  slotServer: { database: databaseAccess(required('DATABASE_URL')), standby: false },
  slot: required('BENCH_SLOT'),
  publication: required('BENCH_PUBLICATION'),
  highWaterMessages: 2_000,
  silenceTimeoutMs: 60_000,
  logger: pino({ level: 'warn' }),
  tables: [{ schema, name }],
  columnParsers: ({ schema: relationSchema, name: relationName }) => (relationSchema === schema && relationName === name ? columnParsersFor({ format: 'json', columnPayload: columns.payload, columnCreatedAt: columns.createdAt }) : undefined),
  messages: false,
});

let inserts = 0;
let firstAt = 0;
let lastEnd = (await stream.start()).confirmed;
process.stdout.write(`${JSON.stringify({ active: true })}\n`);
const status = setInterval(() => stream.sendStatus(lastEnd), 1_000);
const progress = setInterval(() => process.stdout.write(`${JSON.stringify({ count: inserts })}\n`), 2_000);

while (inserts < target) {
  const message = stream.take();
  if (message === undefined) {
    await stream.wait();
    continue;
  }
  if (message.kind === 'insert') {
    decoder.decode(message.row);
    inserts += 1;
    if (inserts === 1) firstAt = Date.now();
  } else if (message.kind === 'commit') lastEnd = message.endLsn;
  else if (message.kind === 'position' && message.replyRequested) stream.sendStatus(lastEnd);
}
process.stdout.write(`${JSON.stringify({ done: true, count: inserts, firstAt, lastAt: Date.now() })}\n`);
// The bench reads this process's peak RSS and CPU time from /proc when it sees the line above.
await new Promise((resolve) => setTimeout(resolve, 200));
clearInterval(status);
clearInterval(progress);
stream.sendStatus(lastEnd);
await stream.close();

function required(variable: string): string {
  const value = process.env[variable];
  if (!value) throw new Error(`${variable} is required`);
  return value;
}
