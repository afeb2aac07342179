import { describe, expect, it } from 'vitest';
import { connectPostgres, databaseAccess, pgConnectionConfigs } from './pg-connection.js';
import { RelayError } from './errors.js';
import { editPostgresUrl, parsePostgresUrl } from './pg-url.js';
import { redactConnectionString } from './security/redact.js';

describe('DATABASE_URL with several hosts (libpq multi-host URLs)', () => {
  it('leaves a one-host URL exactly as it was, unchecked', () => {
    const url = 'postgres://relay:p%40ss@db:5432/billing?sslmode=verify-full&options=-c%20search_path%3Dx';
    expect(parsePostgresUrl(url)).toEqual({ urls: [url], hosts: ['db:5432'], target: null });
    expect(parsePostgresUrl('postgres:///billing?host=/var/run/postgresql').hosts).toEqual(['/var/run/postgresql']);
  });

  it('splits the host list into one URL per host, in order, each keeping user, database and parameters', () => {
    const parsed = parsePostgresUrl('postgresql://relay:s3cret@db1:5432,db2,[::1]:5433/billing?sslmode=require');
    expect(parsed.hosts).toEqual(['db1:5432', 'db2', '[::1]:5433']);
    expect(parsed.urls).toEqual([
      'postgresql://relay:s3cret@db1:5432/billing?sslmode=require',
      'postgresql://relay:s3cret@db2/billing?sslmode=require',
      'postgresql://relay:s3cret@[::1]:5433/billing?sslmode=require',
    ]);
    // With several hosts the relay keeps the first primary (not in recovery), as libpq's read-write.
    expect(parsed.target).toBe('primary');
  });

  it('takes target_session_attrs=read-write or primary (also for one host, then checked) and leaves it out of what pg sees', () => {
    expect(parsePostgresUrl('postgres://db1,db2/x?target_session_attrs=primary')).toMatchObject({ target: 'primary', urls: ['postgres://db1/x', 'postgres://db2/x'] });
    expect(parsePostgresUrl('postgres://db/x?target_session_attrs=read-write&sslmode=disable')).toEqual({ target: 'read-write', hosts: ['db'], urls: ['postgres://db/x?sslmode=disable'] });
  });

  it('refuses what would connect the relay to a standby, and host lists it cannot read', () => {
    for (const attrs of ['any', 'read-only', 'standby', 'prefer-standby']) {
      expect(() => parsePostgresUrl(`postgres://db1,db2/x?target_session_attrs=${attrs}`)).toThrow(/the relay needs the primary: primary \(the default with several hosts\) or read-write/);
    }
    expect(() => parsePostgresUrl('postgres://db1,,db2/x')).toThrow(/empty host/);
    expect(() => parsePostgresUrl('postgres://db1:port,db2/x')).toThrow(/is not a URL/);
  });

  it('gives pg one config per host with the same settings', () => {
    const configs = pgConnectionConfigs(databaseAccess('postgres://relay:pw@10.0.0.1:5432,10.0.0.2:6432/billing?sslmode=disable&target_session_attrs=read-write'), 'outbox-relay', { replication: true });
    expect(configs.map((config) => [config.host, config.port, config.user, config.password, config.database, config.ssl, (config as { replication?: string }).replication])).toEqual([
      ['10.0.0.1', '5432', 'relay', 'pw', 'billing', false, 'database'],
      ['10.0.0.2', '6432', 'relay', 'pw', 'billing', false, 'database'],
    ]);
    expect(configs.every((config) => !('target_session_attrs' in config))).toBe(true);
  });

  it('shows a multi-host URL with its host list and its secrets hidden', () => {
    expect(redactConnectionString('postgres://relay:s3cret@db1:5432,db2:5432/billing?sslpassword=k&target_session_attrs=read-write')).toBe(
      'postgres://relay:***@db1:5432,db2:5432/billing?sslpassword=***&target_session_attrs=read-write',
    );
    expect(editPostgresUrl('postgres://db/x', () => undefined)).toBe('postgres://db/x');
  });

  it('with no host reachable: SOURCE_NO_PRIMARY (retriable: a failover may be under way) naming each host', async () => {
    const error = await connectPostgres(databaseAccess('postgres://relay@127.0.0.1:1,127.0.0.1:2/billing'), 'test').catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(RelayError);
    expect(error).toMatchObject({ code: 'SOURCE_NO_PRIMARY', retriable: true });
    expect((error as Error).message).toMatch(/127\.0\.0\.1:1: .*ECONNREFUSED.*; 127\.0\.0\.1:2: .*ECONNREFUSED/);
  });
});
