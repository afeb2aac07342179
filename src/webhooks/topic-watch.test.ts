import { describe, expect, it } from 'vitest';
import type { TopicLister } from '../kafka/group-consumer.js';
import { watchTopics } from './topic-watch.js';

describe('watching the cluster for topics a pattern matches', () => {
  it('a listing that fails (Kafka away) is reported and tried again at the next turn; the watch ends only when stopped, and closes its lister', async () => {
    const listings: (string[] | Error)[] = [new Error('There is no leader for this topic-partition'), ['outbox.invoice', 'outbox.refund']];
    let closed = false;
    const lister: TopicLister = {
      listTopics: async () => {
        const next = listings.shift() ?? ['outbox.invoice', 'outbox.refund'];
        if (next instanceof Error) throw next;
        return next;
      },
      close: async () => {
        closed = true;
      },
    };
    const stop = new AbortController();
    const followed: (readonly string[])[] = [];
    const failures: unknown[] = [];
    const watching = watchTopics(lister, 5, stop.signal, async (topics) => void followed.push(topics), (error) => failures.push(error));

    await expect.poll(() => followed.length).toBeGreaterThan(0);
    expect(failures).toEqual([new Error('There is no leader for this topic-partition')]);
    expect(followed[0]).toEqual(['outbox.invoice', 'outbox.refund']);
    expect(closed).toBe(false);
    stop.abort();
    await watching;
    expect(closed).toBe(true);
  });

  it('a follow that fails is reported too, and the watch goes on', async () => {
    const lister: TopicLister = { listTopics: async () => ['outbox.invoice'], close: async () => undefined };
    const stop = new AbortController();
    let follows = 0;
    const failures: unknown[] = [];
    const watching = watchTopics(lister, 5, stop.signal, async () => {
      follows += 1;
      if (follows === 1) throw new Error('the consumer could not start');
    }, (error) => failures.push(error));

    await expect.poll(() => follows).toBeGreaterThan(2);
    stop.abort();
    await watching;
    expect(failures).toEqual([new Error('the consumer could not start')]);
  });
});
