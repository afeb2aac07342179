import type { Logger } from 'pino';
import { Checkpointer } from './checkpoint/checkpointer.js';
import { CommitTracker } from './checkpoint/commit-tracker.js';
import type { PayloadEncoders } from './encode/create-encoder.js';
import { errorMessage, RelayError } from './errors.js';
import type { OutgoingMessage } from './kafka/record.js';
import { formatLsn } from './lsn.js';
import { initReasons, setState, type RelayMetrics } from './observe/metrics.js';
import { ProgressWatch } from './observe/progress.js';
import { RelayLifecycle, type RelayState } from './relay-state.js';
import { DeliveryChain, type DeliveryOptions } from './delivery-chain.js';
import type { KafkaProducerOptions, ProgressRecordOptions, RecordProducer } from './kafka/ports.js';
import type { KafkaSink } from './sink/kafka-sink.js';
import { OutboxRoutes } from './transform/outbox-routes.js';
import { sessionFailure } from './session-failure.js';
import { ReplicationStream, type ReplicationStreamOptions } from './source/replication-stream.js';
import type { SourceOrigin, SourceStream } from './source/source.js';
import { TimelineGate } from './source/timeline-gate.js';
import { checkTimeline, parseProgress, progressKey, progressValue, type ResumePoint } from './sink/progress.js';
import { finishesWithin, sleep } from './time.js';

export interface RelayOptions {
  readonly source: Omit<ReplicationStreamOptions, 'logger' | 'highWaterMessages'>;
  readonly delivery: DeliveryOptions;
  /** Exactly-once: where each transaction records the last event it holds. */
  readonly progressTopic: string;
  /** How often the confirmed position goes to Postgres, and progress to the metrics. */
  readonly statusIntervalMs: number;
  readonly shutdownTimeoutMs: number;
  readonly stallTimeoutMs: number;
  readonly reconnectMinMs: number;
  readonly reconnectMaxMs: number;
  readonly standbyPollMs: number;
}

export interface RelayDependencies {
  readonly options: RelayOptions;
  readonly logger: Logger;
  readonly metrics: RelayMetrics;
  readonly encoders: PayloadEncoders;
  /** Tables found quarantined at start (setup's checks), by qualified name with the reason: lifted when the stream finds them fixed. */
  readonly quarantined?: ReadonlyMap<string, string>;
  /** Opens a replication session (default: on Postgres). */
  readonly openSource?: (options: ReplicationStreamOptions) => SourceStream;
  /** Makes a session's producer (default: kafkajs). */
  readonly openProducer?: (options: KafkaProducerOptions) => RecordProducer;
}

type SessionOutcome = 'drained' | 'drain-timed-out' | 'standby';

const PROGRESS_LOG_INTERVAL_MS = 60_000;

/** Messages the source may buffer before pausing the socket: about one batch. */
const SOURCE_HIGH_WATER_MESSAGES = 2_000;

/**
 * Runs replication sessions until stopped. A session is one replication connection plus one
 * Kafka producer; any failure ends the whole session and the next one resumes from the slot's
 * confirmed position, so a failure can cause duplicates after that position but never a gap.
 */
export class Relay {
  private readonly lifecycle: RelayLifecycle;
  private readonly progress = new ProgressWatch();
  /** Events (dead letters included) Kafka acknowledged since the relay started. */
  private publishedEvents = 0;
  private readonly routes: OutboxRoutes;

  constructor(private readonly deps: RelayDependencies) {
    const { delivery } = deps.options;
    this.routes = new OutboxRoutes(delivery.outboxes, deps.encoders, (table, reason) => {
      deps.metrics.quarantinedTables.set({ table }, reason === null ? 0 : 1);
      if (reason === null) deps.logger.info({ table }, 'outbox table publishable again: its rows flow from here on (replay what was dead-lettered meanwhile)');
      else deps.logger.error({ table, reason }, 'outbox table quarantined: its rows go to the dead-letter topic; every other outbox streams on');
    }, deps.quarantined);
    this.lifecycle = new RelayLifecycle((state) => setState(deps.metrics, state));
    initReasons(deps.metrics);
  }

  get state(): RelayState {
    return this.lifecycle.state;
  }

  /**
   * For the liveness probe: false with the reason when the relay is alive but cannot make
   * progress, so that it is restarted (a standby, or a relay shutting down, is live).
   */
  liveness(): readonly [boolean, string] {
    const { options } = this.deps;
    const stalledMs = this.progress.stalledMs();
    if (stalledMs > options.stallTimeoutMs) return [false, `no progress for ${Math.round(stalledMs / 1000)}s: events wait and no position was confirmed (OUTBOX_STALL_TIMEOUT ${options.stallTimeoutMs}ms)`];
    const silentMs = this.progress.sourceSilentMs();
    if (silentMs > options.source.silenceTimeoutMs) return [false, `nothing from Postgres for ${Math.round(silentMs / 1000)}s (OUTBOX_REPLICATION_TIMEOUT ${options.source.silenceTimeoutMs}ms)`];
    return [true, this.lifecycle.state];
  }

  /** Resolves when stopped through `signal` (true if everything in flight was confirmed). */
  async run(signal: AbortSignal): Promise<boolean> {
    const { options, metrics } = this.deps;
    const livenessTimer = setInterval(() => {
      metrics.stalledSeconds.set(this.progress.stalledMs() / 1000);
      metrics.sourceSilentSeconds.set(this.progress.sourceSilentMs() / 1000);
    }, options.statusIntervalMs);
    try {
      return await this.runSessions(signal);
    } finally {
      clearInterval(livenessTimer);
    }
  }

  private async runSessions(signal: AbortSignal): Promise<boolean> {
    const { options, logger, metrics } = this.deps;
    let delay = options.reconnectMinMs;
    while (!signal.aborted) {
      try {
        const outcome = await this.session(signal);
        if (outcome !== 'standby') {
          this.lifecycle.transition('stopped');
          return outcome === 'drained';
        }
        await sleep(options.standbyPollMs, signal);
      } catch (thrown) {
        // A refused login, an untrusted certificate or a bug (INTERNAL) stops; a connection that
        // went away resumes from the confirmed position (session-failure.ts).
        const error = sessionFailure(thrown);
        if (!error.retriable) {
          this.lifecycle.transition('stopped');
          throw error;
        }
        if (signal.aborted) {
          // A session that never streamed had nothing in flight: nothing to send again.
          const streamed = this.lifecycle.state === 'active' || this.lifecycle.state === 'draining';
          if (streamed) logger.error({ code: error.code, err: errorMessage(error) }, 'stopped while draining; unconfirmed events will be sent again by the next run');
          else logger.info({ code: error.code, err: errorMessage(error) }, 'stopped before streaming; nothing was in flight');
          this.lifecycle.transition('stopped');
          return !streamed;
        }
        metrics.reconnects.inc({ reason: error.code });
        logger.warn({ code: error.code, err: errorMessage(error), retryInMs: delay }, 'stream interrupted; resuming from the confirmed position');
        this.lifecycle.transition('starting');
        await sleep(delay, signal);
        delay = Math.min(delay * 2, options.reconnectMaxMs);
        continue;
      }
      delay = options.reconnectMinMs;
    }
    this.lifecycle.transition('stopped');
    return true;
  }

  private async session(signal: AbortSignal): Promise<SessionOutcome> {
    const { options, logger, metrics, encoders } = this.deps;
    const { delivery } = options;
    const openSource = this.deps.openSource ?? ((sourceOptions) => new ReplicationStream(sourceOptions));
    const stream = openSource({ ...options.source, highWaterMessages: SOURCE_HIGH_WATER_MESSAGES, logger });
    let chain: DeliveryChain | null = null;
    let checkpointer: Checkpointer | null = null;
    let metricsTimer: NodeJS.Timeout | undefined;
    let progressLogTimer: NodeJS.Timeout | undefined;
    let closed = false;
    const stopReading = () => stream.stopReading();
    try {
      let start;
      try {
        start = await stream.start();
      } catch (error) {
        if (error instanceof RelayError && error.code === 'SOURCE_SLOT_BUSY') {
          if (this.lifecycle.state !== 'standby') logger.info({ slot: options.source.slot }, 'standby: the slot is read by another instance; taking over when it is free');
          this.lifecycle.transition('standby');
          this.progress.idle();
          return 'standby';
        }
        throw error;
      }
      const { confirmed: startLsn, origin } = start;
      const tracker = new CommitTracker(startLsn);
      const sessionCheckpointer = new Checkpointer(tracker, stream, options.statusIntervalMs);
      checkpointer = sessionCheckpointer;
      const sinkLogger = logger.child({ stage: 'sink' });
      const exactlyOnce = delivery.exactlyOnce && {
        transactionalId: delivery.exactlyOnce.transactionalId,
        transactionTimeoutMs: delivery.exactlyOnce.transactionTimeoutMs,
        progress: progressRecord(options.progressTopic, options.source.slot, origin),
      };
      const pipelineLogger = logger.child({ stage: 'pipeline' });
      const sessionChain = new DeliveryChain({
        delivery,
        routes: this.routes,
        metrics,
        exactlyOnce,
        tracker,
        checkpointer: sessionCheckpointer,
        sinkLogger,
        pipelineLogger,
        onAcknowledged: (batch) => this.countPublished(batch),
        onFailure: (error) => stream.abort(error),
        ...(this.deps.openProducer && { openProducer: this.deps.openProducer }),
      });
      chain = sessionChain;
      const { sink } = sessionChain;
      await sessionChain.start();
      const resumeAfter = exactlyOnce ? await this.resumePoint(sessionChain.producer, exactlyOnce.progress.key, origin) : null;
      const pipeline = sessionChain.pipeline(resumeAfter);
      // Exactly-once on a standby: nothing of a timeline the session did not start on is published under its timeline.
      const gate = exactlyOnce && start.onStandby && stream.readTimeline ? new TimelineGate(origin.timeline, () => stream.readTimeline!()) : null;
      this.lifecycle.transition('active');
      logger.info({ slot: options.source.slot, from: formatLsn(startLsn), formats: encoders.formats, server: start.onStandby ? 'standby' : 'primary' }, 'active: streaming from the slot');
      sessionCheckpointer.start();
      metricsTimer = setInterval(() => this.reportProgress(stream, sessionCheckpointer, sink), options.statusIntervalMs);
      progressLogTimer = this.logProgressEvery(PROGRESS_LOG_INTERVAL_MS, sessionCheckpointer, sink);
      signal.addEventListener('abort', stopReading, { once: true });
      if (signal.aborted) stream.stopReading();

      while (!stream.stopped) {
        const message = stream.take();
        if (message === undefined) {
          await stream.wait();
          continue;
        }
        if (gate) await gate.admit(message);
        const pending = pipeline.handle(message);
        if (pending) await pending;
      }

      this.lifecycle.transition('draining');
      const drained = await finishesWithin(sink.drain(), options.shutdownTimeoutMs);
      const fields = { confirmed: formatLsn(sessionCheckpointer.confirmed), unacknowledged: sink.buffered };
      // The last status update reached Postgres only if the connection closed cleanly after it.
      closed = true;
      sessionCheckpointer.close();
      const confirmedToPostgres = await stream.close();
      if (!drained) logger.error(fields, `drain timed out after ${options.shutdownTimeoutMs}ms; unconfirmed events will be sent again by the next run`);
      else if (!confirmedToPostgres) logger.error(fields, 'drained, but Postgres did not answer the close: the last confirmed position may not have reached it, and the next run may send those events again');
      else logger.info(fields, 'drained: everything acknowledged is confirmed');
      return drained && confirmedToPostgres ? 'drained' : 'drain-timed-out';
    } finally {
      clearInterval(metricsTimer);
      clearInterval(progressLogTimer);
      signal.removeEventListener('abort', stopReading);
      if (!closed) {
        // Whatever ended the session, what Kafka acknowledged is confirmed before closing.
        checkpointer?.close();
        await stream.close();
      }
      await chain?.stop();
    }
  }

  /**
   * Exactly-once: the last event Kafka's committed transactions hold for this slot and server.
   * Read after the producer fenced every earlier one: nothing of theirs can commit later.
   */
  private async resumePoint(producer: RecordProducer, key: string, origin: SourceOrigin): Promise<ResumePoint | null> {
    const { logger } = this.deps;
    const value = await producer.readProgress!();
    if (value === undefined || value === null) {
      logger.info({ progressKey: key }, 'exactly-once: Kafka holds no progress for this slot; publishing from the confirmed position');
      return null;
    }
    const resume = parseProgress(value, key);
    checkTimeline(resume, origin, key);
    logger.info({ progressKey: key, commitLsn: formatLsn(resume.commitLsn), position: resume.position }, 'exactly-once: events up to this point are in Kafka; the stream skips them');
    return resume;
  }

  /** One info line a minute while streaming: an operator reading the log sees it flow (or not). */
  private logProgressEvery(intervalMs: number, checkpointer: Checkpointer, sink: KafkaSink): NodeJS.Timeout {
    let publishedBefore = this.publishedEvents;
    return setInterval(() => {
      const published = this.publishedEvents - publishedBefore;
      publishedBefore = this.publishedEvents;
      const oldest = checkpointer.oldestUnconfirmedCommitTime;
      this.deps.logger.info({
        eventsPerSecond: Math.round(published / (intervalMs / 1000)),
        published,
        unacknowledged: sink.buffered,
        lagSeconds: oldest ? Math.max(0, Math.round((Date.now() - oldest.getTime()) / 1000)) : 0,
        confirmed: formatLsn(checkpointer.confirmed),
      }, 'streaming');
    }, intervalMs);
  }

  /** Counts what Kafka acknowledged, for the metrics. */
  private countPublished(batch: readonly OutgoingMessage[]): void {
    const { metrics } = this.deps;
    const now = Date.now();
    this.publishedEvents += batch.length;
    // Series (topic, event type, outbox) -> events, added up by runs of one series (a batch holds
    // a few long ones): looking each event up cost 4% of the relay's CPU. One increment per series.
    const series = new Map<string, { readonly labels: { topic: string; event_type: string; outbox: string }; count: number }>();
    const addRun = ({ topic, label, outbox }: OutgoingMessage, count: number) => {
      const key = `${topic}\n${label}\n${outbox}`;
      const seen = series.get(key);
      if (seen) seen.count += count;
      else series.set(key, { labels: { topic, event_type: label, outbox }, count });
    };
    let bytes = 0;
    let first: OutgoingMessage | null = null;
    let run = 0;
    for (const message of batch) {
      bytes += message.size;
      metrics.commitToAck.observe((now - message.transaction.commitTime.getTime()) / 1000);
      if (message.deadLetter) continue;
      if (first && message.topic === first.topic && message.label === first.label && message.outbox === first.outbox) {
        run += 1;
        continue;
      }
      if (first) addRun(first, run);
      first = message;
      run = 1;
    }
    if (first) addRun(first, run);
    for (const { labels, count } of series.values()) metrics.published.inc(labels, count);
    metrics.bytesOut.inc(bytes);
    metrics.produceRequests.inc();
  }

  private reportProgress(stream: SourceStream, checkpointer: Checkpointer, sink: KafkaSink | null): void {
    const { metrics } = this.deps;
    const oldest = checkpointer.oldestUnconfirmedCommitTime;
    this.progress.observe(checkpointer.confirmed, this.publishedEvents, oldest !== null, stream.silentForMs);
    metrics.confirmedLsn.set(Number(checkpointer.confirmed));
    metrics.inFlight.set(sink?.buffered ?? 0);
    metrics.lagSeconds.set(oldest ? Math.max(0, (Date.now() - oldest.getTime()) / 1000) : 0);
  }
}

/** The progress record of this slot on this server, written in every exactly-once transaction. */
function progressRecord(topic: string, slot: string, origin: SourceOrigin): ProgressRecordOptions {
  return { topic, key: progressKey(slot, origin), value: (batch) => progressValue(batch, slot, origin) };
}
