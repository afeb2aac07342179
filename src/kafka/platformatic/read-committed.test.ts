import { describe, expect, it } from 'vitest';
import { dropAbortedBatches, dropAbortedTransactions, hideAbortedTransactions } from './read-committed.js';

/** A batch as the library decodes it (its type, from the fetch answer dropAbortedBatches takes). */
type RecordsBatch = NonNullable<Parameters<typeof dropAbortedBatches>[0]['records']>[number];

const TRANSACTIONAL = 1 << 4;
const CONTROL = 1 << 5;

function batch(firstOffset: number, count: number, producerId: number, attributes: number, marker?: 'abort' | 'commit'): RecordsBatch {
  const key = marker === undefined ? null : Buffer.from([0, 0, 0, marker === 'abort' ? 0 : 1]);
  return {
    firstOffset: BigInt(firstOffset),
    lastOffsetDelta: count - 1,
    producerId: BigInt(producerId),
    attributes,
    records: Array.from({ length: count }, (_, offsetDelta) => ({ offsetDelta, key, value: null, headers: [], length: 0, attributes: 0, timestampDelta: 0n })),
  } as unknown as RecordsBatch;
}

describe('read_committed over a fetch answer', () => {
  it("drops every aborted transaction of a producer id, not only its last, and keeps its committed ones and other producers' records", () => {
    const partition = {
      records: [
        batch(0, 2, 7, TRANSACTIONAL), // aborted (first)
        batch(2, 1, 7, TRANSACTIONAL | CONTROL, 'abort'),
        batch(3, 2, 7, TRANSACTIONAL), // committed
        batch(5, 1, 7, TRANSACTIONAL | CONTROL, 'commit'),
        batch(6, 1, 9, 0), // not transactional: always read
        batch(7, 2, 7, TRANSACTIONAL), // aborted (second)
        batch(9, 1, 7, TRANSACTIONAL | CONTROL, 'abort'),
        batch(10, 1, 8, TRANSACTIONAL), // another producer's, committed
        batch(11, 1, 8, TRANSACTIONAL | CONTROL, 'commit'),
      ],
      abortedTransactions: [
        { producerId: 7n, firstOffset: 7n },
        { producerId: 7n, firstOffset: 0n },
      ],
    };
    dropAbortedBatches(partition);
    const data = partition.records.filter((kept) => !(kept.attributes & CONTROL)).map((kept) => Number(kept.firstOffset));
    expect(data).toEqual([3, 6, 10]);
    // The markers stay: a reader's next offset moves past them.
    expect(partition.records.filter((kept) => kept.attributes & CONTROL).map((kept) => Number(kept.firstOffset))).toEqual([2, 5, 9, 11]);
  });

  it('leaves an answer without aborted transactions as it is', () => {
    const records = [batch(0, 3, 7, TRANSACTIONAL), batch(3, 1, 7, TRANSACTIONAL | CONTROL, 'commit')];
    const partition = { records, abortedTransactions: null };
    dropAbortedBatches(partition);
    expect(partition.records).toBe(records);
  });

  it("uses the aborted transactions taken out of the answer before the library's own filter read it (which then finds none)", () => {
    const partition = { records: [batch(0, 2, 7, TRANSACTIONAL), batch(2, 1, 7, TRANSACTIONAL | CONTROL, 'abort'), batch(3, 1, 7, TRANSACTIONAL)], abortedTransactions: [{ producerId: 7n, firstOffset: 0n }] as { producerId: bigint; firstOffset: bigint }[] | null };
    const response = { responses: [{ partitions: [partition] }] };
    hideAbortedTransactions(response);
    expect(partition.abortedTransactions).toBeNull();
    dropAbortedTransactions(response);
    expect(partition.records.map((kept) => Number(kept.firstOffset))).toEqual([2, 3]);
  });
});
