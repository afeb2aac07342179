/**
 * Offered load, shared by the steady runs and the soak: a contender running against a fresh
 * outbox, a consumer matching each record to the moment its COMMIT returned, and a generator
 * committing single-row transactions at a fixed rate.
 */
import { idHeader, label, slot, startContender, type ContenderName, type Services } from './contenders.js';
import { AGGREGATE_TYPE, CDC_TABLE, type Database, EVENT_TYPE, POLLING_TABLE } from './db.js';
import { type KafkaTools, LatencyConsumer } from './kafka.js';
import { type Child, progress, sleep } from './proc.js';

/** Every topic the bench makes starts with this. */
export const TOPIC_ROOT = 'bench.';

let runCounter = 0;
export function topicPrefix(contender: ContenderName): string {
  runCounter += 1;
  return `${TOPIC_ROOT}${Date.now().toString(36)}${runCounter}.${contender}`;
}

/** One event of ~300 B, as an application's INSERT (its own id, one of 1,000 aggregates). */
function insertSql(table: string): string {
  return `INSERT INTO ${table} (event_id, aggregate_type, aggregate_id, event_type, payload)
    SELECT $1, '${AGGREGATE_TYPE}', $2, '${EVENT_TYPE}', p.payload || jsonb_build_object('invoice_id', $1::text)
      FROM bench_payloads p WHERE p.size = 300 AND p.k = $3`;
}

/** A contender under offered load: its process, its topic and the consumer timing it. */
export class LoadRig {
  readonly commitTimes = new Map<string, number>();
  /** When each COMMIT of `offer` returned, in the order they did. */
  private readonly commits: number[] = [];
  readonly consumer: LatencyConsumer;
  readonly table: string;
  readonly topic: string;
  private readonly prefix: string;
  private readonly insert: string;
  child: Child | null = null;
  /** Set by stop(): an offer still running (the soak failed early) issues nothing more. */
  private stopped = false;

  constructor(
    private readonly db: Database,
    readonly kafka: KafkaTools,
    readonly contender: ContenderName,
  ) {
    this.table = contender === 'polling' ? POLLING_TABLE : CDC_TABLE;
    this.prefix = topicPrefix(contender);
    this.topic = `${this.prefix}.${AGGREGATE_TYPE}`;
    this.insert = insertSql(this.table);
    this.consumer = new LatencyConsumer(kafka.kafka, this.topic, idHeader(contender), this.commitTimes);
  }

  /**
   * A fresh outbox (and slot), the topic, the consumer and the contender; returns once a
   * warm-up event reached the topic (Debezium needs its JVM and task up) plus 2 s.
   */
  async start(services: Services, title: string): Promise<Child> {
    await this.db.reset();
    if (this.contender === 'polling') await this.db.freshPollingOutbox();
    else await this.db.freshCdcOutbox(slot(this.contender));
    await this.db.query(`CALL bench_load($1, 'warm', 1, 0, 1, 300)`, [this.table]);
    await this.kafka.createTopic(this.topic);
    const child = startContender(this.contender, services, this.prefix);
    this.child = child;
    await this.consumer.start();
    progress(`${title}: ${label(this.contender)} starting`);
    await this.db.query(this.insert, ['warm-1', 'acct-0', 0]);
    await this.kafka.waitForRecords(this.topic, 1, { timeoutMs: 120_000, stallMs: 120_000, alive: () => child.running, onProgress: () => undefined });
    await sleep(2_000);
    return child;
  }

  /**
   * Commits `rate` single-row transactions per second for `seconds` (at most 64 in flight over
   * the pool), each timed when its COMMIT returned. If the database falls behind, all of them
   * are issued nevertheless (taking longer), or with `timeBound` no more after `seconds`.
   * Returns the seconds it took and the transactions committed.
   */
  async offer(rate: number, seconds: number, { idPrefix = 's', timeBound = false } = {}): Promise<{ seconds: number; events: number }> {
    const total = Math.round(rate * seconds);
    const start = Date.now();
    const deadline = timeBound ? start + seconds * 1000 : Infinity;
    let issued = 0;
    let inFlight = 0;
    let failure: unknown = null;
    while (issued < total && failure === null && Date.now() < deadline && !this.stopped) {
      const due = Math.min(total, Math.floor(((Date.now() - start) / 1000) * rate));
      while (issued < due && inFlight < 64) {
        const i = issued++;
        const id = `${idPrefix}-${i}`;
        inFlight += 1;
        this.db.pool.query(this.insert, [id, `acct-${i % 1000}`, i % 1000]).then(
          () => {
            const at = Date.now();
            this.commitTimes.set(id, at);
            this.commits.push(at);
            this.consumer.committed(id, at);
            inFlight -= 1;
          },
          (error: unknown) => {
            failure = error;
            inFlight -= 1;
          },
        );
      }
      await sleep(2);
    }
    while (inFlight > 0) await sleep(2);
    if (failure !== null) throw failure;
    return { seconds: (Date.now() - start) / 1000, events: issued };
  }

  /** Commits that returned in [from, to). */
  committedBetween(from: number, to: number): number {
    let count = 0;
    for (const at of this.commits) if (at >= from && at < to) count += 1;
    return count;
  }

  /** Waits up to `ms` until `count` records were matched. */
  async matched(count: number, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (this.consumer.latencies.length < count && Date.now() < deadline) await sleep(100);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.consumer.stop().catch(() => undefined);
    await this.child?.stop();
    await this.kafka.deleteTopics(this.prefix);
  }
}
