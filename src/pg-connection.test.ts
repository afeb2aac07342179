import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { connectPostgres, databaseAccess, overriddenSessionSettings, pgConnectionConfigs } from './pg-connection.js';
import { Secret } from './security/secret.js';

const FIXED = '-c DateStyle=ISO,\\ MDY -c TimeZone=UTC -c IntervalStyle=postgres -c extra_float_digits=3 -c bytea_output=hex';

describe('session settings of every connection', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("puts the relay's settings after the operator's options, and keeps the rest of the URL", () => {
    const url = 'postgres://relay:p%40ss@db:5432/billing?sslmode=disable&options=-c%20DateStyle%3DGerman%20-c%20search_path%3Dbilling';
    const config = pgConnectionConfigs(databaseAccess(url), 'test')[0] as Record<string, unknown>;
    expect(config.options).toBe(`-c DateStyle=German -c search_path=billing ${FIXED}`);
    expect([config.user, config.password, config.host, config.port, config.database, config.ssl]).toEqual(['relay', 'p@ss', 'db', '5432', 'billing', false]);
  });

  it('keeps PGOPTIONS when the URL has no options (pg reads it only then), for replication connections too', () => {
    vi.stubEnv('PGOPTIONS', '-c search_path=billing');
    for (const kind of [{}, { replication: true }]) {
      const config = pgConnectionConfigs(databaseAccess('postgres://relay@db/billing'), 'test', kind)[0] as Record<string, unknown>;
      expect(config.options).toBe(`-c search_path=billing ${FIXED}`);
    }
  });

  it("the relay's application name wins over the URL's; a separate password is read at each connection", () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'pg-password-')), 'password');
    writeFileSync(file, 'first');
    const config = pgConnectionConfigs(databaseAccess('postgres://relay@db/billing?application_name=app', Secret.fromFile('DATABASE_PASSWORD_FILE', file)), 'outbox-relay')[0] as Record<string, unknown>;
    expect(config.application_name).toBe('outbox-relay');
    const password = config.password as () => string;
    expect(password()).toBe('first');
    writeFileSync(file, 'rotated');
    expect(password()).toBe('rotated');
  });

  it('names the settings the operator asked for and the relay overrides, in any spelling Postgres reads', () => {
    const url = (options: string) => `postgres://db/x?options=${encodeURIComponent(options)}`;
    expect(overriddenSessionSettings(databaseAccess(url('-c datestyle=German -cTimeZone=UTC --bytea-output=escape -c search_path=a')))).toEqual({ source: "DATABASE_URL's options", settings: ['DateStyle', 'TimeZone', 'bytea_output'] });
    expect(overriddenSessionSettings(databaseAccess(url('-c search_path=a'))).settings).toEqual([]);
    vi.stubEnv('PGOPTIONS', '-c IntervalStyle=iso_8601');
    expect(overriddenSessionSettings(databaseAccess('postgres://db/x'))).toEqual({ source: 'PGOPTIONS', settings: ['IntervalStyle'] });
  });
});

/**
 * A server that accepts one login (AuthenticationOk, ReadyForQuery) and nothing more: enough for
 * pg to connect; the test then drops the connection as a failover does.
 */
async function loginOnlyServer(): Promise<{ server: Server; port: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.once('data', () => {
      const ok = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0]);
      const ready = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);
      socket.write(Buffer.concat([ok, ready]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port, sockets };
}

describe('a connection broken between queries', () => {
  it("is heard (no unhandled 'error' event ends the process): the next query fails with the cause instead", async () => {
    const { server, port, sockets } = await loginOnlyServer();
    try {
      const client = await connectPostgres(databaseAccess(`postgres://relay@127.0.0.1:${port}/outbox`), 'outbox-relay-test');
      const emitted: { event: string; heard: boolean }[] = [];
      const emit = client.emit.bind(client);
      // An 'error' with no listener would throw out of pg's socket handler: an uncaught exception.
      client.emit = ((event: string, ...args: unknown[]) => {
        const heard = emit(event, ...args);
        emitted.push({ event, heard });
        return heard;
      }) as typeof client.emit;
      const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
      for (const socket of sockets) socket.destroy();
      await ended;
      expect(emitted.find((entry) => entry.event === 'error')).toEqual({ event: 'error', heard: true });
      await expect(client.query('SELECT 1')).rejects.toThrow(/not queryable|terminated/);
      await client.end();
    } finally {
      server.close();
    }
  });
});
