// vitest: runs alone (two commits adjacent in the WAL: another file's writes would land between them)
import { describe, expect, it } from 'vitest';
import { formatLsn, type Lsn } from '../../src/lsn.js';
import { useTestOutbox } from '../harness/fixture.js';
import { billingEvent } from '../harness/outbox.js';
import { eventually, RelayProcess } from '../harness/relay-process.js';

/**
 * Postgres skips, on restart, every transaction whose commit record starts before the
 * confirmed position, and the next transaction's commit can start exactly at the previous
 * one's end. Confirming one byte past that end (as `lsn + 1` acknowledgement does) loses it.
 */
describe('adjacent transactions across a restart', () => {
  const { outbox, reader } = useTestOutbox({ deadLetters: true, read: true });

  it('delivers, after a restart, the transaction whose commit starts exactly where the confirmed one ends', async () => {
    // A commits, then B commits right behind it, from two open transactions, so nothing else
    // lands in the WAL between A's end and B's commit record. B is poison: a relay told to stop
    // on poison delivers A, confirms exactly A's end, and stops in front of B.
    const a = billingEvent('inv_adjacent', 1);
    const b = { ...billingEvent('inv_adjacent', 2), aggregateType: 'not a topic!' };
    const first = await outbox.pool.connect();
    const second = await outbox.pool.connect();
    try {
      await first.query('BEGIN');
      await second.query('BEGIN');
      await outbox.insert([a], first);
      await outbox.insert([b], second);
      await first.query('COMMIT');
      await second.query('COMMIT');
    } finally {
      first.release();
      second.release();
    }

    const stopping = new RelayProcess(outbox.relayEnv({ OUTBOX_ON_POISON: 'fail' })).start();
    expect(await stopping.waitExit()).toBe(1);
    await stopping.waitForLog(/poison event; stopping/);
    await reader.until('A', (records) => records.some((record) => record.headers.event_id === a.eventId));
    const confirmed = await eventually('the slot to be released', async () => {
      const state = await outbox.slotState();
      return state.active ? undefined : state.confirmed;
    });

    const relay = new RelayProcess(outbox.relayEnv()).start();
    try {
      await reader.until('B in the dead-letter topic', (records) => records.some((record) => record.headers.event_id === b.eventId), 60_000, () => relay.tail());
    } finally {
      await relay.stop();
    }
    const deadLetter = reader.records.find((record) => record.headers.event_id === b.eventId)!;
    // B's commit record starts exactly at the position confirmed after A: they were adjacent,
    // and the relay confirmed A's end LSN to the byte.
    expect(deadLetter.headers.outbox_commit_lsn).toBe(formatLsn(confirmed as Lsn));
    expect(reader.records.filter((record) => record.headers.event_id === a.eventId)).toHaveLength(1);
  });
});
