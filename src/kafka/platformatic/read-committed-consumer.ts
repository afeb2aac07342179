import { Consumer, kGetApi, type API, type Callback as LibraryCallback, type ConsumerOptions, type FetchOptions } from '@platformatic/kafka';
import { dropAbortedTransactions, hideAbortedTransactions } from './read-committed.js';

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

  /** The Fetch API as the library gets it, each answer's aborted transactions taken out before its own filter sees them. */
  override [kGetApi]<RequestArguments extends unknown[], ResponseType>(name: string, callback: LibraryCallback<API<RequestArguments, ResponseType>>): void {
    super[kGetApi]<RequestArguments, ResponseType>(name, (error, api) => {
      if (error || name !== 'Fetch' || !api) return callback(error, api as never);
      const send = api as unknown as (...args: unknown[]) => void;
      const hiding = (...args: unknown[]) => {
        const done = args.pop() as Callback<FetchResponse>;
        send(...args, (failure: Error | null, response?: FetchResponse) => {
          if (response) hideAbortedTransactions(response);
          done(failure, response);
        });
      };
      callback(null, Object.assign(hiding, api) as unknown as typeof api);
    });
  }

  override fetch(options: FetchOptions<Key, Value, HeaderKey, HeaderValue>, callback: Callback<FetchResponse>): void;
  override fetch(options: FetchOptions<Key, Value, HeaderKey, HeaderValue>): Promise<FetchResponse>;
  override fetch(options: FetchOptions<Key, Value, HeaderKey, HeaderValue>, callback?: Callback<FetchResponse>): void | Promise<FetchResponse> {
    if (!callback) return super.fetch(options).then(dropAbortedTransactions);
    super.fetch(options, (error, response) => callback(error, error || !response ? response : dropAbortedTransactions(response)));
  }
}
