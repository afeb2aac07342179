import { RelayError } from '../../errors.js';

/**
 * A listing's position, opaque to the caller: what it lists and where the page ended, so a
 * cursor of one listing given to another, or edited, is refused (WEBHOOK_API_INVALID_CURSOR)
 * rather than read as something else.
 */
export type CursorKind = 'deliveries' | 'endpoints' | 'customers';

export function encodeCursor(kind: CursorKind, after: string): string {
  return Buffer.from(JSON.stringify([kind, after])).toString('base64url');
}

/** The position a cursor holds; undefined for none (the first page). */
export function decodeCursor(kind: CursorKind, cursor: string | undefined, valid: (after: string) => boolean = () => true): string | undefined {
  if (cursor === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = null;
  }
  // A position holding U+0000 was never handed out, and Postgres text could not compare it (a 500).
  if (!Array.isArray(parsed) || parsed.length !== 2 || parsed[0] !== kind || typeof parsed[1] !== 'string' || parsed[1].includes('\u0000') || !valid(parsed[1])) {
    throw new RelayError('WEBHOOK_API_INVALID_CURSOR', `cursor "${cursor.slice(0, 40)}" is not a cursor of this listing: pass the nextCursor of the previous page as given`);
  }
  return parsed[1];
}

/** The next page's cursor: the last item's position when the page is full, else null. */
export function nextCursor<T>(kind: CursorKind, items: readonly T[], limit: number, positionOf: (item: T) => string): string | null {
  return items.length === limit ? encodeCursor(kind, positionOf(items[items.length - 1]!)) : null;
}
