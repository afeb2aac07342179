/**
 * The body of a ThreadedSender's worker thread: a WebhookSender of its own (undici, its address
 * guard), sending the requests the main thread posts and posting back their results, both in
 * batches; and an EndpointGate of its own, fed by the answers this thread reads, asked before
 * each request starts (see ThreadedSender). Nothing else runs here: no Postgres, no Kafka, no
 * state of a delivery.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { AddressGuard } from './address-guard.js';
import type { NotSent } from './dispatcher.js';
import { EndpointGate } from './endpoint-gate.js';
import { WebhookSender, type AttemptResult } from './http-sender.js';
import { judgeAttempt } from './retry-policy.js';
import type { SenderThreadData, ToSenderThread } from './threaded-sender.js';

const port = parentPort!;
const { sender: options, allowAddresses, policy } = workerData as SenderThreadData;
const sender = new WebhookSender({ ...options, guard: new AddressGuard(allowAddresses) });
const gate = new EndpointGate();

let results: [number, AttemptResult | NotSent][] = [];
let posting = false;

/** Results that ended in the same turn go back in one message. */
function postResult(id: number, result: AttemptResult | NotSent): void {
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
  if ('open' in message) {
    gate.open(message.open);
    return;
  }
  for (const [id, request, endpointId] of message) {
    const admission = gate.admit(endpointId);
    if (!admission.open) {
      postResult(id, { notSent: admission.closed });
      continue;
    }
    const startedAtMs = Date.now();
    // send() resolves with every outcome; a rejection (a URL that does not parse) is one too.
    sender.send(request).then(
      (result) => {
        // Judged here too, the moment it is read: the main thread's gate hears it after the message crosses.
        gate.heard(endpointId, judgeAttempt(policy, 0, result, new Date()).endpoint, request.url);
        postResult(id, { ...result, startedAtMs });
      },
      (error: unknown) => postResult(id, { outcome: 'network', statusCode: null, latencyMs: 0, retryAfterMs: null, response: null, error: `the sender failed: ${error instanceof Error ? error.message : String(error)}` }),
    );
  }
});
