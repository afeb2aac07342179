import { kafkaFailure } from './failure.js';
import type { KafkaProducerOptions, TopicInspector } from './ports.js';

/** What a client does to connect its producer, and (exactly-once) to fence the earlier ones. */
export interface ProducerConnection {
  connect(): Promise<void>;
  /**
   * Exactly-once: InitProducerId for the transactional id. It fences every earlier producer of
   * the id and aborts the transaction one left open, so nothing of theirs can commit after this,
   * and their open transaction no longer holds back read_committed readers.
   */
  fence(): Promise<void>;
}

/**
 * A producer's connect, on either client: the exactly-once progress topic made ready (created if
 * missing, and checked), the client connected, then, exactly-once, fenced. Any failure is the
 * relay's error, naming the brokers (kafkaFailure).
 */
export async function connectProducer(options: Pick<KafkaProducerOptions, 'brokers' | 'exactlyOnce'>, topics: Pick<TopicInspector, 'prepareProgressTopic'>, client: ProducerConnection): Promise<void> {
  const { exactlyOnce } = options;
  try {
    if (exactlyOnce?.progress) await topics.prepareProgressTopic(exactlyOnce.progress.topic);
    await client.connect();
    if (exactlyOnce) await client.fence();
  } catch (error) {
    throw kafkaFailure(error, `cannot connect to Kafka at ${options.brokers.join(',')}`, exactlyOnce);
  }
}
