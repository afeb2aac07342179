import { afterEach, describe, expect, it, vi } from 'vitest';
import { databaseAccess, overriddenSessionSettings, pgConnectionConfig } from './pg-connection.js';

const FIXED = '-c DateStyle=ISO,\\ MDY -c TimeZone=UTC -c IntervalStyle=postgres -c extra_float_digits=3 -c bytea_output=hex';

/** The startup options pg will send for a config (pg lets the URL's `options` replace the config's). */
function startupOptions(config: { connectionString?: string; options?: string }): string | undefined {
  return new URL(config.connectionString!).searchParams.get('options') ?? config.options;
}

describe('session settings of every connection', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it("puts the relay's settings after the operator's options, in the URL where pg reads them", () => {
    const url = 'postgres://relay:p%40ss@db:5432/billing?sslmode=disable&options=-c%20DateStyle%3DGerman%20-c%20search_path%3Dbilling';
    const config = pgConnectionConfig(databaseAccess(url), 'test') as { connectionString: string; options?: string };
    expect(startupOptions(config)).toBe(`-c DateStyle=German -c search_path=billing ${FIXED}`);
    const rewritten = new URL(config.connectionString);
    expect([rewritten.username, rewritten.password, rewritten.host, rewritten.pathname, rewritten.searchParams.get('sslmode')]).toEqual(['relay', 'p%40ss', 'db:5432', '/billing', 'disable']);
  });

  it('leaves a URL without options as it is, and keeps PGOPTIONS (pg reads it only when no options are given)', () => {
    const url = 'postgres://relay@db/billing';
    vi.stubEnv('PGOPTIONS', '-c search_path=billing');
    for (const kind of [{}, { replication: true }]) {
      const config = pgConnectionConfig(databaseAccess(url), 'test', kind) as { connectionString: string; options?: string };
      expect(config.connectionString).toBe(url);
      expect(startupOptions(config)).toBe(`-c search_path=billing ${FIXED}`);
    }
  });

  it('names the settings the operator asked for and the relay overrides, in any spelling Postgres reads', () => {
    const url = (options: string) => `postgres://db/x?options=${encodeURIComponent(options)}`;
    expect(overriddenSessionSettings(databaseAccess(url('-c datestyle=German -cTimeZone=UTC --bytea-output=escape -c search_path=a')))).toEqual({ source: "DATABASE_URL's options", settings: ['DateStyle', 'TimeZone', 'bytea_output'] });
    expect(overriddenSessionSettings(databaseAccess(url('-c search_path=a'))).settings).toEqual([]);
    vi.stubEnv('PGOPTIONS', '-c IntervalStyle=iso_8601');
    expect(overriddenSessionSettings(databaseAccess('postgres://db/x'))).toEqual({ source: 'PGOPTIONS', settings: ['IntervalStyle'] });
  });
});
