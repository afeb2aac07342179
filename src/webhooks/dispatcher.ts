import type { Logger } from 'pino';
import { errorMessage } from '../errors.js';
import { sleep } from '../time.js';
import type { ClaimedDelivery, Completion, DeliveryStore, EndpointRules } from './delivery-store.js';
import { signingSecrets } from './endpoint-store.js';
import type { AttemptResult, WebhookRequest } from './http-sender.js';
import type { WebhookMetrics } from './metrics.js';
import { judgeAttempt, type RetryPolicy } from './retry-policy.js';
import { webhookHeaders } from './signature.js';

/** The HTTP port: the real one is WebhookSender (undici). */
export interface AttemptSender {
  send(request: WebhookRequest): Promise<AttemptResult>;
}

export interface DispatcherOptions {
  readonly store: DeliveryStore;
  readonly sender: AttemptSender;
  readonly policy: RetryPolicy;
  readonly rules: EndpointRules;
  /** Attempts in flight in this process, over every endpoint. */
  readonly concurrency: number;
  /** A delivery claimed and not completed within this is handed out again (the process died or hangs). */
  readonly leaseMs: number;
  /** How often to look for due deliveries when nothing woke the dispatcher. */
  readonly pollMs: number;
  /** This process, in leases and in each attempt's record. */
  readonly owner: string;
  readonly clock: () => Date;
  readonly random?: () => number;
  readonly logger: Logger;
  readonly metrics: WebhookMetrics;
}

/** A failing store (Postgres restarting) is retried this often, never faster. */
const STORE_RETRY_MS = 1_000;

/**
 * Sends due deliveries: claims as many as it has free slots for (the store decides which, per
 * endpoint limits), sends each, and records results in batches — one transaction for every
 * completion that ended while the previous one was being written.
 */
export class Dispatcher {
  /** Claimed and not yet recorded. */
  private inFlight = 0;
  /** Of those, the ones whose request has not ended. */
  private sending = 0;
  private stopped = false;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private completions: Completion[] = [];
  private flushing: Promise<void> | null = null;
  private loop: Promise<void> | null = null;
  /** When the loop last went round: /healthz fails when it stops turning. */
  lastTurn = Date.now();

  constructor(private readonly options: DispatcherOptions) {}

  start(): void {
    this.loop = this.run();
  }

  /** New deliveries were recorded, or capacity freed: look now rather than at the next poll. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Stops claiming; waits up to `timeoutMs` for the attempts in flight and records them. */
  async stop(timeoutMs: number): Promise<{ readonly unfinished: number }> {
    this.stopped = true;
    this.wake();
    await this.loop;
    const deadline = Date.now() + timeoutMs;
    while (this.sending > 0 && Date.now() < deadline) await sleep(20);
    await this.flush();
    // Unfinished attempts keep their lease: another process sends them once it runs out.
    return { unfinished: this.sending };
  }

  get busy(): number {
    return this.inFlight;
  }

  /**
   * Up to `wanted` of the free slots, held for deliveries the consumer records leased to this
   * process (the loop claims none of them meanwhile).
   */
  reserve(wanted: number): { readonly slots: number; readonly owner: string; readonly now: Date; readonly leaseMs: number } {
    const slots = this.stopped ? 0 : Math.max(0, Math.min(wanted, this.options.concurrency - this.inFlight));
    this.inFlight += slots;
    return { slots, owner: this.options.owner, now: this.options.clock(), leaseMs: this.options.leaseMs };
  }

  /** Sends what was recorded leased to this process, at once; gives back the slots not used. */
  accept(leased: readonly ClaimedDelivery[], unused: number): void {
    this.release(unused);
    for (const delivery of leased) {
      this.sending += 1;
      void this.attempt(delivery);
    }
  }

  release(slots: number): void {
    this.inFlight -= slots;
    if (slots > 0) this.wake();
  }

  private async run(): Promise<void> {
    const { options } = this;
    const { store } = options;
    while (!this.stopped) {
      this.lastTurn = Date.now();
      const free = options.concurrency - this.inFlight;
      if (free > 0) {
        let claimed: ClaimedDelivery[];
        try {
          claimed = await store.claim(options.owner, options.clock(), free, options.leaseMs, options.rules);
        } catch (error) {
          options.logger.error({ err: errorMessage(error) }, 'webhooks: claiming due deliveries failed; trying again');
          await sleep(STORE_RETRY_MS);
          continue;
        }
        for (const delivery of claimed) {
          this.inFlight += 1;
          this.sending += 1;
          void this.attempt(delivery);
        }
        // Every free slot filled: more may be due; the next turn waits for a slot to free.
        if (claimed.length === free) continue;
      }
      await this.idle(options.pollMs);
    }
  }

  /**
   * Until wake() or `ms`. A wake-up that came while this process had no free slot is not kept:
   * only a completion can make room then, and it wakes the loop itself. (A kept one would turn
   * the loop without waiting, on resolved promises only, and starve the very I/O that frees a slot.)
   */
  private idle(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const woken = this.woken && this.inFlight < this.options.concurrency;
    this.woken = false;
    if (woken) return new Promise((resolve) => setImmediate(resolve));
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
      function done() {
        clearTimeout(timer);
        resolve();
      }
    }).then(() => {
      this.wakeUp = null;
    });
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const { options } = this;
    const startedAt = options.clock();
    if (delivery.attempt === 1) options.metrics.firstAttemptDelay.observe(Math.max(0, startedAt.getTime() - delivery.producedAt.getTime()) / 1000);
    const headers = {
      ...delivery.headers,
      ...webhookHeaders({ secrets: signingSecrets(delivery.secrets, startedAt), webhookId: delivery.eventId, timestampSeconds: Math.floor(startedAt.getTime() / 1000), body: delivery.body }),
    };
    const result = await options.sender.send({ url: delivery.url, headers, body: delivery.body }).catch(
      (error: unknown): AttemptResult => ({ outcome: 'network', statusCode: null, latencyMs: 0, retryAfterMs: null, response: null, error: `the sender failed: ${errorMessage(error)}` }),
    );
    const verdict = judgeAttempt(options.policy, delivery.failures, result, options.clock(), options.random);
    options.metrics.attempts.inc({ outcome: result.outcome });
    options.metrics.attemptSeconds.observe({ outcome: result.outcome }, result.latencyMs / 1000);
    const where = { delivery: delivery.id, endpoint: delivery.endpointId, eventId: delivery.eventId, attempt: delivery.attempt };
    if (verdict.delivery.status === 'failed') {
      options.metrics.deliveries.inc({ outcome: 'failed' });
      options.logger.error({ ...where, outcome: result.outcome, status: result.statusCode, err: result.error }, 'webhooks: delivery failed, every attempt of the schedule used; `webhooks replay --delivery` sends it again');
    } else if (verdict.delivery.status === 'delivered') {
      options.metrics.deliveries.inc({ outcome: 'delivered' });
      options.logger.debug({ ...where, status: result.statusCode, latencyMs: result.latencyMs }, 'webhooks: delivered');
    } else {
      options.logger.debug({ ...where, outcome: result.outcome, status: result.statusCode, err: result.error, next: verdict.delivery.nextAttemptAt }, 'webhooks: attempt failed; retrying');
    }
    this.sending -= 1;
    this.completions.push({ delivery, startedAt, result, verdict });
    void this.flush();
  }

  /** Writes every completion queued; one write at a time, the next takes what queued meanwhile. */
  private flush(): Promise<void> {
    this.flushing ??= (async () => {
      try {
        while (this.completions.length > 0) {
          const batch = this.completions;
          this.completions = [];
          try {
            const changes = await this.options.store.complete(this.options.owner, this.options.clock(), batch, this.options.rules);
            this.report(changes);
            this.inFlight -= batch.length;
            this.wake();
          } catch (error) {
            // Kept, and written again: until then their leases stand, and nothing is sent twice
            // unless the outage outlasts them.
            this.completions = [...batch, ...this.completions];
            this.options.logger.error({ err: errorMessage(error), completions: batch.length }, 'webhooks: recording attempts failed; trying again');
            // Stopping: not written; their leases run out and another process sends them again.
            if (this.stopped) break;
            await sleep(STORE_RETRY_MS);
          }
        }
      } finally {
        this.flushing = null;
      }
    })();
    return this.flushing;
  }

  private report(changes: Awaited<ReturnType<DeliveryStore['complete']>>): void {
    const { logger, metrics } = this.options;
    for (const change of changes) {
      if (change.disabledReason !== null) {
        const reason = change.disabledReason.startsWith('answered 410') ? 'gone' : 'failing';
        metrics.endpointsDisabled.inc({ reason });
        logger.error({ endpoint: change.endpointId, reason: change.disabledReason }, 'webhooks: endpoint disabled; its deliveries are held until `webhooks endpoint enable`');
      }
      if (change.circuitOpened) {
        metrics.circuitsOpened.inc();
        logger.warn({ endpoint: change.endpointId, failures: this.options.rules.circuitFailures, cooldownMs: this.options.rules.circuitCooldownMs }, 'webhooks: circuit opened: nothing is sent to this endpoint until a probe succeeds');
      }
    }
  }
}
