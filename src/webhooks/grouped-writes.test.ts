import { describe, expect, it } from 'vitest';
import { GroupedWrites } from './grouped-writes.js';

/** A write at the port: records each group and ends when the test says. */
function heldWrites() {
  const groups: number[][] = [];
  const ends: ((fail?: Error) => void)[] = [];
  const write = (items: readonly number[]) =>
    new Promise<number[]>((resolve, reject) => {
      groups.push([...items]);
      ends.push((fail) => (fail ? reject(fail) : resolve(items.map((item) => item * 10))));
    });
  return { groups, ends, write };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('grouped writes', () => {
  it('writes one group at a time: what came during a write goes together in the next, each item getting its own result', async () => {
    const { groups, ends, write } = heldWrites();
    const writes = new GroupedWrites(write);
    const first = writes.push(1);
    await settle();
    const later = [writes.push(2), writes.push(3)];
    await settle();
    expect(groups).toEqual([[1]]);
    ends[0]!();
    expect(await first).toBe(10);
    await settle();
    expect(groups).toEqual([[1], [2, 3]]);
    ends[1]!();
    expect(await Promise.all(later)).toEqual([20, 30]);
  });

  it('takes no more than the bound allows (at least one), and a failed write rejects its own group only', async () => {
    const { groups, ends, write } = heldWrites();
    const writes = new GroupedWrites(write, () => 0);
    const results = [writes.push(1), writes.push(2)].map((result) => result.catch((error: Error) => error.message));
    await settle();
    expect(groups).toEqual([[1]]);
    ends[0]!(new Error('refused'));
    await settle();
    expect(groups).toEqual([[1], [2]]);
    ends[1]!();
    expect(await Promise.all(results)).toEqual(['refused', 20]);
    // The queue starts again after it emptied.
    const again = writes.push(4);
    await settle();
    ends[2]!();
    expect(await again).toBe(40);
  });
});
