import { describe, expect, it } from 'vitest';
import { pendingIndexAdvice, type PendingIndex } from './cutover.js';

const pendingIndex = (schema: string, table = 'event_outbox'): PendingIndex => ({ schema, table, name: 'event_outbox_pending_idx', predicate: "(status = 'pending'::text)", shared: ['status'] });

describe("cutover's advice on the poller's partial indexes", () => {
  it("names the index with its schema, so that the DROP INDEX it gives finds it outside the search path", () => {
    const [advice, ...more] = pendingIndexAdvice([pendingIndex('billing')]);
    expect(more).toEqual([]);
    expect(advice).toMatch(/^index event_outbox_pending_idx is partial \(WHERE \(status = 'pending'::text\)\) on status, as the pending condition/);
    expect(advice).toMatch(/DROP INDEX CONCURRENTLY "billing"\."event_outbox_pending_idx"$/);
  });

  it("gives a pattern's tenants one warning: three schemas named, the others counted, and the query that writes every DROP INDEX", () => {
    const tenants = ['tenant_0004', 'tenant_0002', 'tenant_0001', 'tenant_0005', 'tenant_0003'].map((schema) => pendingIndex(schema));
    const [advice, ...more] = pendingIndexAdvice([...tenants, pendingIndex('billing', 'outbox')]);
    expect(more).toHaveLength(1);
    expect(advice).toContain('index event_outbox_pending_idx (of 5 outbox tables) is partial');
    expect(advice).toContain('DROP INDEX CONCURRENTLY "tenant_0001"."event_outbox_pending_idx"; DROP INDEX CONCURRENTLY "tenant_0002"."event_outbox_pending_idx"; DROP INDEX CONCURRENTLY "tenant_0003"."event_outbox_pending_idx"; and in the 2 other schemas');
    expect(advice).toContain("SELECT format('DROP INDEX CONCURRENTLY %I.%I', schemaname, indexname) FROM pg_indexes WHERE tablename = 'event_outbox' AND indexname = 'event_outbox_pending_idx' \\gexec");
    expect(more[0]).toMatch(/DROP INDEX CONCURRENTLY "billing"\."event_outbox_pending_idx"$/);
  });
});
