/**
 * `npm run bench:webhooks-api [-- --deliveries N] [-- --customers C] [-- --endpoints-per-customer K]
 * [-- --requests R] [-- --keep]`
 *
 * What `outbox-relay webhooks api` answers with a large delivery store, against the local stack's
 * Postgres (`scripts/stack.sh up`; a schema of its own, dropped at the end unless --keep):
 *   1. the store filled in SQL (generate_series): C customers of K endpoints each, N deliveries
 *      (N / K events, each of one customer, owed to its K endpoints, spread evenly over time and
 *      customers; 1 in 50 failed, the others delivered with their attempt), the listing indexes
 *      built after the rows (`webhooks setup` again: its CREATE INDEX IF NOT EXISTS);
 *   2. `node dist/cli.js webhooks api` started on it; R requests one after the other, each with
 *      a random customer's token (minted through the API): GET /v1/deliveries?limit=50, that
 *      customer's latest 50, floor p99 ≤ 50 ms; beside it, no floor, the platform's latest 50,
 *      a customer's latest 50 failed ones, and POST /v1/endpoints (a create, p50 and p99);
 *   3. the insert cost of the index the API added (deliveries_endpoint_idx)
 *      on the hot path: in a schema of its own, 100,000 deliveries inserted in statements of 500
 *      rows as the intake writes them (their events too), then completed (status written, a
 *      non-HOT update as every claim and completion is), with the index and without it,
 *      alternately three times: µs and WAL bytes per delivery, median of the three.
 * Writes bench/results/<date>-webhooks-api[-N].md and .json.
 */
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { integer } from '../src/config/parsers.js';
import { generateSecret } from '../src/webhooks/signature.js';
import { flag } from './lib/flags.js';
import { int, num } from './lib/format.js';
import { percentile } from './lib/kafka.js';
import { machineDescription, progress, run } from './lib/proc.js';
import { sourceState } from './lib/source-state.js';
import { stackEnv } from './lib/stack.js';
import { median } from './lib/stats.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const CLI = join(REPO, 'dist', 'cli.js');
const PLATFORM_TOKEN = randomBytes(24).toString('base64url');
const SIGNING_KEY = randomBytes(32).toString('base64url');
const LISTING_FLOOR_P99_MS = 50;
/** Events per INSERT of the fill: a statement of minutes, not hours, and no memory to speak of. */
const FILL_CHUNK_EVENTS = 250_000;
const COST_DELIVERIES = 100_000;
const COST_STATEMENT_ROWS = 500;
const COST_ROUNDS = 3;

const { values } = parseArgs({
  options: {
    deliveries: { type: 'string', default: '10000000' },
    customers: { type: 'string', default: '20000' },
    'endpoints-per-customer': { type: 'string', default: '5' },
    requests: { type: 'string', default: '2000' },
    keep: { type: 'boolean', default: false },
  },
});
const deliveries = flag('deliveries', values.deliveries, integer(1_000, 100_000_000));
const customers = flag('customers', values.customers, integer(1, 1_000_000));
const perCustomer = flag('endpoints-per-customer', values['endpoints-per-customer'], integer(1, 100));
const requests = flag('requests', values.requests, integer(100, 100_000));

interface Latency {
  readonly name: string;
  readonly requests: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

interface IndexCost {
  readonly variant: 'with' | 'without';
  readonly insertUsPerDelivery: number;
  readonly insertWalBytesPerDelivery: number;
  readonly completeUsPerDelivery: number;
  readonly completeWalBytesPerDelivery: number;
}

async function main(): Promise<void> {
  const started = Date.now();
  const env = { ...process.env, ...(await stackEnv()) };
  progress('building (npm run build)');
  await run('npm', ['run', 'build'], { cwd: REPO });
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: 4 });
  const schema = `bench_api_${randomBytes(3).toString('hex')}`;
  const costSchema = `${schema}_cost`;
  const cliEnv = (name: string) => ({ ...env, OUTBOX_WEBHOOK_SCHEMA: name, OUTBOX_WEBHOOK_ALLOW_ADDRESSES: '127.0.0.1' });
  try {
    const fill = await fillStore(pool, schema, () => run(process.execPath, [CLI, 'webhooks', 'setup'], { env: cliEnv(schema) }));
    const latency = await measureApi(cliEnv(schema));
    const cost = await measureIndexCost(pool, costSchema, () => run(process.execPath, [CLI, 'webhooks', 'setup'], { env: cliEnv(costSchema) }));
    const [{ version }] = (await pool.query<{ version: string }>("SELECT current_setting('server_version') AS version")).rows as [{ version: string }];
    const results = {
      date: new Date().toISOString().slice(0, 10),
      command: `npm run bench:webhooks-api${process.argv.slice(2).length ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      machine: `${machineDescription()}; Postgres ${version} (the local stack's, shared with other work)`,
      source: await sourceState(REPO),
      minutes: (Date.now() - started) / 60_000,
      store: { deliveries, customers, endpointsPerCustomer: perCustomer, events: Math.ceil(deliveries / perCustomer), ...fill },
      latency,
      floor: { name: "customer's latest 50 deliveries, p99 ≤ 50 ms", p99: latency[0]!.p99, pass: latency[0]!.p99 <= LISTING_FLOOR_P99_MS },
      indexCost: cost,
    };
    const outDir = join(REPO, 'bench', 'results');
    mkdirSync(outDir, { recursive: true });
    const base = `${results.date}-webhooks-api`;
    let stem = base;
    for (let n = 2; existsSync(join(outDir, `${stem}.json`)); n++) stem = `${base}-${n}`;
    writeFileSync(join(outDir, `${stem}.json`), `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(join(outDir, `${stem}.md`), report(results));
    process.stdout.write(report(results));
    progress(`wrote bench/results/${stem}.md and .json`);
  } finally {
    if (!values.keep) await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await pool.query(`DROP SCHEMA IF EXISTS ${costSchema} CASCADE`).catch(() => undefined);
    await pool.end();
  }
}

/** (1): endpoints, events and deliveries in SQL; the listing indexes built once the rows are in. */
async function fillStore(pool: pg.Pool, schema: string, setup: () => Promise<unknown>): Promise<{ readonly fillSeconds: number; readonly indexSeconds: number; readonly bytes: number }> {
  await setup();
  const events = Math.ceil(deliveries / perCustomer);
  const t0 = Date.now();
  progress(`filling ${schema}: ${int(customers * perCustomer)} endpoints, ${int(events)} events, ${int(events * perCustomer)} deliveries`);
  // Built after the rows, as they would have grown: the fill is hours shorter.
  await pool.query(`DROP INDEX ${schema}.deliveries_endpoint_idx, ${schema}.deliveries_finished_idx`);
  await pool.query(`INSERT INTO ${schema}.event_types (event_type, first_seen_at) SELECT t, now() - interval '60 days' FROM unnest(ARRAY['invoice.paid', 'invoice.voided', 'invoice.created']) t`);
  await pool.query(
    `INSERT INTO ${schema}.endpoints (id, url, event_types, secrets, customer_id, created_at)
     SELECT 'ep_' || c || '_' || k, 'http://127.0.0.1:9/bench', '{invoice.*}', jsonb_build_array(jsonb_build_object('secret', $1::text, 'expires_at', null)), 'cus_' || c, now() - interval '60 days'
     FROM generate_series(0, $2 - 1) c, generate_series(0, $3 - 1) k`,
    [generateSecret(), customers, perCustomer],
  );
  // One event a second over the last `events` seconds; event e is customer e % C's.
  for (let lo = 0; lo < events; lo += FILL_CHUNK_EVENTS) {
    const hi = Math.min(events, lo + FILL_CHUNK_EVENTS) - 1;
    await pool.query(
      `INSERT INTO ${schema}.events (event_id, event_type, aggregate_id, body, produced_at, recorded_at)
       SELECT 'evt_' || e, (ARRAY['invoice.paid', 'invoice.voided', 'invoice.created'])[1 + e % 3], 'inv_' || e,
         '{"id":"evt_' || e || '","type":"invoice.paid","data":{"invoice_id":"inv_' || e || '","amount_cents":1000,"currency":"EUR"}}',
         now() - make_interval(secs => ($3::bigint - e)::float8), now() - make_interval(secs => ($3::bigint - e)::float8)
       FROM generate_series($1::bigint, $2::bigint) e`,
      [lo, hi, events],
    );
    await pool.query(
      `INSERT INTO ${schema}.deliveries (event_id, endpoint_id, status, attempts, failures, next_attempt_at, created_at, finished_at,
         first_started_at, first_latency_ms, first_status_code, first_outcome, first_error, first_process)
       SELECT 'evt_' || e, 'ep_' || (e % $4) || '_' || k, CASE WHEN (e + k) % 50 = 0 THEN 'failed' ELSE 'delivered' END, 1, CASE WHEN (e + k) % 50 = 0 THEN 1 ELSE 0 END,
         now() - make_interval(secs => ($3::bigint - e)::float8), now() - make_interval(secs => ($3::bigint - e)::float8), now() - make_interval(secs => ($3::bigint - e)::float8 - 0.05),
         now() - make_interval(secs => ($3::bigint - e)::float8), 40, CASE WHEN (e + k) % 50 = 0 THEN 500 ELSE 204 END, CASE WHEN (e + k) % 50 = 0 THEN 'http_status' ELSE 'delivered' END,
         CASE WHEN (e + k) % 50 = 0 THEN 'HTTP 500' END, 'bench'
       FROM generate_series($1::bigint, $2::bigint) e, generate_series(0, $5 - 1) k ORDER BY e, k`,
      [lo, hi, events, customers, perCustomer],
    );
    progress(`  ${int((hi + 1) * perCustomer)} deliveries`);
  }
  const fillSeconds = (Date.now() - t0) / 1000;
  const t1 = Date.now();
  progress('building the indexes again (webhooks setup)');
  await setup();
  const indexSeconds = (Date.now() - t1) / 1000;
  await pool.query(`VACUUM (ANALYZE) ${schema}.deliveries, ${schema}.events, ${schema}.endpoints`);
  const { rows } = await pool.query<{ bytes: string }>(`SELECT sum(pg_total_relation_size(c.oid))::text AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, [schema]);
  return { fillSeconds, indexSeconds, bytes: Number(rows[0]!.bytes) };
}

/** (2): the API process on the filled store, requests one after the other. */
async function measureApi(env: NodeJS.ProcessEnv): Promise<Latency[]> {
  const child = spawn(process.execPath, [CLI, 'webhooks', 'api'], {
    env: { ...env, OUTBOX_WEBHOOK_API_PORT: '0', OUTBOX_WEBHOOK_API_TOKEN: PLATFORM_TOKEN, OUTBOX_WEBHOOK_API_SIGNING_KEY: SIGNING_KEY, OUTBOX_WEBHOOK_API_RATE_LIMIT: '1000000', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const base = await new Promise<string>((resolve, reject) => {
      let text = '';
      child.stdout.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
        const match = /"address":"([^"]+)"/.exec(text);
        if (match) resolve(match[1]!);
      });
      child.once('exit', (code) => reject(new Error(`webhooks api exited with ${code}: ${text}`)));
    });
    const call = async (method: string, path: string, token: string, body?: unknown): Promise<{ status: number; body: unknown; ms: number }> => {
      const start = performance.now();
      const response = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) }, ...(body !== undefined && { body: JSON.stringify(body) }) });
      const parsed = (await response.json()) as unknown;
      return { status: response.status, body: parsed, ms: performance.now() - start };
    };
    progress('minting customer tokens');
    const tokens: string[] = [];
    for (let i = 0; i < 200; i += 1) {
      const minted = await call('POST', '/v1/customer-tokens', PLATFORM_TOKEN, { customerId: `cus_${Math.floor(Math.random() * customers)}`, ttlSeconds: 3_600 });
      tokens.push((minted.body as { token: string }).token);
    }
    const randomToken = () => tokens[Math.floor(Math.random() * tokens.length)]!;
    const measure = async (name: string, count: number, request: () => Promise<{ status: number; body: unknown; ms: number }>, expected: number): Promise<Latency> => {
      progress(`${name}: ${int(count)} requests`);
      for (let i = 0; i < Math.min(100, count); i += 1) await request();
      const times: number[] = [];
      for (let i = 0; i < count; i += 1) {
        const answer = await request();
        if (answer.status !== expected) throw new Error(`${name}: ${answer.status} ${JSON.stringify(answer.body)}`);
        if (expected === 200 && (answer.body as { data: unknown[] }).data.length === 0 && name.includes('latest 50 deliveries')) throw new Error(`${name}: an empty page`);
        times.push(answer.ms);
      }
      times.sort((a, b) => a - b);
      return { name, requests: count, p50: percentile(times, 50), p99: percentile(times, 99), max: times.at(-1)! };
    };
    return [
      await measure("GET /v1/deliveries?limit=50, a customer's token: its latest 50 deliveries", requests, () => call('GET', '/v1/deliveries?limit=50', randomToken()), 200),
      await measure('GET /v1/deliveries?limit=50, the platform token: the latest 50', Math.ceil(requests / 4), () => call('GET', '/v1/deliveries?limit=50', PLATFORM_TOKEN), 200),
      await measure("GET /v1/deliveries?status=failed&limit=50, a customer's token", Math.ceil(requests / 4), () => call('GET', '/v1/deliveries?status=failed&limit=50', randomToken()), 200),
      await measure("GET /v1/deliveries?limit=50&cursor=…, a customer's second page", Math.ceil(requests / 4), async () => {
        const token = randomToken();
        const first = await call('GET', '/v1/deliveries?limit=50', token);
        const second = await call('GET', `/v1/deliveries?limit=50&cursor=${(first.body as { nextCursor: string }).nextCursor}`, token);
        return second;
      }, 200),
      await measure("POST /v1/endpoints, a customer's token", Math.ceil(requests / 4), () => call('POST', '/v1/endpoints', randomToken(), { url: 'http://127.0.0.1:9/created', eventTypes: ['invoice.paid'] }), 201),
    ];
  } finally {
    child.kill('SIGTERM');
  }
}

/** (3): the hot path's inserts and completions, with the API's index and without it. */
async function measureIndexCost(pool: pg.Pool, schema: string, setup: () => Promise<unknown>): Promise<IndexCost[]> {
  await setup();
  await pool.query(`INSERT INTO ${schema}.endpoints (id, url, event_types, secrets, customer_id) SELECT 'ep_' || i, 'http://127.0.0.1:9/x', '{invoice.*}', '[]', 'cus_' || i FROM generate_series(0, 99) i`);
  const client = await pool.connect();
  const wal = async () => BigInt((await client.query<{ lsn: string }>("SELECT (pg_current_wal_lsn() - '0/0')::text AS lsn")).rows[0]!.lsn);
  const results: IndexCost[] = [];
  try {
    for (let round = 0; round < COST_ROUNDS; round += 1) {
      for (const variant of ['with', 'without'] as const) {
        progress(`index cost: round ${round + 1}, ${variant} the API's index`);
        await client.query(`TRUNCATE ${schema}.deliveries, ${schema}.events, ${schema}.attempts`);
        if (variant === 'without') await client.query(`DROP INDEX IF EXISTS ${schema}.deliveries_endpoint_idx`);
        else await setup();
        await client.query(`VACUUM (ANALYZE) ${schema}.deliveries, ${schema}.events`);
        await client.query('CHECKPOINT');
        const prefix = `r${round}${variant}_`;
        let wal0 = await wal();
        let t0 = performance.now();
        for (let n = 0; n < COST_DELIVERIES; n += COST_STATEMENT_ROWS) {
          const ids = Array.from({ length: COST_STATEMENT_ROWS }, (_, i) => `${prefix}${n + i}`);
          await client.query('BEGIN');
          await client.query(
            `INSERT INTO ${schema}.events AS ev (event_id, event_type, aggregate_id, body, produced_at)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
             ON CONFLICT (event_id) DO UPDATE SET recorded_at = GREATEST(ev.recorded_at, excluded.recorded_at)`,
            [ids, ids.map((_, i) => (i % 3 === 0 ? 'invoice.paid' : 'invoice.voided')), ids, ids.map(() => '{"data":{"amount_cents":1000}}'), ids.map(() => new Date())],
          );
          await client.query(
            `INSERT INTO ${schema}.deliveries (event_id, endpoint_id, next_attempt_at)
             SELECT u.event_id, u.endpoint_id, now() FROM unnest($1::text[], $2::text[]) AS u(event_id, endpoint_id)
             ON CONFLICT (event_id, endpoint_id) DO NOTHING`,
            [ids, ids.map((_, i) => `ep_${i % 100}`)],
          );
          await client.query('COMMIT');
        }
        const insertMs = performance.now() - t0;
        const insertWal = Number((await wal()) - wal0);
        wal0 = await wal();
        t0 = performance.now();
        const { rows } = await client.query<{ id: string }>(`SELECT id::text AS id FROM ${schema}.deliveries ORDER BY id`);
        for (let i = 0; i < rows.length; i += COST_STATEMENT_ROWS) {
          await client.query(`UPDATE ${schema}.deliveries SET status = 'delivered', attempts = 1, finished_at = now(), lease_owner = NULL WHERE id = ANY($1::bigint[])`, [rows.slice(i, i + COST_STATEMENT_ROWS).map((row) => row.id)]);
        }
        const completeMs = performance.now() - t0;
        const completeWal = Number((await wal()) - wal0);
        results.push({
          variant,
          insertUsPerDelivery: (insertMs * 1000) / COST_DELIVERIES,
          insertWalBytesPerDelivery: insertWal / COST_DELIVERIES,
          completeUsPerDelivery: (completeMs * 1000) / COST_DELIVERIES,
          completeWalBytesPerDelivery: completeWal / COST_DELIVERIES,
        });
      }
    }
  } finally {
    client.release();
  }
  return results;
}


// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the results object above, rendered
function report(r: any): string {
  const latency = (r.latency as Latency[]).map((l) => `| ${l.name} | ${int(l.requests)} | ${num(l.p50, 1)} | ${num(l.p99, 1)} | ${num(l.max, 1)} |`).join('\n');
  const cost = (variant: 'with' | 'without', key: keyof Omit<IndexCost, 'variant'>) => median((r.indexCost as IndexCost[]).filter((c) => c.variant === variant).map((c) => c[key]));
  const row = (label: string, key: keyof Omit<IndexCost, 'variant'>, digits: number) => `| ${label} | ${num(cost('without', key), digits)} | ${num(cost('with', key), digits)} | ${num(cost('with', key) / cost('without', key), 2)}× |`;
  return `\`${r.command}\`

# bench:webhooks-api, ${r.date}

${r.machine}; ${num(r.minutes, 1)} min. Built from ${r.source}.

## Floor

| floor | measured | result |
| --- | --- | --- |
| ${r.floor.name}, ${int(r.store.deliveries)} deliveries in the store | p99 ${num(r.floor.p99, 1)} ms | ${r.floor.pass ? 'PASS' : 'FAIL'} |

## The store

${int(r.store.customers)} customers × ${r.store.endpointsPerCustomer} endpoints, ${int(r.store.events)} events, ${int(r.store.deliveries)} deliveries (each event one customer's, owed to its ${r.store.endpointsPerCustomer} endpoints; one event a second, the customers in turn; 1 in 50 failed, the others delivered, each with its first attempt), filled in SQL (generate_series) in ${num(r.store.fillSeconds, 0)} s, the listing indexes built after in ${num(r.store.indexSeconds, 0)} s (\`webhooks setup\`), then VACUUM (ANALYZE); ${num(r.store.bytes / 2 ** 30, 2)} GiB with indexes.

## Requests

\`node dist/cli.js webhooks api\` on that store (its pool: 10 sessions, statement_timeout 5 s), requests one after the other from this process (fetch, keep-alive), each customer request with the token of a random one of 200 customers (minted through POST /v1/customer-tokens); 100 requests of each kind before the measured ones. Milliseconds, client side.

| request | requests | p50 | p99 | max |
| --- | --- | --- | --- | --- |
${latency}

## Insert cost of the API's index on the hot path

deliveries_endpoint_idx (endpoint_id, id): ${int(COST_DELIVERIES)} deliveries (and their events) inserted in transactions of ${COST_STATEMENT_ROWS} as the intake writes them, then completed in statements of ${COST_STATEMENT_ROWS} (status, attempts, finished_at: not a HOT update, as every claim and completion), into an empty store after a CHECKPOINT, without the index and with it, alternately; median of ${COST_ROUNDS} rounds each. Per delivery:

| | without | with | with ÷ without |
| --- | --- | --- | --- |
${row('insert (event and delivery), µs', 'insertUsPerDelivery', 1)}
${row('insert, WAL bytes', 'insertWalBytesPerDelivery', 0)}
${row('completion, µs', 'completeUsPerDelivery', 1)}
${row('completion, WAL bytes', 'completeWalBytesPerDelivery', 0)}
`;
}

await main();
