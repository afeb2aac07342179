import { createHash } from 'node:crypto';
import type pg from 'pg';
import { RelayError } from '../../errors.js';
import type { WebhookTables } from '../webhook-tables.js';

export interface StoredAnswer {
  readonly statusCode: number;
  readonly body: unknown;
}

/** How long a key's answer is kept: a retry comes within minutes, a day is ample. */
const KEPT = '1 day';

/**
 * Creates that take an Idempotency-Key: the first request with a key runs and its answer is
 * kept; the same key with the same request gets that answer again; with another request, or
 * while the first still runs, WEBHOOK_API_IDEMPOTENCY_CONFLICT (422, 409). A failed first
 * request keeps nothing: the key may be used again. Keys are kept as digests, per caller and route.
 */
export class IdempotencyStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly tables: WebhookTables,
  ) {}

  async once(scope: { readonly caller: string; readonly route: string; readonly key: string }, request: unknown, work: () => Promise<StoredAnswer>): Promise<StoredAnswer> {
    const keyDigest = sha256(`${scope.caller}\n${scope.route}\n${scope.key}`);
    const requestDigest = sha256(JSON.stringify(request));
    // A key older than a day is taken over, as if new.
    const { rowCount } = await this.pool.query(
      `INSERT INTO ${this.tables.apiIdempotency} AS k (key_digest, request_digest) VALUES ($1, $2)
       ON CONFLICT (key_digest) DO UPDATE SET request_digest = excluded.request_digest, status_code = NULL, response = NULL, created_at = now()
       WHERE k.created_at < now() - interval '${KEPT}'`,
      [keyDigest, requestDigest],
    );
    if (rowCount === 0) return this.earlier(keyDigest, requestDigest);
    let answer: StoredAnswer;
    try {
      answer = await work();
    } catch (error) {
      await this.pool.query(`DELETE FROM ${this.tables.apiIdempotency} WHERE key_digest = $1`, [keyDigest]);
      throw error;
    }
    await this.pool.query(`UPDATE ${this.tables.apiIdempotency} SET status_code = $2, response = $3 WHERE key_digest = $1`, [keyDigest, answer.statusCode, JSON.stringify(answer.body)]);
    return answer;
  }

  /** Days-old keys, deleted (the housekeeping of `webhooks api`). */
  async prune(): Promise<number> {
    const { rowCount } = await this.pool.query(`DELETE FROM ${this.tables.apiIdempotency} WHERE created_at < now() - interval '${KEPT}'`);
    return rowCount ?? 0;
  }

  private async earlier(keyDigest: string, requestDigest: string): Promise<StoredAnswer> {
    const { rows } = await this.pool.query<{ request_digest: string; status_code: number | null; response: unknown }>(`SELECT request_digest, status_code, response FROM ${this.tables.apiIdempotency} WHERE key_digest = $1`, [keyDigest]);
    const row = rows[0];
    if (row === undefined) throw new RelayError('WEBHOOK_API_IDEMPOTENCY_CONFLICT', 'the request with this Idempotency-Key failed just now: send it again', { details: { status: 409 } });
    if (row.request_digest !== requestDigest) throw new RelayError('WEBHOOK_API_IDEMPOTENCY_CONFLICT', 'this Idempotency-Key was used with another request body: use a new key for a new request', { details: { status: 422 } });
    if (row.status_code === null) throw new RelayError('WEBHOOK_API_IDEMPOTENCY_CONFLICT', 'the first request with this Idempotency-Key is still running: retry once it has answered', { details: { status: 409 } });
    return { statusCode: row.status_code, body: row.response };
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
