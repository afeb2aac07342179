/**
 * Contender 1, the decode ceiling: a logical replication stream read and decoded exactly as
 * the relay's source does (pg replication connection, pg-logical-replication's pgoutput
 * parser, rows parsed into values), with no Kafka. Counts inserts until BENCH_COUNT, then
 * prints one JSON line with the time of the first and the last insert.
 *
 * Env: DATABASE_URL, BENCH_SLOT, BENCH_PUBLICATION, BENCH_COUNT.
 */
import pg from 'pg';
import { PgoutputPlugin } from 'pg-logical-replication';

interface ReplicationWire {
  on(event: 'copyData', listener: (message: { chunk: Buffer }) => void): void;
  sendCopyFromChunk(chunk: Buffer): void;
}

const XLOG_DATA = 0x77;
const KEEPALIVE = 0x6b;
const POSTGRES_EPOCH_MS = 946_684_800_000n;

const url = required('DATABASE_URL');
const slot = required('BENCH_SLOT');
const publication = required('BENCH_PUBLICATION');
const target = Number(required('BENCH_COUNT'));

const parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
const client = new pg.Client({ connectionString: url, replication: 'database' } as pg.ClientConfig);
let inserts = 0;
let firstAt = 0;
let lastLsn = 0n;

await client.connect();
const wire = client.connection as unknown as ReplicationWire;
wire.on('copyData', ({ chunk }) => {
  const tag = chunk[0];
  if (tag === KEEPALIVE) {
    if (chunk[17] === 1) sendStatus(lastLsn);
    return;
  }
  if (tag !== XLOG_DATA) return;
  const message = parser.parse(chunk.subarray(25));
  if (message.tag === 'commit' && message.commitEndLsn) lastLsn = lsn(message.commitEndLsn);
  if (message.tag !== 'insert') return;
  inserts += 1;
  if (inserts === 1) firstAt = Date.now();
  if (inserts === target) {
    process.stdout.write(`${JSON.stringify({ done: true, count: inserts, firstAt, lastAt: Date.now() })}\n`);
    sendStatus(lastLsn);
    setTimeout(() => process.exit(0), 200);
  }
});
const status = setInterval(() => sendStatus(lastLsn), 1_000);
status.unref();
const progress = setInterval(() => process.stdout.write(`${JSON.stringify({ count: inserts })}\n`), 2_000);
progress.unref();
process.stdout.write(`${JSON.stringify({ active: true })}\n`);
await client.query(
  `START_REPLICATION SLOT ${pg.escapeIdentifier(slot)} LOGICAL 0/0 (proto_version '1', publication_names ${pg.escapeLiteral(publication)})`,
);

function sendStatus(position: bigint): void {
  const update = Buffer.alloc(34);
  update[0] = 0x72;
  update.writeBigUInt64BE(position, 1);
  update.writeBigUInt64BE(position, 9);
  update.writeBigUInt64BE(position, 17);
  update.writeBigInt64BE((BigInt(Date.now()) - POSTGRES_EPOCH_MS) * 1000n, 25);
  wire.sendCopyFromChunk(update);
}

function lsn(text: string): bigint {
  const [high, low] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}
