import type pg from 'pg';

/**
 * `work` in one transaction on a client of `pool`: committed if it returns, rolled back if it
 * throws (the error goes on). A client whose ROLLBACK failed is in an unknown state: it is
 * destroyed rather than given back to the pool.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    try {
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken = rollbackError as Error;
      });
      throw error;
    }
  } finally {
    client.release(broken);
  }
}
