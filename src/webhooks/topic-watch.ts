import type { TopicLister } from '../kafka/group-consumer.js';
import { sleep } from '../time.js';

/**
 * Lists the cluster's topics every `everyMs` until `signal` aborts, handing each listing to
 * `follow`; a listing or a follow that fails (Kafka away, a consumer that cannot start) goes to
 * `failed`, and the next turn tries again: the watch ends only when stopped. Closes the lister
 * at the end.
 */
export async function watchTopics(lister: TopicLister, everyMs: number, signal: AbortSignal, follow: (topics: readonly string[]) => Promise<void>, failed: (error: unknown) => void): Promise<void> {
  try {
    while (!signal.aborted) {
      await sleep(everyMs, signal);
      if (signal.aborted) break;
      try {
        await follow(await lister.listTopics());
      } catch (error) {
        failed(error);
      }
    }
  } finally {
    await lister.close().catch(() => undefined);
  }
}
