import type { Logger } from 'pino';

/**
 * Logged (warn) by kafkajs's send (kafkajs/fork/producer/sendMessages.ts) for each produce
 * request that failed and will be retried; the sink counts these. Here: the debug line of a
 * failed request whose reason was already warned about, on either client.
 */
export const PRODUCE_REQUEST_FAILED = 'produce request failed; retrying its partitions';

/**
 * One warning when Kafka stops acknowledging (and one more each time the reason changes, e.g.
 * a broker unreachable, then NOT_ENOUGH_REPLICAS once it is fenced), and one when it
 * acknowledges again, with how long and how many requests failed: during an outage the log
 * shows the outage, not the retry loop. Every failed request is still counted (produce errors
 * metric) and logged at debug.
 */
export class OutageLog {
  private since: number | null = null;
  private failures = 0;
  private lastError: unknown = null;

  constructor(private readonly logger: Logger) {}

  failed(details: Record<string, unknown>): void {
    this.failures += 1;
    this.since ??= Date.now();
    if (details.error === this.lastError) {
      this.logger.debug(details, PRODUCE_REQUEST_FAILED);
      return;
    }
    this.lastError = details.error;
    this.logger.warn(details, `Kafka did not acknowledge a produce request (${String(details.error)}); retrying its partitions until it does`);
  }

  acknowledged(events: number): void {
    if (this.since === null) return;
    const outageMs = Date.now() - this.since;
    this.logger.warn({ outageMs, failedRequests: this.failures, events }, `Kafka acknowledges again after ${Math.round(outageMs / 1000)}s`);
    this.since = null;
    this.failures = 0;
    this.lastError = null;
  }
}

