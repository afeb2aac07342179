import { describe, expect, it } from 'vitest';
import { rolesSql, TABLE_GRANTS } from './roles.js';

describe('TABLE_GRANTS', () => {
  it('are the grants of sql/003_roles.sql, which the trigger gives a new tenant\'s table too', async () => {
    const sql = await rolesSql({ schema: 'billing', name: 'outbox' });
    const granted = sql.split('\n').filter((line) => line.startsWith('GRANT ') && !line.includes(' TO your_service_role'));
    const expected = TABLE_GRANTS.flatMap(({ role, table, marks }) => [
      `GRANT USAGE ON SCHEMA "billing" TO ${role};`,
      `GRANT ${table} ON "billing"."outbox" TO ${role};`,
      ...(marks ? [`GRANT ${marks} ON "billing"."outbox_prune_marks" TO ${role};`] : []),
    ]);
    expect(granted.sort()).toEqual(expected.sort());
  });
});
