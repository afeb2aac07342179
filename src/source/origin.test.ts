import { describe, expect, it } from 'vitest';
import { parseLsn } from '../lsn.js';
import { parseTimelineHistory } from './origin.js';

describe('timeline history', () => {
  it('maps each earlier timeline to where it ended, as Postgres writes the file', () => {
    const ends = parseTimelineHistory('1\t0/3000060\tno recovery target specified\n\n2\t0/5000A8\tat restore point "x"\n');
    expect([...ends]).toEqual([[1, parseLsn('0/3000060')], [2, parseLsn('0/5000A8')]]);
  });
});
