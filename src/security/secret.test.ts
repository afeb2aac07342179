import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { redactConnectionString } from './redact.js';
import { Secret } from './secret.js';

describe('Secret', () => {
  it('never prints its value: template, JSON, inspect, error message', () => {
    const secret = Secret.fromValue('KAFKA_SASL_PASSWORD', 's3cr3t-value');
    const shown = [`${secret}`, JSON.stringify({ secret }), inspect({ secret }), String(new Error(`failed with ${secret}`))];
    for (const text of shown) expect(text).not.toContain('s3cr3t-value');
    expect(secret.reveal()).toBe('s3cr3t-value');
  });

  it('from a file: read again at each reveal (rotation without restart), trailing newline dropped', () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'secret-')), 'password');
    writeFileSync(file, 'first\n');
    const secret = Secret.fromFile('DATABASE_PASSWORD_FILE', file);
    expect(secret.reveal()).toBe('first');
    writeFileSync(file, 'rotated');
    expect(secret.reveal()).toBe('rotated');
    expect(JSON.stringify(secret)).toBe(`"(redacted) from ${file}"`);
  });

  it("from a file: a rotated value its check refuses, or a file gone, keeps the last good value with a warning", async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'secret-')), 'key');
    writeFileSync(file, 'a-key-long-enough-0123456789abcdef');
    const atLeast32 = (value: string) => {
      if (value.length < 32) throw new Error(`has ${value.length} characters`);
    };
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const secret = Secret.fromFile('OUTBOX_WEBHOOK_API_SIGNING_KEY_FILE', file, atLeast32);
      writeFileSync(file, 'short');
      expect(secret.reveal()).toBe('a-key-long-enough-0123456789abcdef');
      expect(secret.reveal()).toBe('a-key-long-enough-0123456789abcdef');
      rmSync(file);
      expect(secret.reveal()).toBe('a-key-long-enough-0123456789abcdef');
      writeFileSync(file, 'a-rotated-key-long-enough-0123456789');
      expect(secret.reveal()).toBe('a-rotated-key-long-enough-0123456789');
      expect(() => Secret.fromFile('OUTBOX_WEBHOOK_API_SIGNING_KEY_FILE', (writeFileSync(file, 'short'), file), atLeast32)).toThrow(/has 5 characters/);
    } finally {
      await new Promise((resolve) => setImmediate(resolve));
      process.off('warning', onWarning);
    }
    expect(warnings).toEqual([expect.stringMatching(/refuses \(has 5 characters\); the last good value is kept/), expect.stringMatching(/cannot read .* \(ENOENT\).*; the last good value is kept/)]);
  });

  it('a missing or empty file is a configuration error naming the variable and the file', () => {
    expect(() => Secret.fromFile('KAFKA_SASL_PASSWORD_FILE', '/nonexistent/pw')).toThrow(/KAFKA_SASL_PASSWORD_FILE: cannot read \/nonexistent\/pw \(ENOENT\)/);
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'secret-')), 'empty');
    writeFileSync(file, '\n');
    expect(() => Secret.fromFile('KAFKA_SASL_PASSWORD_FILE', file)).toThrow(/is empty/);
  });
});

describe('redactConnectionString', () => {
  it('masks the password and every secret query parameter, keeps the rest', () => {
    const shown = redactConnectionString('postgres://relay:pw1@db:5432/billing?password=pw2&sslpassword=pw3&sslmode=verify-full&sslrootcert=/tls/ca.pem');
    expect(shown).not.toMatch(/pw1|pw2|pw3/);
    expect(shown).toContain('sslmode=verify-full');
    expect(shown).toContain('sslrootcert=%2Ftls%2Fca.pem');
  });

  it('masks a password that URL parsers would take for a host, port or query (unencoded / ? #)', () => {
    for (const url of ['postgres://relay:12345/x@db:5432/billing', 'postgres://relay:?tok=s3cr3t@db/billing', 'postgres://relay:/abc#def@db/billing']) {
      const shown = redactConnectionString(url);
      expect(shown, url).not.toMatch(/12345|s3cr3t|abc/);
      expect(shown, url).toContain('relay:***@db');
    }
  });

  it('shows nothing of a value that is not a URL', () => {
    expect(redactConnectionString('host=db password=pw1')).toBe('(redacted: not a URL)');
  });
});
