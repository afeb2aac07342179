import type { Logger } from 'pino';
import type { Checkpointer } from './checkpoint/checkpointer.js';
import type { CommitTracker } from './checkpoint/commit-tracker.js';
import type { RelayError } from './errors.js';
import type { OutgoingMessage } from './kafka/record.js';
import type { RelayMetrics } from './observe/metrics.js';
import { Pipeline } from './pipeline.js';
import type { ExactlyOnceOptions, KafkaProducerOptions, RecordProducer } from './kafka/ports.js';
import type { Outbox } from './outboxes.js';
import type { PipelineOptions } from './pipeline.js';
import { openKafkaProducer } from './kafka/open.js';
import { KafkaSink, type KafkaSinkOptions } from './sink/kafka-sink.js';
import type { ResumePoint } from './sink/progress.js';
import { TopicCatalog, type TopicCatalogOptions } from './sink/topic-catalog.js';
import { RecordBuilder, type RecordBuilderOptions } from './transform/record-builder.js';
import type { OutboxRoutes } from './transform/outbox-routes.js';

/** How outbox rows become Kafka records: the same for `run` (from the WAL) and `replay` (from the table). */
export interface DeliveryOptions {
  /** Every outbox the relay streams (OUTBOX_SOURCES, or OUTBOX_TABLE alone). */
  readonly outboxes: readonly Outbox[];
  readonly builder: RecordBuilderOptions;
  readonly pipeline: PipelineOptions;
  readonly producer: Pick<KafkaProducerOptions, 'client' | 'brokers' | 'clientId' | 'fastEncoder' | 'compression' | 'maxMessageBytes' | 'autoCreateTopics' | 'security'>;
  readonly sink: Pick<KafkaSinkOptions, 'batchMaxEvents' | 'batchMaxBytes' | 'lingerMs'>;
  readonly topics: Omit<TopicCatalogOptions, 'logger'>;
  /** OUTBOX_DELIVERY=exactly-once; null: at-least-once. */
  readonly exactlyOnce: { readonly transactionalId: string; readonly transactionTimeoutMs: number } | null;
}

/** What the chain is made of, besides the options: the stages a caller keeps across sessions, and where acknowledgements go. */
export interface DeliveryChainParts {
  readonly delivery: DeliveryOptions;
  /** The outboxes' routes, kept across sessions (each router caches the topics it built). */
  readonly routes: OutboxRoutes;
  readonly metrics: RelayMetrics;
  /** The transactional producer's settings (run: with its progress record; replay, recover: without); null: at-least-once. */
  readonly exactlyOnce: ExactlyOnceOptions | null;
  readonly tracker: CommitTracker;
  readonly checkpointer: Checkpointer;
  /** The sink's and producer's log (stage sink), and the pipeline's (stage pipeline, or the command's). */
  readonly sinkLogger: Logger;
  readonly pipelineLogger: Logger;
  /** Each batch Kafka acknowledged, after the checkpointer and the topic catalogue had it. */
  readonly onAcknowledged?: (batch: readonly OutgoingMessage[]) => void;
  readonly onFailure?: (error: RelayError) => void;
  /** Tests: a producer other than the one OUTBOX_KAFKA_CLIENT names. */
  readonly openProducer?: (options: KafkaProducerOptions) => RecordProducer;
}

/**
 * Row or message -> record -> Kafka, the one way every command publishes (`run` from the WAL; `replay`,
 * `recover` and `cutover` from the table): producer on the chosen client, topic catalogue,
 * sink, record builder, pipeline. Acknowledged batches reach the checkpointer first, so that
 * nothing is confirmed before Kafka has it.
 */
export class DeliveryChain {
  readonly producer: RecordProducer;
  readonly topics: TopicCatalog;
  readonly sink: KafkaSink;
  private readonly builder: RecordBuilder;

  constructor(private readonly parts: DeliveryChainParts) {
    const { delivery, sinkLogger, metrics, checkpointer } = parts;
    const openProducer = parts.openProducer ?? openKafkaProducer;
    this.producer = openProducer({ ...delivery.producer, exactlyOnce: parts.exactlyOnce, logger: sinkLogger, onRequestFailed: (error) => metrics.produceErrors.inc({ error }) });
    const topics = new TopicCatalog(this.producer, { ...delivery.topics, logger: sinkLogger });
    this.topics = topics;
    this.sink = new KafkaSink({
      ...delivery.sink,
      producer: this.producer,
      logger: sinkLogger,
      onAcknowledged: (batch) => {
        checkpointer.acknowledged(batch);
        topics.acknowledged(batch);
        parts.onAcknowledged?.(batch);
      },
      ...(parts.onFailure && { onFailure: parts.onFailure }),
    });
    this.builder = new RecordBuilder(delivery.builder, { topics, metrics, logger: parts.pipelineLogger });
  }

  /** Connects the producer (exactly-once: fencing every earlier one). */
  async start(): Promise<void> {
    await this.sink.start();
  }

  /** The pipeline feeding the sink; exactly-once, `resumeAfter` is where Kafka's committed progress says to go on from. */
  pipeline(resumeAfter: ResumePoint | null = null): Pipeline {
    const { delivery, checkpointer, tracker, pipelineLogger, routes } = this.parts;
    return new Pipeline(delivery.pipeline, { checkpointer, tracker, routes, builder: this.builder, sink: this.sink, logger: pipelineLogger, resumeAfter });
  }

  async stop(): Promise<void> {
    await this.sink.stop();
  }
}
