/**
 * `npm run bench:transcoder [-- --rounds N]`: compiled by tsc and run by node with the relay's
 * semi-space size, as the relay runs.
 *
 * What one payload costs the Avro format against the JSON format, without Postgres or Kafka:
 * the bench's own event (bench/lib/db.ts bench_payload) as jsonb prints it, at ~300 B and ~2 KB,
 * through
 *   - the JSON path: the copy of the payload's bytes out of the replication frame (all the JSON
 *     format does to a payload before the Kafka record);
 *   - the transcoder (encode/avro/transcoder.ts): that copy, then jsonb text to Avro binary;
 *   - the parsing path the transcoder spares: JSON.parse, then avsc's encoder.
 * Each figure is the fastest of --rounds rounds (default 5) of a million payloads, in ns per
 * payload: on a shared machine the fastest round is the one least disturbed. The drains of
 * `npm run bench` say what the difference does to throughput; this says where it comes from.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { JsonText } from '../src/decode/json-text.js';
import { formatProblem, loadSchemaText } from '../src/encode/avro/schema-set.js';
import { compileTranscoder } from '../src/encode/avro/transcoder.js';
import { HEADER_BYTES } from '../src/encode/avro/wire.js';
import * as p from '../src/config/parsers.js';
import { flag } from './lib/flags.js';

const PAYLOADS_PER_ROUND = 1_000_000;
/** From the repository's root, where npm runs it. */
const SCHEMA_FILE = 'bench/schemas/PaymentRecorded.avsc';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' } }, strict: true, allowPositionals: false });
const rounds = flag('rounds', values.rounds, p.integer(1, 100));

// Loaded as the relay loads schemas/: the same avsc type, logical types included.
const schema = loadSchemaText(SCHEMA_FILE, readFileSync(SCHEMA_FILE, 'utf8'));
if ('problems' in schema) throw new Error(schema.problems.map(formatProblem).join('\n'));
const { type } = schema;
const transcode = compileTranscoder(type);
if (transcode === null) throw new Error(`${SCHEMA_FILE}: the transcoder does not take this schema`);
const scratch = Buffer.allocUnsafe(64 * 1024);

/**
 * bench_payload(i, size) as Postgres prints the jsonb: keys shortest first, then by bytes, one
 * space after each colon and comma. Inside a frame, as the relay receives it.
 */
function benchPayload(i: number, size: number): { frame: Buffer; start: number; end: number } {
  const chunks = Math.max(1, Math.floor((size - 130) / 32));
  let note = '';
  for (let k = 1; k <= chunks; k++) note += createHash('md5').update(`${i}:${k}`).digest('hex');
  const text = `{"note": "${note}", "method": "card", "currency": "EUR", "invoice_id": "inv-${i}", "customer_id": "cust-${i % 5000}", "amount_cents": ${(i * 7919) % 1_000_000}}`;
  // Bytes around it, as the frame's header and the row's other columns.
  const frame = Buffer.from(`${'x'.repeat(64)}${text}${'y'.repeat(32)}`);
  return { frame, start: 64, end: 64 + Buffer.byteLength(text) };
}

type Path = (frame: Buffer, start: number, end: number) => unknown;

const PATHS: Readonly<Record<string, Path>> = {
  'JSON format (copy)': (frame, start, end) => JsonText.fromBytes(frame, start, end).bytes,
  'Avro, transcoder': (frame, start, end) => transcode(JsonText.fromBytes(frame, start, end).bytes),
  'Avro, JSON.parse + avsc': (frame, start, end) => {
    const value: unknown = JSON.parse(JsonText.fromBytes(frame, start, end).text);
    return Buffer.from(scratch.subarray(0, type.encode(value, scratch, HEADER_BYTES)));
  },
};

/** Nanoseconds per payload over one round. */
function round(path: Path, payload: ReturnType<typeof benchPayload>): number {
  const { frame, start, end } = payload;
  let kept: unknown = null;
  const started = process.hrtime.bigint();
  for (let n = 0; n < PAYLOADS_PER_ROUND; n++) kept = path(frame, start, end);
  const elapsed = Number(process.hrtime.bigint() - started);
  if (kept === null) throw new Error('a path returned nothing');
  return elapsed / PAYLOADS_PER_ROUND;
}

for (const size of [300, 2000]) {
  const payload = benchPayload(123_457, size);
  const best = new Map<string, number>();
  // Rounds alternate between the paths, so a slow moment of the machine is shared among them.
  for (let r = 0; r < rounds + 1; r++) {
    for (const [name, path] of Object.entries(PATHS)) {
      const ns = round(path, payload);
      // The first round warms the code up (the optimizing compiler) and is not counted.
      if (r > 0) best.set(name, Math.min(best.get(name) ?? Infinity, ns));
    }
  }
  const bytes = payload.end - payload.start;
  const copy = best.get('JSON format (copy)')!;
  console.log(`\n${bytes}-byte payload, fastest of ${rounds} rounds of ${PAYLOADS_PER_ROUND.toLocaleString('en-US')}:`);
  for (const [name, ns] of best) console.log(`  ${name.padEnd(26)} ${ns.toFixed(0).padStart(6)} ns  (+${(ns - copy).toFixed(0)} over the JSON format)`);
}
