import { Worker } from 'node:worker_threads';
import { RelayError } from '../errors.js';
import type { AttemptSender, NotSent } from './dispatcher.js';
import type { AttemptResult, SenderOptions, WebhookRequest } from './http-sender.js';
import type { RetryPolicy } from './retry-policy.js';

/** What a sender thread is started with: a WebhookSender's options, its guard as the addresses it allows, and the policy its gate judges answers by. */
export interface SenderThreadData {
  readonly sender: Omit<SenderOptions, 'guard'>;
  readonly allowAddresses: readonly string[];
  readonly policy: RetryPolicy;
}

/**
 * To a sender thread: requests, each with the number its result comes back under and its
 * endpoint; an endpoint whose gate the main thread opened again; or 'close'.
 */
export type ToSenderThread = readonly (readonly [number, WebhookRequest, string])[] | { readonly open: string } | 'close';

/** From a sender thread: results, each under its request's number. */
export type FromSenderThread = readonly (readonly [number, AttemptResult | NotSent])[];

/**
 * The webhooks process's HTTP client on threads of its own (OUTBOX_WEBHOOK_SENDER_THREADS):
 * each runs a WebhookSender, so the requests' work — undici, the sockets' writes and reads, the
 * answers' parsing — runs beside the main thread's consuming and recording rather than taking
 * turns with it on one core. Requests go to the threads in turn, posted in batches (one message
 * per thread for every request made in the same turn), results come back the same way. A
 * thread that dies takes the process with it (exit 1): the deliveries it held are leased and
 * sent again by the next process, which is how a crash of the whole process is handled too.
 *
 * A thread reads the answers before the main thread does, and starts the requests later than
 * the main thread handed them over: each thread asks an EndpointGate of its own, fed by the
 * answers it reads, before it starts each request (sender-thread.ts), so that what was handed
 * over before the main thread heard a 429 or a 410 is not sent after the thread read it. Every
 * request to an endpoint goes to the same thread, which so reads every answer of that endpoint.
 */
export class ThreadedSender implements AttemptSender {
  private readonly threads: { readonly worker: Worker; outbox: [number, WebhookRequest, string][] }[];
  private readonly waiting = new Map<number, (result: AttemptResult | NotSent) => void>();
  private nextId = 0;
  private posting = false;
  private closing = false;

  constructor(threads: number, data: SenderThreadData) {
    this.threads = Array.from({ length: threads }, () => {
      const worker = new Worker(new URL('./sender-thread.js', import.meta.url), { workerData: data, name: 'outbox-relay-webhook-sender' });
      worker.on('message', (results: FromSenderThread) => {
        for (const [id, result] of results) {
          const resolve = this.waiting.get(id);
          this.waiting.delete(id);
          resolve?.(result);
        }
      });
      worker.on('error', (error) => {
        throw new RelayError('INTERNAL', `a webhook sender thread failed: ${error.message}; the process ends (its deliveries are sent again once their leases end)`, { cause: error });
      });
      worker.on('exit', (code) => {
        if (!this.closing) throw new RelayError('INTERNAL', `a webhook sender thread exited (code ${code}) while the process was sending; the process ends (its deliveries are sent again once their leases end)`);
      });
      return { worker, outbox: [] };
    });
  }

  send(request: WebhookRequest, endpointId: string): Promise<AttemptResult | NotSent> {
    return new Promise((resolve) => {
      const id = this.nextId++;
      this.waiting.set(id, resolve);
      this.threadOf(endpointId).outbox.push([id, request, endpointId]);
      if (this.posting) return;
      this.posting = true;
      queueMicrotask(() => this.post());
    });
  }

  reopened(endpointId: string): void {
    this.threadOf(endpointId).worker.postMessage({ open: endpointId } satisfies ToSenderThread);
  }

  /** The thread an endpoint's requests go to (its id hashed): the one that reads all its answers. */
  private threadOf(endpointId: string): (typeof this.threads)[number] {
    let hash = 0;
    for (let i = 0; i < endpointId.length; i += 1) hash = (Math.imul(hash, 31) + endpointId.charCodeAt(i)) >>> 0;
    return this.threads[hash % this.threads.length]!;
  }

  private post(): void {
    this.posting = false;
    for (const thread of this.threads) {
      if (thread.outbox.length === 0) continue;
      thread.worker.postMessage(thread.outbox satisfies ToSenderThread);
      thread.outbox = [];
    }
  }

  /** Waits for the attempts in flight, then closes every connection and thread. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(
      this.threads.map(
        ({ worker }) =>
          new Promise<void>((resolve) => {
            worker.once('exit', () => resolve());
            worker.postMessage('close' satisfies ToSenderThread);
          }),
      ),
    );
  }
}
