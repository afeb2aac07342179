import type pg from 'pg';
import { parseLsn, type Lsn } from '../lsn.js';
import type { SourceOrigin } from './source.js';

/**
 * The server a replication connection reached: IDENTIFY_SYSTEM's system identifier and
 * timeline, and where each earlier timeline ended (TIMELINE_HISTORY), so that positions written
 * elsewhere (exactly-once progress) can be checked against this server's history.
 */
export async function readOrigin(client: pg.Client): Promise<SourceOrigin> {
  const identity = await client.query<{ systemid: string; timeline: string | number }>('IDENTIFY_SYSTEM');
  const row = identity.rows[0]!;
  const timeline = Number(row.timeline);
  if (timeline <= 1) return { systemId: String(row.systemid), timeline, timelineEnds: new Map() };
  const history = await client.query<{ content: Buffer | string }>(`TIMELINE_HISTORY ${timeline}`);
  return { systemId: String(row.systemid), timeline, timelineEnds: parseTimelineHistory(history.rows[0]?.content.toString() ?? '') };
}

/**
 * A timeline history file: one line per earlier timeline, "<timeline>\t<switch LSN>\t<reason>",
 * where that timeline ended and the next one began. Comment and blank lines are skipped.
 */
export function parseTimelineHistory(content: string): Map<number, Lsn> {
  const ends = new Map<number, Lsn>();
  for (const line of content.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const [timeline, lsn] = trimmed.split(/\s+/);
    ends.set(Number(timeline), parseLsn(lsn!));
  }
  return ends;
}
