import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { RelayError } from '../errors.js';
import { checkStandby, noFailoverOnStandby } from './standby-slot.js';

interface ServerFacts {
  readonly systemId?: string;
  readonly inRecovery?: boolean;
  readonly version?: number;
  readonly walLevel?: string;
  readonly feedback?: string;
  readonly primarySlot?: string | null;
  /** Physical slots (name -> type) the server has. */
  readonly slots?: Record<string, string>;
}

/** A server at the pg port, answering the queries checkStandby sends. */
function server(facts: ServerFacts): pg.ClientBase {
  const { systemId = '7400000000000000001', inRecovery = true, version = 160_004, walLevel = 'logical', feedback = 'on', primarySlot = 'standby1', slots = {} } = facts;
  const query = async (sql: string, values: unknown[] = []) => {
    if (sql.includes('pg_control_system')) return { rows: [{ id: systemId }] };
    if (sql.includes('pg_is_in_recovery')) return { rows: [{ in_recovery: inRecovery, version, version_text: `${Math.floor(version / 10_000)}.4`, wal_level: walLevel, feedback, primary_slot: primarySlot }] };
    if (sql.includes('pg_replication_slots')) {
      const type = slots[String(values[0])];
      return { rows: type ? [{ slot_type: type }] : [] };
    }
    throw new Error(`unexpected query: ${sql}`);
  };
  return { query } as unknown as pg.ClientBase;
}

const PRIMARY = server({ inRecovery: false, slots: { standby1: 'physical' } });

async function refusal(standby: pg.ClientBase, primary = PRIMARY): Promise<RelayError> {
  const error = await checkStandby(primary, standby).then(() => null, (caught: unknown) => caught);
  expect(error).toBeInstanceOf(RelayError);
  expect((error as RelayError).code).toBe('SETUP_STANDBY');
  return error as RelayError;
}

describe('checkStandby', () => {
  it('accepts a standby of 16+ with every setting a logical slot needs, and says so', async () => {
    expect(await checkStandby(PRIMARY, server({}))).toEqual([expect.stringMatching(/a standby \(Postgres 16\.4, hot_standby_feedback on, through the primary's physical slot standby1\)/)]);
  });

  it('refuses a standby before Postgres 16, naming the version', async () => {
    expect((await refusal(server({ version: 150_008 }))).message).toMatch(/Postgres 15\.4: a standby can hold a logical slot from Postgres 16 on/);
  });

  it('refuses a server of another cluster', async () => {
    expect((await refusal(server({ systemId: '7400000000000000999' }))).message).toMatch(/not a standby of DATABASE_URL's primary: its system identifier is 7400000000000000999/);
  });

  it('names each missing setting at once: wal_level, hot_standby_feedback, primary_slot_name', async () => {
    const error = await refusal(server({ walLevel: 'replica', feedback: 'off', primarySlot: '' }));
    expect(error.message).toMatch(/wal_level is "replica" on the standby/);
    expect(error.message).toMatch(/hot_standby_feedback is off on the standby/);
    expect(error.message).toMatch(/primary_slot_name is empty on the standby/);
  });

  it('refuses a primary_slot_name the primary has no physical slot for', async () => {
    expect((await refusal(server({ primarySlot: 'gone' }))).message).toMatch(/primary_slot_name is "gone" on the standby, and the primary has no physical slot of that name/);
  });

  it('accepts the standby once promoted, saying it is a primary now', async () => {
    expect(await checkStandby(PRIMARY, server({ inRecovery: false }))).toEqual([expect.stringMatching(/a primary now .*promoted/)]);
  });
});

describe('noFailoverOnStandby', () => {
  it('makes a plain slot for auto and false, and refuses true', () => {
    expect(noFailoverOnStandby('auto')).toBe(false);
    expect(noFailoverOnStandby('false')).toBe(false);
    expect(() => noFailoverOnStandby('true')).toThrow(/Postgres makes no failover slots/);
  });
});
