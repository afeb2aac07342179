import { Consumer, type ConsumerOptions, type FetchOptions } from '@platformatic/kafka';
import { dropAbortedTransactions } from './read-committed.js';

/** The fetch answer as the Consumer's `fetch` returns it (the library exports its type only as fetchV17's). */
type FetchResponse = Awaited<ReturnType<Consumer['fetch']>> & object;

type Callback<T> = (error: Error | null, result?: T) => void;

/**
 * The library's Consumer with its fetch answers read_committed as Kafka defines it (read-committed.ts): its messages stream
 * (the webhooks consumer) and a plain fetch (the progress read) go through `fetch`.
 */
export class ReadCommittedConsumer<Key, Value, HeaderKey, HeaderValue> extends Consumer<Key, Value, HeaderKey, HeaderValue> {
  constructor(options: ConsumerOptions<Key, Value, HeaderKey, HeaderValue>) {
    super(options);
  }

  override fetch(options: FetchOptions<Key, Value, HeaderKey, HeaderValue>, callback: Callback<FetchResponse>): void;
  override fetch(options: FetchOptions<Key, Value, HeaderKey, HeaderValue>): Promise<FetchResponse>;
  override fetch(options: FetchOptions<Key, Value, HeaderKey, HeaderValue>, callback?: Callback<FetchResponse>): void | Promise<FetchResponse> {
    if (!callback) return super.fetch(options).then(dropAbortedTransactions);
    super.fetch(options, (error, response) => callback(error, error || !response ? response : dropAbortedTransactions(response)));
  }
}
