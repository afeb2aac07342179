import type { LookupAddress } from 'node:dns';
import { connect, createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { AddressGuard, AddressRefused } from './address-guard.js';

const guard = new AddressGuard([]);

describe('the address guard (SSRF)', () => {
  it('refuses every IPv4 range that is not the public internet, naming the range', () => {
    const cases: [string, string][] = [
      ['0.1.2.3', '0.0.0.0/8'],
      ['10.20.30.40', '10.0.0.0/8'],
      ['100.64.0.1', '100.64.0.0/10'],
      ['100.127.255.254', '100.64.0.0/10'],
      ['127.0.0.1', '127.0.0.0/8'],
      ['127.255.0.9', '127.0.0.0/8'],
      ['169.254.169.254', '169.254.0.0/16'],
      ['172.16.0.1', '172.16.0.0/12'],
      ['172.31.255.255', '172.16.0.0/12'],
      ['192.0.0.8', '192.0.0.0/24'],
      ['192.0.2.1', '192.0.2.0/24'],
      ['192.168.1.1', '192.168.0.0/16'],
      ['198.18.0.1', '198.18.0.0/15'],
      ['198.19.255.1', '198.18.0.0/15'],
      ['198.51.100.7', '198.51.100.0/24'],
      ['203.0.113.7', '203.0.113.0/24'],
      ['224.0.0.251', '224.0.0.0/4'],
      ['239.255.255.250', '224.0.0.0/4'],
      ['240.0.0.1', '240.0.0.0/4'],
      ['255.255.255.255', '240.0.0.0/4'],
    ];
    for (const [address, cidr] of cases) {
      expect(guard.refusal(address)?.startsWith(`${address} is `), address).toBe(true);
      expect(guard.refusal(address), address).toContain(`(${cidr}); add it to OUTBOX_WEBHOOK_ALLOW_ADDRESSES to allow it`);
    }
    expect(guard.refusal('127.0.0.1')).toBe('127.0.0.1 is a loopback address (127.0.0.0/8); add it to OUTBOX_WEBHOOK_ALLOW_ADDRESSES to allow it');
    expect(guard.refusal('169.254.169.254')).toMatch(/link-local address \(where cloud metadata services answer\) \(169\.254\.0\.0\/16\)/);
  });

  it('refuses every IPv6 range that is not the public internet, naming the range', () => {
    const cases: [string, string][] = [
      ['::', '::/128'],
      ['::1', '::1/128'],
      ['fc00::1', 'fc00::/7'],
      ['fd00:ec2::254', 'fc00::/7'],
      ['fe80::1', 'fe80::/10'],
      ['febf::1', 'fe80::/10'],
      ['ff02::1', 'ff00::/8'],
      ['2001:db8::1', '2001:db8::/32'],
      ['100::1', '100::/64'],
    ];
    for (const [address, cidr] of cases) {
      expect(guard.refusal(address)?.startsWith(`${address} is `), address).toBe(true);
      expect(guard.refusal(address), address).toContain(`(${cidr}); add it to OUTBOX_WEBHOOK_ALLOW_ADDRESSES to allow it`);
    }
  });

  it('judges IPv4-mapped and NAT64 addresses by the IPv4 address they carry, in either notation', () => {
    expect(guard.refusal('::ffff:127.0.0.1')).toBe('::ffff:127.0.0.1 is an IPv4-mapped address (::ffff:0:0/96) of 127.0.0.1, a loopback address (127.0.0.0/8); add it to OUTBOX_WEBHOOK_ALLOW_ADDRESSES to allow it');
    expect(guard.refusal('::ffff:7f00:1')).toContain('of 127.0.0.1, a loopback address (127.0.0.0/8)');
    expect(guard.refusal('::ffff:10.0.0.1')).toContain('of 10.0.0.1, a private address (10.0.0.0/8)');
    expect(guard.refusal('::ffff:a9fe:a9fe')).toContain('of 169.254.169.254, a link-local address');
    expect(guard.refusal('64:ff9b::10.0.0.1')).toContain('is a NAT64 address (64:ff9b::/96) of 10.0.0.1, a private address');
    expect(guard.refusal('64:ff9b::7f00:1')).toContain('of 127.0.0.1, a loopback address');
    expect(guard.refusal('::ffff:8.8.8.8')).toBeNull();
    expect(guard.refusal('64:ff9b::808:808')).toBeNull();
  });

  it('allows public addresses', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '100.128.0.1', '172.32.0.1', '192.0.3.1', '198.20.0.1', '223.255.255.255', '2606:4700::1111', '2a00:1450:4001::200e', 'fec0::1']) {
      expect(guard.refusal(address), address).toBeNull();
    }
  });

  it('refuses what is not an IP address', () => {
    expect(guard.refusal('example.com')).toBe('example.com is not an IP address');
  });

  it('admits what the allow-list names, and only that', () => {
    const allowing = new AddressGuard(['127.0.0.0/8', '::1/128', '10.1.2.0/24', '192.168.7.7', 'fd00:ec2::254']);
    expect(allowing.refusal('127.0.0.1')).toBeNull();
    expect(allowing.refusal('::1')).toBeNull();
    expect(allowing.refusal('10.1.2.200')).toBeNull();
    expect(allowing.refusal('192.168.7.7')).toBeNull();
    expect(allowing.refusal('fd00:ec2::254')).toBeNull();
    expect(allowing.refusal('::ffff:127.0.0.1')).toBeNull();
    expect(allowing.refusal('10.0.0.1')).toContain('(10.0.0.0/8)');
    expect(allowing.refusal('10.1.3.1')).toContain('(10.0.0.0/8)');
    expect(allowing.refusal('192.168.7.8')).toContain('(192.168.0.0/16)');
    expect(allowing.refusal('::ffff:10.0.0.1')).toContain('of 10.0.0.1, a private address (10.0.0.0/8)');
    expect(allowing.refusal('169.254.169.254')).toContain('(169.254.0.0/16)');
  });

  it('refuses allow-list entries that are not an address or a CIDR, naming the entry and the expected form', () => {
    for (const entry of ['localhost', '10.0.0.0/33', '::1/129', '10.0.0.0/', '10.0.0.0/8/8', '10.0.0/8', '10.0.0.0/x', '', '300.1.1.1']) {
      expect(() => new AddressGuard([entry]), entry).toThrow(`OUTBOX_WEBHOOK_ALLOW_ADDRESSES entry "${entry}" is not an address or a CIDR: expected e.g. 10.1.2.0/24`);
    }
  });

  describe('check (when an endpoint is added)', () => {
    it('refuses IP literals, IPv6 ones in brackets too, with the host, the address and the reason', async () => {
      const refused = await guard.check(new URL('https://169.254.169.254/latest/meta-data')).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(AddressRefused);
      expect(refused).toMatchObject({ code: 'WEBHOOK_ADDRESS_REFUSED', host: '169.254.169.254', address: '169.254.169.254' });
      expect((refused as Error).message).toBe('refused to connect to 169.254.169.254: 169.254.169.254 is a link-local address (where cloud metadata services answer) (169.254.0.0/16); add it to OUTBOX_WEBHOOK_ALLOW_ADDRESSES to allow it');
      await expect(guard.check(new URL('http://[::1]:8080/'))).rejects.toThrow('refused to connect to ::1: ::1 is a loopback address (::1/128)');
      await expect(guard.check(new URL('http://[::ffff:127.0.0.1]/'))).rejects.toBeInstanceOf(AddressRefused);
      // The URL parser reads these as 127.0.0.1.
      await expect(guard.check(new URL('http://2130706433/'))).rejects.toThrow('127.0.0.0/8');
      await expect(guard.check(new URL('http://0x7f.1/'))).rejects.toThrow('127.0.0.0/8');
      await expect(guard.check(new URL('https://8.8.8.8/'))).resolves.toBeUndefined();
      await expect(guard.check(new URL('https://[2606:4700::1111]/'))).resolves.toBeUndefined();
    });

    it('resolves a host name and refuses it if any of its addresses is refused', async () => {
      const refused = await guard.check(new URL('http://localhost:1/')).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(AddressRefused);
      expect((refused as AddressRefused).message).toMatch(/^refused to connect to localhost \(resolved to (::1|127\.0\.0\.1)\): .* is a loopback address/);
      // localhost may resolve to ::1 as well: admitting 127.0.0.0/8 alone is not enough for it.
      await expect(new AddressGuard(['127.0.0.0/8', '::1/128']).check(new URL('http://localhost:1/'))).resolves.toBeUndefined();
    });

    it('says when a name does not resolve, with the DNS code', async () => {
      const failed = await guard.check(new URL('https://nothing.invalid/')).catch((error: unknown) => error);
      expect(failed).not.toBeInstanceOf(AddressRefused);
      expect((failed as Error).message).toMatch(/^could not resolve nothing\.invalid \((ENOTFOUND|EAI_AGAIN|EAI_FAIL)\)/);
    });
  });

  describe('lookup (at every connection)', () => {
    const lookup = (g: AddressGuard, host: string, all: boolean): Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number }> =>
      new Promise((resolve) => g.lookup(host, { all }, (error, address, family) => resolve({ error, address, family })));

    it('fails the lookup with AddressRefused when a resolved address is refused', async () => {
      for (const all of [true, false]) {
        const { error } = await lookup(guard, 'localhost', all);
        expect(error).toBeInstanceOf(AddressRefused);
        expect(error?.message).toMatch(/^refused to connect to localhost \(resolved to .*\): .* is a loopback address/);
      }
    });

    it('answers as dns.lookup does when every address is allowed, one or all as asked', async () => {
      const allowing = new AddressGuard(['127.0.0.0/8', '::1/128']);
      const all = await lookup(allowing, 'localhost', true);
      expect(all.error).toBeNull();
      expect(Array.isArray(all.address) && all.address.length > 0 && all.address.every((a) => a.address === '::1' || a.address.startsWith('127.'))).toBe(true);
      const one = await lookup(allowing, 'localhost', false);
      expect(one.error).toBeNull();
      expect(typeof one.address).toBe('string');
      expect([4, 6]).toContain(one.family);
    });

    it('stops a real connection before it is made: the server sees nothing', async () => {
      let connections = 0;
      const server = createServer(() => connections++);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as { port: number };
      try {
        const error = await new Promise<Error>((resolve) => {
          connect({ host: 'localhost', port, lookup: guard.lookup }).on('error', resolve).on('connect', () => resolve(new Error('connected')));
        });
        expect(error).toBeInstanceOf(AddressRefused);
        expect(connections).toBe(0);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });
});
