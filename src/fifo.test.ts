import { describe, expect, it } from 'vitest';
import { Fifo } from './fifo.js';

describe('Fifo', () => {
  it('keeps order across compactions', () => {
    const fifo = new Fifo<number>();
    const out: number[] = [];
    for (let i = 0; i < 5_000; i += 1) {
      fifo.push(i);
      if (i % 3 === 0) out.push(fifo.shift()!);
    }
    while (fifo.length > 0) out.push(fifo.shift()!);
    expect(out).toEqual(Array.from({ length: 5_000 }, (_, i) => i));
    expect(fifo.shift()).toBeUndefined();
  });

  it('peeks, iterates what is queued, and clears', () => {
    const fifo = new Fifo<string>();
    fifo.push('a');
    fifo.push('b');
    fifo.shift();
    fifo.push('c');
    expect(fifo.peek()).toBe('b');
    expect([...fifo]).toEqual(['b', 'c']);
    fifo.clear();
    expect(fifo.length).toBe(0);
    expect(fifo.peek()).toBeUndefined();
  });
});
