import { describe, expect, it } from 'vitest';
import { wantsFailover } from './failover-slot.js';

describe('OUTBOX_SLOT_FAILOVER', () => {
  it('makes a failover slot on Postgres 17 and later unless turned off', () => {
    expect(wantsFailover('auto', 170_004)).toBe(true);
    expect(wantsFailover('true', 180_000)).toBe(true);
    expect(wantsFailover('false', 170_004)).toBe(false);
  });

  it('before 17: a plain slot, and a clear refusal when a failover slot was asked for', () => {
    expect(wantsFailover('auto', 150_019)).toBe(false);
    expect(wantsFailover('false', 160_000)).toBe(false);
    expect(() => wantsFailover('true', 150_019)).toThrow(/OUTBOX_SLOT_FAILOVER=true, but Postgres 15 has no failover slots \(17 and later have\)/);
  });
});
