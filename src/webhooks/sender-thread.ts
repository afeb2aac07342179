/**
 * The body of a ThreadedSender's worker thread: a WebhookSender of its own (undici, its address
 * guard), sending the requests the main thread posts and posting back their results, both in
 * batches. Nothing else runs here: no Postgres, no Kafka, no state of a delivery.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { AddressGuard } from './address-guard.js';
import { WebhookSender, type AttemptResult } from './http-sender.js';
import type { SenderThreadData, ToSenderThread } from './threaded-sender.js';

const port = parentPort!;
const { sender: options, allowAddresses } = workerData as SenderThreadData;
const sender = new WebhookSender({ ...options, guard: new AddressGuard(allowAddresses) });

let results: [number, AttemptResult][] = [];
let posting = false;

/** Results that ended in the same turn go back in one message. */
function postResult(id: number, result: AttemptResult): void {
  results.push([id, result]);
  if (posting) return;
  posting = true;
  setImmediate(() => {
    posting = false;
    const batch = results;
    results = [];
    port.postMessage(batch);
  });
}

port.on('message', (message: ToSenderThread) => {
  if (message === 'close') {
    void sender.close().finally(() => port.close());
    return;
  }
  for (const [id, request] of message) {
    // send() resolves with every outcome; a rejection (a URL that does not parse) is one too.
    sender.send(request).then(
      (result) => postResult(id, result),
      (error: unknown) => postResult(id, { outcome: 'network', statusCode: null, latencyMs: 0, retryAfterMs: null, response: null, error: `the sender failed: ${error instanceof Error ? error.message : String(error)}` }),
    );
  }
});
