import type { Logger } from 'pino';
import { errorMessage } from '../errors.js';
import { sleep } from '../time.js';
import type { DeliveryQueries } from './delivery-queries.js';
import { showStoreGauges, type WebhookMetrics } from './metrics.js';

export interface HousekeepingOptions {
  readonly queries: DeliveryQueries;
  readonly metrics: WebhookMetrics;
  readonly logger: Logger;
  readonly clock: () => Date;
  readonly circuitFailures: number;
  readonly retentionMs: number;
  readonly gaugesEveryMs?: number;
  readonly pruneEveryMs?: number;
}

/**
 * The store's gauges, read every few seconds, and its pruning (delivered deliveries past the
 * retention), every minute: the store stays the size of what is owed plus the retention.
 */
export function startHousekeeping(options: HousekeepingOptions, signal: AbortSignal): Promise<void> {
  const { queries, metrics, logger, clock } = options;
  const gauges = repeat(options.gaugesEveryMs ?? 5_000, signal, async () => {
    const now = clock();
    showStoreGauges(metrics, await queries.gauges(now, options.circuitFailures), now);
  }, (error) => logger.warn({ err: errorMessage(error) }, 'webhooks: reading the store gauges failed'));
  const prune = repeat(options.pruneEveryMs ?? 60_000, signal, async () => {
    const pruned = await queries.prune(new Date(clock().getTime() - options.retentionMs));
    if (pruned.deliveries > 0 || pruned.events > 0) logger.info(pruned, 'webhooks: pruned delivered deliveries past the retention');
  }, (error) => logger.warn({ err: errorMessage(error) }, 'webhooks: pruning failed; trying again next time'));
  return Promise.all([gauges, prune]).then(() => undefined);
}

async function repeat(everyMs: number, signal: AbortSignal, work: () => Promise<void>, onError: (error: unknown) => void): Promise<void> {
  while (!signal.aborted) {
    await work().catch(onError);
    await sleep(everyMs, signal);
  }
}
