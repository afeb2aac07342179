import { describe, expect, it } from 'vitest';
import { DEFAULT_COLUMNS } from './outbox-table.js';
import { likePatterns, matchesPattern, tableOutboxOf, type Outbox } from './outboxes.js';

describe('table patterns', () => {
  it('match schema and name, * standing for any run of characters, nothing else special', () => {
    const tenants = { schema: 'tenant_*', name: 'event_outbox' };
    expect(matchesPattern(tenants, { schema: 'tenant_0001', name: 'event_outbox' })).toBe(true);
    expect(matchesPattern(tenants, { schema: 'tenant_', name: 'event_outbox' })).toBe(true);
    expect(matchesPattern(tenants, { schema: 'tenantx0001', name: 'event_outbox' })).toBe(false);
    expect(matchesPattern(tenants, { schema: 'tenant_0001', name: 'event_outbox_old' })).toBe(false);
    expect(matchesPattern({ schema: 'a*b*c', name: 'o' }, { schema: 'abc', name: 'o' })).toBe(true);
    expect(matchesPattern({ schema: 'a*b*c', name: 'o' }, { schema: 'axxbyyc', name: 'o' })).toBe(true);
    expect(matchesPattern({ schema: 'a*b*c', name: 'o' }, { schema: 'ac', name: 'o' })).toBe(false);
    expect(matchesPattern({ schema: 'ab*ba', name: 'o' }, { schema: 'aba', name: 'o' })).toBe(false);
  });

  it('become LIKE patterns whose _ and % are taken literally', () => {
    expect(likePatterns({ schema: 'tenant_*', name: 'event_outbox' })).toEqual({ schema: 'tenant\\_%', name: 'event\\_outbox' });
    expect(likePatterns({ schema: '100%*', name: 'o' }).schema).toBe('100\\%%');
  });

  it("give a matching table the pattern's columns and its own {schema} and {table}; a table named outright wins", () => {
    const outboxes: Outbox[] = [
      { kind: 'table', table: { schema: 'tenant_0001', name: 'event_outbox' }, columns: { ...DEFAULT_COLUMNS, eventId: 'id' }, topicTemplate: 'special', format: 'json' },
      { kind: 'tables', pattern: { schema: 'tenant_*', name: 'event_outbox' }, columns: DEFAULT_COLUMNS, topicTemplate: '{schema}.{table}.{event_type}', format: 'avro' },
    ];
    expect(tableOutboxOf(outboxes, { schema: 'tenant_0042', name: 'event_outbox' })).toEqual({ kind: 'table', table: { schema: 'tenant_0042', name: 'event_outbox' }, columns: DEFAULT_COLUMNS, topicTemplate: 'tenant_0042.event_outbox.{event_type}', format: 'avro', pattern: { schema: 'tenant_*', name: 'event_outbox' } });
    expect(tableOutboxOf(outboxes, { schema: 'tenant_0001', name: 'event_outbox' })?.topicTemplate).toBe('special');
    expect(tableOutboxOf(outboxes, { schema: 'public', name: 'event_outbox' })).toBeUndefined();
  });
});
