/**
 * SSRF protection: a customer's webhook URL must not make the relay talk to its own network —
 * loopback, private ranges, the cloud metadata service. Checked when an endpoint is added
 * (`check`) and again at every connection (`lookup`), so a name that later resolves to an
 * internal address (DNS rebinding) is refused where it matters. No HTTP client here: the unit
 * tests run on Node 20.
 */
import dns from 'node:dns';
import { BlockList, isIP, isIPv6, type LookupFunction } from 'node:net';

const ALLOW_SETTING = 'OUTBOX_WEBHOOK_ALLOW_ADDRESSES';

/** A connection the guard refused: the host as the URL gave it, the address it came to, and why. */
export class AddressRefused extends Error {
  readonly code = 'WEBHOOK_ADDRESS_REFUSED';

  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: string,
  ) {
    super(`refused to connect to ${host}${host === address ? '' : ` (resolved to ${address})`}: ${reason}`);
    this.name = 'AddressRefused';
  }
}

interface Range {
  readonly cidr: string;
  readonly what: string;
  readonly list: BlockList;
}

const IPV4: readonly Range[] = [
  range('0.0.0.0/8', 'a "this network" address'),
  range('10.0.0.0/8', 'a private address'),
  range('100.64.0.0/10', 'a shared (carrier-grade NAT) address'),
  range('127.0.0.0/8', 'a loopback address'),
  range('169.254.0.0/16', 'a link-local address (where cloud metadata services answer)'),
  range('172.16.0.0/12', 'a private address'),
  range('192.0.0.0/24', 'an IETF protocol assignment'),
  range('192.0.2.0/24', 'a documentation address'),
  range('192.168.0.0/16', 'a private address'),
  range('198.18.0.0/15', 'a benchmarking address'),
  range('198.51.100.0/24', 'a documentation address'),
  range('203.0.113.0/24', 'a documentation address'),
  range('224.0.0.0/4', 'a multicast address'),
  range('240.0.0.0/4', 'a reserved address'),
];

const IPV6: readonly Range[] = [
  range('::/128', 'the unspecified address'),
  range('::1/128', 'a loopback address'),
  range('fc00::/7', 'a unique local (private) address'),
  range('fe80::/10', 'a link-local address'),
  range('ff00::/8', 'a multicast address'),
  range('2001:db8::/32', 'a documentation address'),
  range('100::/64', 'a discard-only address'),
];

// These carry an IPv4 address in their last 32 bits, and a connection to them reaches it (the
// kernel for mapped addresses, a NAT64 gateway for the other): the IPv4 address is what is judged.
const EMBEDS_IPV4: readonly Range[] = [
  range('::ffff:0:0/96', 'an IPv4-mapped address'),
  range('64:ff9b::/96', 'a NAT64 address'),
];

export class AddressGuard {
  private readonly allowed = new BlockList();

  /** `allow`: CIDRs or single addresses admitted despite the ranges above (tests, private deployments). */
  constructor(allow: readonly string[]) {
    for (const entry of allow) {
      const [address = '', prefix, extra] = entry.trim().split('/');
      const family = isIP(address);
      const bits = family === 6 ? 128 : 32;
      if (family === 0 || extra !== undefined || (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits))) {
        throw new Error(`${ALLOW_SETTING} entry "${entry}" is not an address or a CIDR: expected e.g. 10.1.2.0/24, 10.1.2.3, fd00::/8 or ::1`);
      }
      const type = family === 6 ? 'ipv6' : 'ipv4';
      if (prefix === undefined) this.allowed.addAddress(address, type);
      else this.allowed.addSubnet(address, Number(prefix), type);
    }
  }

  /** Why a connection to `address` is refused, as a sentence an operator can act on; null if it is not. */
  refusal(address: string): string | null {
    const family = isIP(address);
    if (family === 0) return `${address} is not an IP address`;
    const type = family === 6 ? 'ipv6' : 'ipv4';
    if (this.allowed.check(address, type)) return null;
    const advice = `; add it to ${ALLOW_SETTING} to allow it`;
    if (family === 4) {
      const hit = IPV4.find((r) => r.list.check(address, 'ipv4'));
      return hit ? `${address} is ${hit.what} (${hit.cidr})${advice}` : null;
    }
    const carrier = EMBEDS_IPV4.find((r) => r.list.check(address, 'ipv6'));
    if (carrier) {
      const inner = embeddedIPv4(address);
      if (this.allowed.check(inner, 'ipv4')) return null;
      const hit = IPV4.find((r) => r.list.check(inner, 'ipv4'));
      return hit ? `${address} is ${carrier.what} (${carrier.cidr}) of ${inner}, ${hit.what} (${hit.cidr})${advice}` : null;
    }
    const hit = IPV6.find((r) => r.list.check(address, 'ipv6'));
    return hit ? `${address} is ${hit.what} (${hit.cidr})${advice}` : null;
  }

  /** Throws AddressRefused if the URL's host is, or resolves to, any refused address. */
  async check(url: URL): Promise<void> {
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const addresses = isIP(host) !== 0 ? [host] : await resolve(host);
    for (const address of addresses) {
      const reason = this.refusal(address);
      if (reason !== null) throw new AddressRefused(host, address, reason);
    }
  }

  /**
   * For `net.connect({ lookup })` (undici's `connect.lookup`): resolves as `dns.lookup` does and
   * fails the connection with AddressRefused if any address is refused — all of them, as `check`
   * does, so that the answer does not depend on which address the connection would try first.
   * Node does not call it for IP literals: those are for `check`.
   */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '');
      for (const { address } of addresses) {
        const reason = this.refusal(address);
        if (reason !== null) return callback(new AddressRefused(hostname, address, reason), '');
      }
      if (options.all) return callback(null, addresses);
      // getaddrinfo answers at least one address, or an error.
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

async function resolve(host: string): Promise<string[]> {
  try {
    const addresses = await dns.promises.lookup(host, { all: true, verbatim: true });
    return addresses.map((a) => a.address);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    throw new Error(`could not resolve ${host} (${code}): check the URL's host name`, { cause: error });
  }
}

function range(cidr: string, what: string): Range {
  const [address = '', prefix = ''] = cidr.split('/');
  const list = new BlockList();
  list.addSubnet(address, Number(prefix), isIPv6(address) ? 'ipv6' : 'ipv4');
  return { cidr, what, list };
}

/** The IPv4 address in the last 32 bits of an IPv6 address, in either notation (::ffff:7f00:1, ::ffff:127.0.0.1). */
function embeddedIPv4(address: string): string {
  const tail = address.slice(address.lastIndexOf(':') + 1);
  if (tail.includes('.')) return tail;
  const groups = expand(address);
  const high = groups[6] ?? 0;
  const low = groups[7] ?? 0;
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

/** The eight 16-bit groups of an IPv6 address in hexadecimal notation (`isIPv6` accepted it). */
function expand(address: string): number[] {
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((group) => parseInt(group, 16));
}
