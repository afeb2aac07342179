import { createHash } from 'node:crypto';
import type pg from 'pg';

const statementNames = new Map<string, string>();

/**
 * A statement of the hot path (record, lease, write results) prepared once per connection,
 * named by its text (the tables' names are in it): parsing and planning these CTEs again for
 * every chunk was about a fifth of Postgres's work per delivery. Not the claim's: which of an
 * endpoint's due deliveries it reads depends on its parameters, and a generic plan would not
 * know them.
 */
export function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = statementNames.get(text);
  if (!name) statementNames.set(text, (name = `wh_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`));
  return { name, text, values };
}
